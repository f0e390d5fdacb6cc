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
#include "batching/json_schema_test_schemas.h"

namespace cellm {
namespace {

using nlohmann::json;

using testing::compiled;
using testing::kWhitespaceRun;
using testing::schemas;
using testing::takes_whole;

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
      {16, R"({"day": "2024-02-29", "pick": 7, "home": "http://a.b:8/c?d#e"})"},
      {16, R"({"day": "2024-02-29", "pick": 7, "home": "http://a b"})"},
      {16, R"({"day": "2024-02-29", "pick": 7, "home": "a.b/c"})"},
      {16, R"({"day": "2024-02-29", "pick": 7, "y2k": "2012-02-29"})"},
      {16, R"({"day": "2024-02-29", "pick": 7, "y2k": "2024-02-29"})"},
      {16, R"({"day": "2024-02-29", "pick": 7, "y2k": "2011-02-29"})"},
      {16, R"({"day": "2024-02-29", "pick": 7, "y2k": "201"})"},
      {17, R"({"pets": [{"name": "Tom", "meows": 3}, {"name": "Rex"}, 3, 12]})"},
      {17, R"({"pets": [{"name": "Tom", "meows": 3, "barks": true}]})"},
      {17, R"({"pets": [{"barks": false, "name": "Tom"}, {"name": "Tom"}]})"},
      {17, R"({"pets": [{"meows": 3}]})"},
      {17, R"({"pets": [{"name": "Tomas", "meows": 3}]})"},
      {17, R"({"pets": [15, 0, 5, 10]})"},
      {17, R"({"pets": [7]})"},
      {17, R"({"pets": [16]})"},
      {17, R"({"tagged": {"kind": "cat", "lives": 9}})"},
      {17, R"({"tagged": {"lives": 2, "kind": "cat"}})"},
      {17, R"({"tagged": {"kind": "dog"}})"},
      {17, R"({"tagged": {"kind": "dog", "good": true}})"},
      {17, R"({"tagged": {"kind": "cat", "good": true}})"},
      {17, R"({"tagged": {"kind": "cow"}})"},
      {17, R"({"word": "aaa"})"},
      {17, R"({"word": "bb"})"},
      {17, R"({"word": "bbb"})"},
      {17, R"({"word": "ab"})"},
      {17, R"({"word": "ba"})"},
      {17, R"({"word": 3})"},
      {17, R"({"word": 4})"},
  };
  for (const auto& [index, text] : cases) {
    const json root = json::parse(schemas()[index]);
    EXPECT_EQ(takes_whole(compiled(schemas()[index]), text), oracle_takes(root, text).value())
        << "schema " << index << ": " << text;
  }
}

}  // namespace
}  // namespace cellm
