// JsonSchema: a JSON Schema compiled into a table of nodes that JsonSchemaPrefix
// (json_schema_prefix.h) walks one byte at a time while a generation writes its output. Compiling
// checks the schema once — what it cannot enforce exactly is refused with the keyword and its
// place, never ignored — so that every prefix the walker accepts can still be completed into a
// value the schema accepts.
//
// The subset (OpenAI's structured outputs and what pydantic emits): `type` (one or a list;
// "integer" is written without fraction or exponent), `enum` and `const` (the value is written as
// its compact serialization), `properties`, `required` (at most 64 properties an object),
// `additionalProperties` (true, false or a schema; absent: any), `minProperties`,
// `maxProperties`, `items` (a schema or false), `prefixItems`, `minItems`, `maxItems`,
// `minLength`, `maxLength` (code points), `pattern` (an ECMA-262 regular expression that is a set
// of strings, string_pattern.h; such a string's characters are written as themselves or with
// the two-character escapes, never \u), `minimum`, `maximum`, `exclusiveMinimum`,
// `exclusiveMaximum` (on integers any value; on other numbers whole ones, and such numbers are
// then written without an exponent), `anyOf` (branches that take a value's type alike become a
// choice node, which JsonSchemaPrefix walks as alternatives), `oneOf` whose branches take
// different JSON types or are objects told apart by a required property of different constant
// values (pydantic's discriminated unions; other overlaps are refused), `allOf` of one schema,
// `$ref` to a place in the same document ("#", "#/$defs/Name", recursion included), `format` on
// strings for the formats string_format.h asserts (compiled as a pattern; beside `pattern`, the
// product of both; an `enum` keeps the strings of the format), and the annotations (`title`,
// `description`, `default`, `examples`, and the other formats, annotations by JSON Schema 2020-12's
// default) which change nothing. Property names are written as they are between the quotes (no
// escapes). Anything else — fractional bounds on numbers that may have fractions, `multipleOf`,
// `uniqueItems`, `not`, remote refs, `patternProperties`, a pattern with lookaround or
// backreferences — is refused.
//
// It knows JSON values and schemas, not tokens, models or the engine. Built by the server and the
// CLI from the request's schema; shared read-only by the generations that use it.
//
// Thread-safety: immutable after compile(); any number of threads may read one.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "batching/string_pattern.h"
#include "core/status.h"

namespace cellm {

// A JSON value's type, as its first byte tells it; a node's accepted types are a mask of these.
enum JsonTypeBit : uint8_t {
  kJsonObjectBit = 1,
  kJsonArrayBit = 2,
  kJsonStringBit = 4,
  kJsonNumberBit = 8,  // integers too
  kJsonBooleanBit = 16,
  kJsonNullBit = 32,
  kJsonAnyTypeBits = 63,
};

// The type bit of a value that begins with `byte`, or 0 when no value begins with it.
uint8_t json_type_of_first_byte(unsigned char byte);

class JsonSchema {
 public:
  static constexpr int32_t kAnyNode = 0;  // accepts every JSON value
  static constexpr int32_t kNoNode = -1;  // accepts nothing (`additionalProperties: false`)
  static constexpr int kMaxProperties = 64;
  static constexpr uint32_t kUnbounded = UINT32_MAX;

  struct Property {
    std::string name;  // the bytes between the key's quotes
    int32_t node;
  };
  struct Node {
    uint8_t types = kJsonAnyTypeBits;
    bool integer_only = false;  // kJsonNumberBit means integers only
    // A union (anyOf / oneOf / a list of types with per-type branches): the branch to use for a
    // value of type bit b is branch_by_type[log2 b], kNoNode for none. Empty: not a union.
    std::vector<int32_t> branch_by_type;
    // A choice: the nodes of a union's branches that take values of this node's one type alike
    // (anyOf's; oneOf's only where required constant properties tell them apart). A value is
    // checked against each until it fits only one or none. Empty: not a choice.
    std::vector<int32_t> choices;
    // Objects: properties sorted by name (a name before its extensions); required: their bits;
    // how many keys an object has.
    std::vector<Property> properties;
    uint64_t required = 0;
    int32_t additional = kAnyNode;
    uint32_t min_properties = 0;
    uint32_t max_properties = kUnbounded;
    // Arrays: item i's node is prefix_items[i], then `items`.
    std::vector<int32_t> prefix_items;
    int32_t items = kAnyNode;
    uint32_t min_items = 0;
    uint32_t max_items = kUnbounded;
    // Strings, in code points; `pattern` (null: none; a "pattern" or an asserted "format")
    // holds the lengths too.
    uint32_t min_length = 0;
    uint32_t max_length = kUnbounded;
    std::shared_ptr<const StringPattern> pattern;
    // Integers (integer_only): the inclusive range of minimum / maximum / exclusiveMinimum /
    // exclusiveMaximum.
    bool has_integer_bounds = false;
    int64_t integer_min = std::numeric_limits<int64_t>::min();
    int64_t integer_max = std::numeric_limits<int64_t>::max();
    // Numbers that may have fractions: whole-number bounds, each inclusive or exclusive (written
    // without an exponent, so that a prefix's reachable values are exact intervals).
    bool has_decimal_bounds = false;
    int64_t decimal_min = std::numeric_limits<int64_t>::min();
    bool decimal_min_exclusive = false;
    int64_t decimal_max = std::numeric_limits<int64_t>::max();
    bool decimal_max_exclusive = false;
    // enum / const: the values' compact serializations, sorted (a text before its extensions);
    // has_enum false: no such constraint.
    bool has_enum = false;
    std::vector<std::string> enum_texts;
  };

  // Compiles a schema written as JSON text. Errors name the keyword and where it is
  // ("#/properties/age: the keyword \"minimum\" is not supported").
  static StatusOr<std::shared_ptr<const JsonSchema>> compile(std::string_view schema_text);
  // {"type": "object"}: OpenAI's json_object.
  static std::shared_ptr<const JsonSchema> any_object();

  int32_t root() const { return root_; }
  const Node& node(int32_t index) const { return nodes_[static_cast<size_t>(index)]; }
  // The node a value of type `type_bit` is checked against at `index` (a union's branch), or
  // kNoNode when the node does not take that type.
  int32_t node_for_type(int32_t index, uint8_t type_bit) const;
  // The node of an array's item `position` (0-based), or kNoNode when it may have no such item.
  int32_t item_node(int32_t array_node, uint32_t position) const;

 private:
  friend class JsonSchemaCompiler;
  std::vector<Node> nodes_;
  int32_t root_ = kAnyNode;
};

}  // namespace cellm
