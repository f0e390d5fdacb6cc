// What the walker's tests share: the schemas (json_schema_test.cpp walks each against the
// validator; json_schema_prefix_test.cpp checks particular places in some), by index, and two
// helpers. Test code only.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "batching/json_schema.h"
#include "batching/json_schema_prefix.h"

namespace cellm::testing {

inline const std::vector<std::string>& schemas() {
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
            "site": {"type": "string", "format": "uri-reference"},
            "home": {"type": "string", "format": "uri", "maxLength": 30},
            "y2k": {"type": "string", "format": "date", "pattern": "^20[01]"},
            "pick": {"enum": ["2024-02-29", "2023-02-29", 7], "format": "date"}},
          "required": ["day", "pick"], "additionalProperties": false})",
      // 17: unions whose branches take the same type: objects sharing a key, integer ranges,
      // strings of two patterns and an enum; oneOf's objects told apart by a constant
      R"({"type": "object", "properties": {
            "pets": {"type": "array", "maxItems": 4, "items": {"anyOf": [
              {"type": "object", "properties": {"name": {"type": "string", "maxLength": 3},
                 "meows": {"type": "integer"}}, "required": ["name", "meows"],
               "additionalProperties": false},
              {"type": "object", "properties": {"name": {"type": "string", "maxLength": 3},
                 "barks": {"type": "boolean"}}, "required": ["name"],
               "additionalProperties": false},
              {"type": "integer", "minimum": 0, "maximum": 5},
              {"type": "integer", "minimum": 10, "maximum": 15}]}},
            "tagged": {"oneOf": [{"$ref": "#/$defs/cat"}, {"$ref": "#/$defs/dog"}]},
            "word": {"anyOf": [{"type": "string", "pattern": "^a+$"},
              {"type": "string", "pattern": "^b+$", "maxLength": 2}, {"enum": ["ab", 3]}]}},
          "additionalProperties": false,
          "$defs": {
            "cat": {"type": "object", "properties": {"kind": {"const": "cat"},
              "lives": {"type": "integer", "minimum": 1, "maximum": 9}}, "required": ["kind"],
              "additionalProperties": false},
            "dog": {"type": "object", "properties": {"kind": {"const": "dog"},
              "good": {"type": "boolean"}}, "required": ["kind", "good"],
              "additionalProperties": false}}})",
  };
  return kSchemas;
}

inline constexpr int kWhitespaceRun = 4;

// The schema `text` compiles into; a test failure (and any object) when it is refused.
inline std::shared_ptr<const JsonSchema> compiled(const std::string& text) {
  StatusOr<std::shared_ptr<const JsonSchema>> schema = JsonSchema::compile(text);
  EXPECT_TRUE(schema.ok()) << schema.status().message() << "\n" << text;
  return schema.ok() ? *schema : JsonSchema::any_object();
}

// Whether the walker takes `text` as one whole value.
inline bool takes_whole(const std::shared_ptr<const JsonSchema>& schema, const std::string& text) {
  JsonSchemaPrefix walker(schema, kWhitespaceRun);
  return walker.feed(text) && walker.complete();
}

}  // namespace cellm::testing
