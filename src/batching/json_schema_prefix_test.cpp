// JsonSchemaPrefix's particular promises, case by case: how a pattern string is written, where
// numbers end and how they are spelled, keys, and how many alternatives a union whose branches
// take a value's type alike (JsonSchema::Node::choices) walks at once. What the walker accepts
// in general is checked against the validator in json_schema_test.cpp (unions: its schema 17).
#include "batching/json_schema_prefix.h"

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>

#include "batching/json_schema.h"
#include "batching/json_schema_test_schemas.h"

namespace cellm {
namespace {

using testing::compiled;
using testing::kWhitespaceRun;
using testing::schemas;
using testing::takes_whole;

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

TEST(JsonSchemaUnionTest, AlternativesMergeOnceTheirValuesEnd) {
  // Both branches fit {"name": ...} until "meows" or "barks" tells them apart, or the object
  // ends: then both are at the same place and one alternative is left.
  JsonSchemaPrefix walker(compiled(R"({"type": "array", "items": {"anyOf": [
      {"type": "object", "properties": {"name": {"type": "string"}, "meows": {"type": "integer"}},
       "required": ["name"], "additionalProperties": false},
      {"type": "object", "properties": {"name": {"type": "string"}, "barks": {"type": "boolean"}},
       "required": ["name"], "additionalProperties": false}]}})"),
                          4);
  ASSERT_TRUE(walker.feed("["));
  for (int i = 0; i < 200; ++i) {
    ASSERT_TRUE(walker.feed(i == 0 ? "{" : ",{")) << i;
    EXPECT_EQ(walker.num_alternatives(), 2u) << i;
    ASSERT_TRUE(walker.feed("\"name\": \"x\""));
    EXPECT_EQ(walker.num_alternatives(), 2u);
    if (i % 3 == 1) {
      ASSERT_TRUE(walker.feed(", \"barks\": true"));
      EXPECT_EQ(walker.num_alternatives(), 1u);
    }
    ASSERT_TRUE(walker.feed("}"));
    EXPECT_EQ(walker.num_alternatives(), 1u) << i;
  }
  EXPECT_FALSE(walker.accepts(",{\"meows\": 1, \"barks\": true}"));
  EXPECT_TRUE(walker.feed("]"));
  EXPECT_TRUE(walker.complete());
}

TEST(JsonSchemaUnionTest, AtMostSixteenBranchesAreWalkedAtOnceAndTheWalkNeverStrands) {
  std::string branches;
  for (int k = 0; k < 20; ++k) {
    branches += (k == 0 ? "" : ",") + std::string(R"({"type": "object", "properties": {"k": )") +
                "{\"const\": " + std::to_string(k) +
                R"(}}, "required": ["k"], "additionalProperties": false})";
  }
  const std::shared_ptr<const JsonSchema> schema = compiled(R"({"anyOf": [)" + branches + "]}");
  JsonSchemaPrefix walker(schema, 4);
  ASSERT_TRUE(walker.feed("{\"k\": "));
  EXPECT_EQ(walker.num_alternatives(), JsonSchemaPrefix::kMaxAlternatives);
  for (int k = 0; k < 20; ++k) {
    JsonSchemaPrefix copy = walker;
    // The first sixteen branches are walked; the others were left out (each accepted prefix
    // still ends in a valid value).
    EXPECT_EQ(copy.feed(std::to_string(k) + "}") && copy.complete(),
              static_cast<size_t>(k) < JsonSchemaPrefix::kMaxAlternatives)
        << k;
  }
}

TEST(JsonSchemaUnionTest, ABranchWithANestedUnionIsFlattenedIntoTheChoice) {
  JsonSchemaPrefix walker(compiled(R"({"anyOf": [{"type": "integer", "maximum": 3},
      {"anyOf": [{"type": "integer", "minimum": 10, "maximum": 12}, {"type": "null"},
                 {"type": "integer", "minimum": 20, "maximum": 22}]}]})"),
                          4);
  for (const char* text : {"3", "-7", "11", "21", "null"}) {
    JsonSchemaPrefix copy = walker;
    EXPECT_TRUE(copy.feed(text) && copy.complete()) << text;
  }
  for (const char* text : {"4", "13", "23", "19"}) {
    JsonSchemaPrefix copy = walker;
    EXPECT_FALSE(copy.feed(text) && copy.complete()) << text;
  }
  ASSERT_TRUE(walker.feed("1"));
  // "1" may still be 1 or 10-12, not 20-22: the third branch is not walked.
  EXPECT_EQ(walker.num_alternatives(), 2u);
}

TEST(JsonSchemaUnionTest, TheRoomInAStringIsTheMostOneAlternativeLeaves) {
  JsonSchemaPrefix walker(
      compiled(R"({"anyOf": [{"type": "object", "properties": {"s": {"type": "string",
          "maxLength": 2}, "x": {"type": "null"}}, "additionalProperties": false},
        {"type": "object", "properties": {"s": {"type": "string", "maxLength": 5}},
          "additionalProperties": false}]})"),
      kWhitespaceRun);
  ASSERT_TRUE(walker.feed(R"({"s": "a)"));
  EXPECT_EQ(walker.num_alternatives(), 2u);
  EXPECT_EQ(walker.string_room(), std::optional<uint32_t>(4));
  EXPECT_TRUE(walker.accepts("bcde"));
  ASSERT_TRUE(walker.feed("bc"));
  EXPECT_EQ(walker.num_alternatives(), 1u);  // past the first branch's two
  EXPECT_EQ(walker.string_room(), std::optional<uint32_t>(2));
  EXPECT_FALSE(walker.accepts(R"(", "x": null)"));
}

}  // namespace
}  // namespace cellm
