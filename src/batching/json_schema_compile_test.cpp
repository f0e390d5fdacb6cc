// What JsonSchema::compile cannot enforce exactly is refused, naming the keyword and where it is
// (the walker's tests are json_schema_test.cpp's; the pattern syntax's, string_pattern_test.cpp's).
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "batching/json_prefix.h"
#include "batching/json_schema.h"

namespace cellm {
namespace {

TEST(JsonSchemaTest, WhatCannotBeEnforcedIsRefusedByName) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"type": "object", "properties": {"a": {"type": "string", "pattern": "(a)\\1"}}})",
       "#/properties/a: \"pattern\": backreferences are not supported at offset 3"},
      {R"j({"type": "string", "pattern": "a(?=b)"})j", "lookaround assertions are not supported"},
      {R"({"type": "string", "pattern": 5})", "\"pattern\" must be a string"},
      {R"({"type": "string", "format": 5})", "\"format\" must be a string"},
      {R"({"type": "string", "format": "date", "pattern": "^x"})",
       "no string matches \"pattern\" and \"format\" within its length bounds"},
      {R"j({"type": "string", "format": "date", "pattern": "(a"})j",
       "\"pattern\": an unterminated group"},
      {R"({"type": "string", "format": "uuid", "maxLength": 35})",
       "no string matches \"format\" within its length bounds"},
      {R"({"enum": ["2023-02-29", 7.5], "type": "string", "format": "date"})",
       "no value of \"enum\" has the schema's type and format"},
      {R"({"type": "string", "pattern": "^ab$", "minLength": 3})", "no string matches"},
      {R"j({"type": "string", "pattern": "(a|b)*a(a|b){12}"})j", "automaton states"},
      {R"({"type": "object", "patternProperties": {"^a": {}}})",
       "\"patternProperties\" is not supported"},
      {R"({"type": "object", "properties": {"age": {"type": "number", "minimum": 0.5}}})",
       "#/properties/age: \"minimum\" on a number that may have a fraction must be a whole"},
      {R"({"$ref": "#/$defs/missing"})", "points at nothing"},
      {R"({"$ref": "https://example.com/s.json"})", "only references within the schema"},
      {R"({"$ref": "#/$defs/a", "$defs": {"a": {"$ref": "#/$defs/a"}}})", "refers to itself"},
      {R"({"oneOf": [{"type": "string"}, {"type": ["string", "null"]}]})",
       "two branches of \"oneOf\" accept string values"},
      {R"({"oneOf": [{"type": "object", "properties": {"k": {"const": 1}}, "required": ["k"]},
                     {"type": "object", "properties": {"k": {"enum": [2, 1]}},
                      "required": ["k"]}]})",
       "#/oneOf/1: two branches of \"oneOf\" accept object values"},
      {R"({"oneOf": [{"type": "object", "properties": {"k": {"const": 1}}},
                     {"type": "object", "properties": {"k": {"const": 2}}}]})",
       "told apart by a required property"},
      {R"({"allOf": [{"type": "string"}, {"maxLength": 3}]})", "\"allOf\" of more than one"},
      {R"({"type": "object", "required": ["a"], "additionalProperties": false})",
       "required property \"a\" is not among"},
      {R"({"type": "object", "properties": {"a\"b": {}}})", "needs escapes"},
      {R"({"type": "strin"})", "unknown type \"strin\""},
      {R"({"type": "integer", "enum": [1.5, "a"]})", "no value of \"enum\""},
      {R"({"type": "array", "minItems": 3, "maxItems": 2})", "minItems"},
      {R"({"type": "string", "minLength": -1})", "non-negative integer"},
      {R"(false)", "accepts no value"},
      {R"({"type": "object", "properties": {"a": false}, "required": ["a"]})",
       "required property \"a\" accepts no value"},
      {R"({"type": )", "not valid JSON"},
      {R"([1])", "a schema is an object or a boolean"},
      {R"({"items": [{"type": "string"}]})", "prefixItems"},
      {R"({"type": "number", "exclusiveMaximum": 1.5})", "fractional bounds are not supported"},
      {R"({"type": "integer", "minimum": 5, "maximum": 4})", "no number lies within"},
      {R"({"type": "object", "required": ["a", "b"], "maxProperties": 1})",
       "no object has as many keys"},
      {R"({"type": "integer", "multipleOf": 2})", "\"multipleOf\" is not supported"},
      {R"({"$ref": "#/$defs/l", "$defs": {"l": {"type": "object", "required": ["n"],
            "properties": {"n": {"$ref": "#/$defs/l"}}}}})",
       "accepts no finite value"},
  };
  for (const auto& [text, expected] : cases) {
    StatusOr<std::shared_ptr<const JsonSchema>> schema = JsonSchema::compile(text);
    ASSERT_FALSE(schema.ok()) << text;
    EXPECT_NE(schema.status().message().find(expected), std::string::npos)
        << text << " → " << schema.status().message();
  }
}

TEST(JsonSchemaTest, DeeplyNestedSchemasAreRefusedNotRecursedWithoutEnd) {
  std::string text;
  for (int i = 0; i < 200; ++i) text += R"({"type": "array", "items": )";
  text += "{}";
  for (int i = 0; i < 200; ++i) text += "}";
  StatusOr<std::shared_ptr<const JsonSchema>> schema = JsonSchema::compile(text);
  ASSERT_FALSE(schema.ok());
  EXPECT_NE(schema.status().message().find("nested too deeply"), std::string::npos);
}

TEST(JsonSchemaTest, AFormatItDoesNotAssertIsAnAnnotation) {
  // "uri-reference" is not asserted, so a pattern beside it is the string's only constraint.
  StatusOr<std::shared_ptr<const JsonSchema>> uri =
      JsonSchema::compile(R"({"type": "string", "format": "uri-reference", "pattern": "^h"})");
  ASSERT_TRUE(uri.ok()) << uri.status().message();
  ASSERT_NE((*uri)->node((*uri)->root()).pattern, nullptr);
  EXPECT_TRUE((*uri)->node((*uri)->root()).pattern->matches("hello"));
  StatusOr<std::shared_ptr<const JsonSchema>> other =
      JsonSchema::compile(R"({"type": "string", "format": "x-custom"})");
  ASSERT_TRUE(other.ok());
  EXPECT_EQ((*other)->node((*other)->root()).pattern, nullptr);
  // An asserted format binds strings only; a hostname is at most 253 code points.
  StatusOr<std::shared_ptr<const JsonSchema>> host =
      JsonSchema::compile(R"({"type": ["integer", "string"], "format": "hostname"})");
  ASSERT_TRUE(host.ok());
  const JsonSchema::Node& node = (*host)->node((*host)->root());
  EXPECT_EQ(node.types, kJsonNumberBit | kJsonStringBit);
  EXPECT_EQ(node.max_length, 253u);
  ASSERT_NE(node.pattern, nullptr);
  EXPECT_FALSE(node.pattern->matches("a..b"));
}

}  // namespace
}  // namespace cellm

namespace cellm {
namespace {

// Values are compared and written recursively: a schema text nested deeper than any schema within
// the walker's depth can be is refused with the depth, not left to overflow the stack.
TEST(JsonSchemaTest, TextsNestedTooDeepAreRefusedBeforeParsing) {
  const auto nested = [](size_t depth) {
    return std::string(depth, '[') + std::string(depth, ']');
  };
  for (const char* keyword : {"const", "enum", "default"}) {
    const std::string deep = std::string("{\"") + keyword + "\": [" + nested(100000) + "]}";
    StatusOr<std::shared_ptr<const JsonSchema>> schema = JsonSchema::compile(deep);
    ASSERT_FALSE(schema.ok()) << keyword;
    EXPECT_NE(schema.status().message().find("nests 100002 levels deep; at most 256"),
              std::string::npos)
        << schema.status().message();
  }
  // Brackets inside strings are text, not nesting.
  EXPECT_TRUE(JsonSchema::compile("{\"const\": \"" + std::string(1000, '[') + "\"}").ok());
  EXPECT_EQ(json_nesting_depth(R"({"a": "[\"[", "b": [[{}]]})"), 4u);
}

}  // namespace
}  // namespace cellm
