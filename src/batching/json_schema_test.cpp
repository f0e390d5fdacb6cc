// The schema compiler and walker against an independent validator (json_schema_oracle_test_util.h):
// random walks that pick among the bytes the walker accepts must never get stuck and must end in
// texts the validator accepts; one-byte mutations of those the walker still takes whole must be
// valid too; re-serialized valid values must be taken whole; hand-written texts are taken exactly
// when the validator accepts them (strings held to patterns among them); and the walker's own
// choices (no exponent on bounded numbers, no \u escape in a pattern string, ...) hold. What the
// compiler refuses is json_schema_compile_test.cpp's.
#include "batching/json_schema.h"

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "batching/json_schema_oracle_test_util.h"
#include "batching/json_schema_prefix.h"

namespace cellm {
namespace {

using nlohmann::json;

constexpr int kWhitespaceRun = 4;

const std::vector<std::string>& schemas() {
  static const std::vector<std::string> kSchemas = {
      // 0: a record with bounded strings, an integer, a nullable field and an enum list
      R"({"type": "object", "properties": {
            "name": {"type": "string", "minLength": 1, "maxLength": 8},
            "age": {"type": "integer"},
            "email": {"type": ["string", "null"]},
            "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "ab", "b"]},
                     "maxItems": 3}},
          "required": ["name", "age"], "additionalProperties": false})",
      // 1: a recursive tree through $defs
      R"({"$ref": "#/$defs/node", "$defs": {"node": {"type": "object", "properties": {
            "value": {"type": "number"},
            "children": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}},
          "required": ["value"], "additionalProperties": false}}})",
      // 2: a union chosen by type, a tuple, other keys free
      R"({"type": "object", "properties": {"x": {"anyOf": [
            {"type": "string", "maxLength": 3}, {"type": "integer"}, {"type": "null"},
            {"type": "array", "prefixItems": [{"const": true}, {"enum": [1, 12, "z", null]}],
             "items": false, "minItems": 1}]}},
          "required": ["x"]})",
      // 3: property names that are prefixes of each other
      R"({"type": "object", "properties": {"a": {"type": "boolean"}, "ab": {"type": "null"},
            "abc": {"type": "integer"}}, "required": ["abc"], "additionalProperties": false})",
      // 4: an enum of values of every kind, at the top
      R"({"enum": [{"k": 1}, {"k": [1, 2]}, "s", 3, 3.5, true, null, [], "é"]})",
      // 5: anything
      R"({})",
      // 6: extra keys of one type beside a declared one
      R"({"type": "object", "properties": {"n": {"type": "string"}},
          "additionalProperties": {"type": "integer"}})",
      // 7: an array of 2-4 records
      R"({"type": "array", "items": {"type": "object", "properties": {"id": {"type": "integer"}},
            "required": ["id"]}, "minItems": 2, "maxItems": 4})",
      // 8: oneOf by type, a const string
      R"({"oneOf": [{"type": "boolean"}, {"type": "object", "properties": {"q": {"const": "yes"}},
            "required": ["q"], "additionalProperties": false}]})",
      // 9: a required property only named in "required" (any value), and an empty-only object
      R"({"type": "object", "required": ["z"], "properties": {"e": {"type": "object",
            "additionalProperties": false}, "never": false}})",
      // 10: a property whose every value would hold another without end, beside a plain one
      R"({"type": "object", "properties": {"loop": {"$ref": "#/$defs/l"}, "ok": {"type": "integer"},
            "list": {"type": "array", "prefixItems": [{"type": "null"}, {"$ref": "#/$defs/l"}]}},
          "additionalProperties": false,
          "$defs": {"l": {"type": "object", "properties": {"next": {"$ref": "#/$defs/l"}},
            "required": ["next"]}}})",
      // 11: bounded integers, a date-time string, two to three keys
      R"({"type": "object", "properties": {
            "n": {"type": "integer", "minimum": -5, "exclusiveMaximum": 120},
            "m": {"type": "integer", "minimum": 1000, "maximum": 1010},
            "k": {"type": "integer", "exclusiveMinimum": 0.5, "maximum": 3},
            "when": {"type": "string", "format": "date-time"}},
          "required": ["n", "m"], "minProperties": 2, "maxProperties": 3})",
      // 12: at least two of three declared keys
      R"({"type": "object", "properties": {"a": {"type": "boolean"}, "b": {"type": "boolean"},
            "c": {"type": "boolean"}}, "minProperties": 2, "additionalProperties": false})",
      // 13: large negative integers
      R"({"type": "array", "items": {"type": "integer", "minimum": -1000000000000,
            "maximum": -7}, "maxItems": 3})",
      // 14: numbers with whole-number bounds, inclusive and exclusive
      R"({"type": "object", "properties": {"p": {"type": "number", "minimum": 0, "maximum": 1},
            "t": {"type": "number", "exclusiveMinimum": -3, "exclusiveMaximum": 0},
            "big": {"type": ["number", "null"], "minimum": 100}},
          "required": ["p", "t"], "additionalProperties": false})",
      // 15: strings held to patterns, with lengths, beside another type, in an array
      R"({"type": "object", "properties": {
            "zip": {"type": "string", "pattern": "^\\d{3}(-\\d{2})?$"},
            "code": {"type": "string", "pattern": "[A-Z]{2}", "maxLength": 4},
            "word": {"type": ["string", "integer"], "pattern": "^(é|a|\\n)+$", "minLength": 2},
            "tags": {"type": "array", "items": {"type": "string", "pattern": "^x.?$"},
                     "maxItems": 3}},
          "required": ["zip", "code"], "additionalProperties": false})",
      // 16: asserted formats, beside null, in an array, with a length bound, in an enum; a
      // format that stays an annotation
      R"({"type": "object", "properties": {
            "day": {"type": "string", "format": "date"},
            "at": {"type": ["string", "null"], "format": "time"},
            "id": {"type": "string", "format": "uuid"},
            "hosts": {"type": "array", "items": {"type": "string", "format": "ipv4"},
                      "maxItems": 2},
            "v6": {"type": "string", "format": "ipv6"},
            "mail": {"type": "string", "format": "email", "maxLength": 12},
            "span": {"type": "string", "format": "duration"},
            "site": {"type": "string", "format": "uri"},
            "pick": {"enum": ["2024-02-29", "2023-02-29", 7], "format": "date"}},
          "required": ["day", "pick"], "additionalProperties": false})",
  };
  return kSchemas;
}

std::shared_ptr<const JsonSchema> compiled(const std::string& text) {
  StatusOr<std::shared_ptr<const JsonSchema>> schema = JsonSchema::compile(text);
  EXPECT_TRUE(schema.ok()) << schema.status().message() << "\n" << text;
  return schema.ok() ? *schema : JsonSchema::any_object();
}

bool takes_whole(const std::shared_ptr<const JsonSchema>& schema, const std::string& text) {
  JsonSchemaPrefix walker(schema, kWhitespaceRun);
  return walker.feed(text) && walker.complete();
}

// Whether the validator takes `text`; nullopt for a number beyond a double's range (valid JSON
// that nlohmann::json cannot hold, so the validator cannot say).
std::optional<bool> oracle_takes(const json& root, const std::string& text) {
  json value;
  try {
    value = json::parse(text);
  } catch (const json::out_of_range&) {
    return std::nullopt;
  } catch (const json::exception&) {
    return false;
  }
  return testing::oracle_valid(root, root, value);
}

// Pieces a walk writes to end soon: the schema's required keys first (so that objects open to
// other keys still get them), then what closes strings and containers.
std::vector<std::string> finishing_pieces(size_t schema_index) {
  std::vector<std::string> pieces = {"\"", "}", "]", ":", "0", "-7", "null", "true", ","};
  std::vector<std::string> keys;
  if (schema_index == 2) keys = {"x\":0"};
  if (schema_index == 7) keys = {"id\":0"};
  if (schema_index == 9) keys = {"z\":0"};
  if (schema_index == 11) keys = {"n\":0", "m\":1005"};
  if (schema_index == 14) keys = {"p\":0", "t\":-1"};
  if (schema_index == 15) keys = {"zip\":\"123\"", "code\":\"AB\""};
  pieces.insert(pieces.begin(), keys.begin(), keys.end());
  return pieces;
}

// A walk of random accepted bytes; after `budget` bytes it mostly writes the first finishing
// piece the walker takes. Every byte is checked first: some byte must be accepted unless the
// text is complete. Returns the text once complete (and stopping), or nullopt past `limit` bytes.
std::optional<std::string> random_walk(const std::shared_ptr<const JsonSchema>& schema,
                                       const std::vector<std::string>& pieces, std::mt19937& rng,
                                       size_t budget, size_t limit) {
  JsonSchemaPrefix walker(schema, kWhitespaceRun);
  std::string text;
  std::string queued;  // the rest of a finishing piece
  while (text.size() < limit) {
    if (walker.complete() && (text.size() >= budget || rng() % 4 == 0)) return text;
    std::vector<unsigned char> accepted;
    for (int b = 0; b < 256; ++b) {
      const char c = static_cast<char>(b);
      if (walker.accepts(std::string_view(&c, 1)))
        accepted.push_back(static_cast<unsigned char>(b));
    }
    if (accepted.empty()) {
      EXPECT_TRUE(walker.complete()) << "stuck after: " << text;
      return walker.complete() ? std::optional<std::string>(text) : std::nullopt;
    }
    if (queued.empty() && text.size() >= budget && rng() % 5 != 0) {
      for (const std::string& piece : pieces) {
        if (walker.accepts(piece)) {
          queued = piece;
          break;
        }
      }
    }
    char c = static_cast<char>(accepted[rng() % accepted.size()]);
    if (!queued.empty()) {
      c = queued[0];
      queued.erase(0, 1);
    }
    EXPECT_TRUE(walker.feed(std::string_view(&c, 1)));
    text.push_back(c);
  }
  return std::nullopt;
}

// Whether a value holds a float with an integral value (a walker writes integers as such) or one
// nlohmann writes with an exponent (a bounded number has none).
bool has_integral_float(const json& value) {
  if (value.is_number_float()) {
    return std::floor(value.get<double>()) == value.get<double>() ||
           value.dump().find_first_of("eE") != std::string::npos;
  }
  if (value.is_structured()) {
    for (const json& child : value) {
      if (has_integral_float(child)) return true;
    }
  }
  return false;
}

TEST(JsonSchemaPrefixTest, RandomWalksNeverGetStuckAndEndInValidTexts) {
  std::mt19937 rng(20261205);
  for (size_t i = 0; i < schemas().size(); ++i) {
    SCOPED_TRACE("schema " + std::to_string(i));
    const json root = json::parse(schemas()[i]);
    const std::shared_ptr<const JsonSchema> schema = compiled(schemas()[i]);
    int finished = 0;
    for (int walk = 0; walk < 60; ++walk) {
      const std::optional<std::string> text =
          random_walk(schema, finishing_pieces(i), rng, rng() % 300, 6000);
      if (!text.has_value() || !oracle_takes(root, *text).has_value()) continue;
      ++finished;
      EXPECT_TRUE(*oracle_takes(root, *text)) << *text;
      // The same value written compactly (keys sorted, numbers respelled) is taken whole.
      const json value = json::parse(*text);
      if (!has_integral_float(value)) {
        EXPECT_TRUE(takes_whole(schema, value.dump())) << value.dump();
      }
      // A one-byte change the walker still takes whole is valid too.
      for (int m = 0; m < 40; ++m) {
        std::string mutated = *text;
        const size_t at = rng() % (mutated.size() + 1);
        static const std::string kBytes = "{}[]\",:0123456789.-eE ntrufalsxyz\xc3\xa9\\";
        const char byte = kBytes[rng() % kBytes.size()];
        switch (rng() % 3) {
          case 0:
            if (at < mutated.size()) mutated[at] = byte;
            break;
          case 1:
            mutated.insert(mutated.begin() + static_cast<std::ptrdiff_t>(at), byte);
            break;
          default:
            if (at < mutated.size()) mutated.erase(at, 1);
        }
        if (takes_whole(schema, mutated)) {
          EXPECT_NE(oracle_takes(root, mutated), std::optional<bool>(false)) << mutated;
        }
      }
    }
    EXPECT_GE(finished, 30) << "too few walks ended: the completeness checks ran too rarely";
  }
}

TEST(JsonSchemaPrefixTest, HandWrittenTextsAreTakenExactlyWhenValid) {
  const std::vector<std::pair<size_t, std::string>> cases = {
      {0, R"({"name": "Al", "age": 30})"},
      {0, R"({"age": -4, "name": "Alexande", "email": null})"},
      {0, R"({"age": 3, "name": "Alexander"})"},
      {0, R"({"name": "", "age": 3})"},
      {0, R"({"name": "Al", "age": 3.5})"},
      {0, R"({"name": "Al"})"},
      {0, R"({"name": "Al", "age": 1, "x": 1})"},
      {0, R"({"name": "Al", "age": 1, "tags": ["ab", "b", "a"]})"},
      {0, R"({"name": "Al", "age": 1, "tags": ["ab", "b", "a", "a"]})"},
      {0, R"({"name": "Al", "age": 1, "tags": ["abc"]})"},
      {0, R"({"name": "Al", "age": 1, "email": 3})"},
      {0, R"({"name": "日本語", "age": 1})"},
      {0, R"({"name": "\u65e5\ud83d\ude00", "age": 1})"},
      {1, R"({"value": 1.5, "children": [{"value": 2}, {"value": -1e3, "children": []}]})"},
      {1, R"({"value": 1, "children": [{"value": 2}, {"value": 3}, {"value": 4}]})"},
      {1, R"({"children": []})"},
      {2, R"({"x": "abc", "y": [1, {"z": null}]})"},
      {2, R"({"x": "abcd"})"},
      {2, R"({"x": 7})"},
      {2, R"({"x": 7.5})"},
      {2, R"({"x": [true, 12]})"},
      {2, R"({"x": [true, 13]})"},
      {2, R"({"x": [true]})"},
      {2, R"({"x": []})"},
      {2, R"({"x": [true, "z", 1]})"},
      {2, R"({"x": false})"},
      {3, R"({"abc": 1, "a": true, "ab": null})"},
      {3, R"({"ab": null})"},
      {3, R"({"abc": 1, "abcd": 1})"},
      {4, R"({"k":[1,2]})"},
      {4, R"({"k":[1,3]})"},
      {4, R"(3.5)"},
      {4, R"(3)"},
      {4, R"(35)"},
      {4, R"("é")"},
      {4, R"([])"},
      {4, R"(false)"},
      {5, R"([1, {"a": "b"}, null])"},
      {6, R"({"n": "x", "m": 4})"},
      {6, R"({"n": "x", "m": "y"})"},
      {6, R"({"n": 1})"},
      {7, R"([{"id": 1}, {"id": 2, "other": [true]}])"},
      {7, R"([{"id": 1}])"},
      {7, R"([{"id": 1}, {"id": 2}, {"id": 3}, {"id": 4}, {"id": 5}])"},
      {7, R"([{"id": 1}, {}])"},
      {8, R"(true)"},
      {8, R"({"q": "yes"})"},
      {8, R"({"q": "no"})"},
      {8, R"(null)"},
      {9, R"({"z": [1]})"},
      {9, R"({"z": 1, "e": {}})"},
      {9, R"({"z": 1, "e": {"f": 1}})"},
      {9, R"({"z": 1, "never": 1})"},
      {9, R"({"e": {}})"},
      {10, R"({"ok": 1, "list": [null]})"},
      {10, R"({"list": [null, {"next": {}}]})"},
      {10, R"({"loop": {"next": {"next": {}}}})"},
      {10, R"({"loop": null})"},
      {11, R"({"n": -5, "m": 1000})"},
      {11, R"({"n": 119, "m": 1010, "k": 1})"},
      {11, R"({"n": 120, "m": 1010})"},
      {11, R"({"n": -6, "m": 1010})"},
      {11, R"({"n": 0, "m": 999})"},
      {11, R"({"n": 0, "m": 10000})"},
      {11, R"({"n": 0, "m": 1011})"},
      {11, R"({"n": 0, "m": 1001, "k": 0})"},
      {11, R"({"n": 0, "m": 1001, "k": 3})"},
      {11, R"({"n": 0, "m": 1001, "k": 4})"},
      {11, R"({"n": 0, "m": 1001, "when": "yesterday"})"},
      {11, R"({"n": 0, "m": 1001, "when": "2024-02-29T12:00:00.5+05:30"})"},
      {11, R"({"n": 0, "m": 1001, "when": "2023-02-29T12:00:00Z"})"},
      {11, R"({"n": 0, "m": 1001, "k": 1, "when": "x"})"},
      {11, R"({"n": 0})"},
      {11, R"({"n": -0, "m": 1002, "other": [1]})"},
      {12, R"({"a": true, "c": false})"},
      {12, R"({"a": true})"},
      {12, R"({})"},
      {12, R"({"a": true, "b": true, "c": false})"},
      {13, R"([-7, -1000000000000, -999999999999])"},
      {13, R"([-6])"},
      {13, R"([-1000000000001])"},
      {13, R"([7])"},
      {13, R"([-10000000000000000000])"},
      {14, R"({"p": 0, "t": -1})"},
      {14, R"({"p": 1, "t": -0.5})"},
      {14, R"({"p": 1.0, "t": -2.99})"},
      {14, R"({"p": 1.01, "t": -1})"},
      {14, R"({"p": 1.000, "t": -1})"},
      {14, R"({"p": -0.0, "t": -1})"},
      {14, R"({"p": -0.1, "t": -1})"},
      {14, R"({"p": 0.5, "t": 0})"},
      {14, R"({"p": 0.5, "t": -0.0})"},
      {14, R"({"p": 0.5, "t": -3})"},
      {14, R"({"p": 0.5, "t": -3.0})"},
      {14, R"({"p": 0.5, "t": -2.999})"},
      {14, R"({"p": 0.5, "t": -0.0001})"},
      {14, R"({"p": 0.5, "t": -1, "big": 99.99})"},
      {14, R"({"p": 0.5, "t": -1, "big": 100})"},
      {14, R"({"p": 0.5, "t": -1, "big": 100.5})"},
      {14, R"({"p": 0.5, "t": -1, "big": null})"},
      {14, R"({"p": 0.5, "t": -1, "big": -100})"},
      {15, R"({"zip": "123", "code": "AB"})"},
      {15, R"({"zip": "123-45", "code": "xABy"})"},
      {15, R"({"zip": "123-4", "code": "AB"})"},
      {15, R"({"zip": "1234", "code": "AB"})"},
      {15, R"({"zip": "a123", "code": "AB"})"},
      {15, R"({"zip": "123", "code": "xxABy"})"},
      {15, R"({"zip": "123", "code": "aBcD"})"},
      {15, R"({"zip": "123", "code": "\"AB\\"})"},
      {15, R"({"zip": "123", "code": "AB", "word": "éa"})"},
      {15, R"({"zip": "123", "code": "AB", "word": "a\na"})"},
      {15, R"({"zip": "123", "code": "AB", "word": "a"})"},
      {15, R"({"zip": "123", "code": "AB", "word": "ab"})"},
      {15, R"({"zip": "123", "code": "AB", "word": 7})"},
      {15, R"({"zip": "123", "code": "AB", "tags": ["x", "xé", "x\t"]})"},
      {15, R"({"zip": "123", "code": "AB", "tags": ["x\n"]})"},
      {15, R"({"zip": "123", "code": "AB", "tags": ["xyz"]})"},
      {15, R"({"zip": "123", "code": "AB", "tags": [""]})"},
      {16, R"({"day": "2024-02-29", "pick": 7, "id": "2eb8aa08-aa98-11ea-b4aa-73b441d16380"})"},
      {16, R"({"day": "2024-02-29", "pick": "2024-02-29", "at": null})"},
      {16, R"({"day": "2000-01-31", "pick": 7, "hosts": ["10.0.0.1", "0.0.0.0"], "span": "PT5M"})"},
      {16, R"({"day": "2000-01-31", "pick": 7, "v6": "::ffff:10.0.0.1", "mail": "a.b@c.io"})"},
      {16, R"({"day": "2000-01-31", "pick": 7, "site": "not a uri", "at": "23:59:59.9Z"})"},
      {16, R"({"day": "2023-02-29", "pick": 7})"},
      {16, R"({"day": "2024-02-29", "pick": 7, "id": "2eb8aa08-aa98-11ea-b4aa-73b441d1638"})"},
      {16, R"({"day": "2024-02-29", "pick": "2023-02-29"})"},
      {16, R"({"day": "2024-02-29", "pick": 7, "at": "24:00:00Z"})"},
      {16, R"({"day": "2024-02-29", "pick": 7, "hosts": ["10.0.0.01"]})"},
      {16, R"({"day": "2024-02-29", "pick": 7, "v6": "1::2::3"})"},
      {16, R"({"day": "2024-02-29", "pick": 7, "mail": "abc.def@gh.io"})"},
      {16, R"({"day": "2024-02-29", "pick": 7, "span": "P1Y2D"})"},
  };
  for (const auto& [index, text] : cases) {
    const json root = json::parse(schemas()[index]);
    EXPECT_EQ(takes_whole(compiled(schemas()[index]), text), oracle_takes(root, text).value())
        << "schema " << index << ": " << text;
  }
}

TEST(JsonSchemaPrefixTest, APatternStringIsWrittenWithoutUnicodeEscapes) {
  // "AB" spelled A\u0042 is a valid value, but the walker writes a pattern's characters as
  // themselves (or \n, \t, ...): the automaton then steps once per character it can see.
  const std::shared_ptr<const JsonSchema> schema = compiled(schemas()[15]);
  EXPECT_FALSE(takes_whole(schema, R"({"zip": "123", "code": "A\u0042"})"));
  // Without a pattern a \u escape is taken.
  EXPECT_TRUE(takes_whole(compiled(schemas()[0]), R"({"name": "\u0041l", "age": 1})"));
}

TEST(JsonSchemaPrefixTest, APatternStringRefusesTheFirstByteThatLeadsNowhere) {
  const std::shared_ptr<const JsonSchema> schema = compiled(schemas()[15]);
  JsonSchemaPrefix walker(schema, kWhitespaceRun);
  ASSERT_TRUE(walker.feed(R"({"zip": "12)"));
  EXPECT_FALSE(walker.accepts("a"));
  EXPECT_FALSE(walker.accepts("\xc3"));  // no UTF-8 character is a digit
  EXPECT_FALSE(walker.accepts("\\"));    // nor any escaped one
  EXPECT_FALSE(walker.accepts("\""));    // two digits are too few
  EXPECT_TRUE(walker.accepts("3\""));
  EXPECT_FALSE(walker.accepts("3-\""));
  ASSERT_TRUE(walker.feed(R"(3", "code": "xy)"));
  EXPECT_TRUE(walker.accepts("AB"));
  EXPECT_TRUE(walker.accepts("A"));    // "xyA" leaves one character for a second capital
  EXPECT_FALSE(walker.accepts("a"));   // "xya" does not
  EXPECT_FALSE(walker.accepts("\""));  // no two capitals yet
}

TEST(JsonSchemaPrefixTest, ATopLevelNumberMustEndOnlyWhereNoDigitCanFollow) {
  const std::shared_ptr<const JsonSchema> number =
      compiled(R"({"type": "integer", "minimum": 0, "maximum": 999})");
  JsonSchemaPrefix walker(number, kWhitespaceRun);
  ASSERT_TRUE(walker.feed("1"));
  EXPECT_TRUE(walker.complete());
  EXPECT_FALSE(walker.must_end());  // "12" and "123" may follow
  ASSERT_TRUE(walker.feed("00"));
  EXPECT_TRUE(walker.must_end());  // a fourth digit would pass 999
  JsonSchemaPrefix object(compiled(schemas()[3]), kWhitespaceRun);
  ASSERT_TRUE(object.feed(R"({"abc": 1})"));
  EXPECT_TRUE(object.must_end());  // whitespace only after a closed object
}

TEST(JsonSchemaPrefixTest, ABoundedNumberIsWrittenWithoutAnExponent) {
  // Its reachable values are then exact intervals; 1e-1 is 0.1 written another way.
  EXPECT_FALSE(takes_whole(compiled(schemas()[14]), R"({"p": 1e-1, "t": -1})"));
  EXPECT_TRUE(takes_whole(compiled(schemas()[14]), R"({"p": 0.1, "t": -1})"));
  EXPECT_TRUE(takes_whole(compiled(schemas()[5]), R"({"p": 1e-1})")) << "unbounded: any spelling";
}

TEST(JsonSchemaPrefixTest, ABoundedNumberHasAtMostFifteenDigits) {
  // So that a reader's double holds it: "0." and twenty 9s would read as 1, past an exclusive 1.
  const std::shared_ptr<const JsonSchema> schema = compiled(schemas()[14]);
  EXPECT_TRUE(takes_whole(schema, R"({"p": 0.99999999999999, "t": -0.00000000000001})"));
  EXPECT_FALSE(takes_whole(schema, R"({"p": 0.999999999999999, "t": -1})"));
  EXPECT_FALSE(takes_whole(schema, R"({"p": 0.5, "t": -0.000000000000001})"));
  JsonSchemaPrefix walker(schema, kWhitespaceRun);
  EXPECT_TRUE(walker.accepts(R"({"p": 0, "t": -1, "big": 100000000000000)"));
  EXPECT_FALSE(walker.accepts(R"({"p": 0, "t": -1, "big": 1000000000000000)"));
  EXPECT_FALSE(walker.accepts(R"({"p": 0, "t": -1, "big": 100000000000000.)"))
      << "no digit could follow";
}

TEST(JsonSchemaPrefixTest, AKeyTwiceIsRefused) {
  // RFC 8259: names SHOULD be unique; a reader keeps one of the two values, so a generation may
  // not write a declared property twice.
  EXPECT_FALSE(takes_whole(compiled(schemas()[0]), R"({"name": "Al", "age": 1, "name": "Bo"})"));
  EXPECT_FALSE(takes_whole(compiled(schemas()[3]), R"({"abc": 1, "abc": 2})"));
  EXPECT_TRUE(takes_whole(compiled(schemas()[3]), R"({"abc": 1, "ab": null})"));
}

TEST(JsonSchemaPrefixTest, AValueThatCouldNeverEndIsNeverBegun) {
  // Every value of #/$defs/l holds another under "next": no finite text has one, so neither the
  // property nor the tuple's second item may be begun, though the schema names both.
  JsonSchemaPrefix walker(compiled(schemas()[10]), kWhitespaceRun);
  EXPECT_FALSE(walker.accepts(R"({"loop")"));
  EXPECT_FALSE(walker.accepts(R"({"list": [null,)"));
  EXPECT_TRUE(walker.accepts(R"({"list": [null], "ok": 1})"));
}

TEST(JsonSchemaPrefixTest, TheRoomInAStringIsWhatItsMaximumLengthLeaves) {
  const std::shared_ptr<const JsonSchema> schema = compiled(schemas()[0]);
  JsonSchemaPrefix walker(schema, kWhitespaceRun);
  ASSERT_TRUE(walker.feed(R"({"email": ")"));
  EXPECT_EQ(walker.string_room(), JsonSchema::kUnbounded);
  ASSERT_TRUE(walker.feed(R"(x", "name": "é)"));
  EXPECT_EQ(walker.string_room(), 7u) << "maxLength 8 less one character";
  ASSERT_TRUE(walker.feed(R"(\u00e9)"));
  EXPECT_EQ(walker.string_room(), 6u) << "an escape is one character";
  ASSERT_TRUE(walker.feed(R"(\)"));
  EXPECT_EQ(walker.string_room(), std::nullopt) << "inside an escape";
  ASSERT_TRUE(walker.feed(R"(n", "tags": [")"));
  EXPECT_EQ(walker.string_room(), std::nullopt) << "an enum's string is matched byte by byte";
  JsonSchemaPrefix key(schema, kWhitespaceRun);
  ASSERT_TRUE(key.feed(R"({")"));
  EXPECT_EQ(key.string_room(), std::nullopt) << "a key is matched against the property names";
  JsonSchemaPrefix free_key(JsonSchema::any_object(), kWhitespaceRun);
  ASSERT_TRUE(free_key.feed(R"({"ab)"));
  EXPECT_EQ(free_key.string_room(), JsonSchema::kUnbounded) << "no names declared: any key";
}

TEST(JsonSchemaPrefixTest, AKnownNameSpelledWithAnEscapeIsRefused) {
  // Where names are checked, a key is taken as written: "\u006eame" would be "name" in disguise.
  JsonSchemaPrefix walker(compiled(schemas()[6]), kWhitespaceRun);
  EXPECT_FALSE(walker.accepts(R"({"\u006e": 1})"));
  EXPECT_TRUE(walker.accepts(R"({"n": "x", "other": 1})"));
  // Where no name is declared, any key is another one, escapes included.
  JsonSchemaPrefix free(JsonSchema::any_object(), kWhitespaceRun);
  EXPECT_TRUE(free.accepts(R"({"\u006e\n": 1})"));
}

}  // namespace
}  // namespace cellm
