#include "batching/json_schema.h"

#include <algorithm>
#include <array>
#include <bit>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "batching/json_prefix.h"
#include "batching/json_schema_bounds.h"
#include "batching/json_schema_satisfiable.h"
#include "batching/json_schema_strings.h"

namespace cellm {
namespace {

using Json = nlohmann::json;

constexpr int kMaxNesting = 64;  // schemas nested deeper are refused (the walker's depth limit)

// Keywords that only describe; they change which values are accepted in no way. ("format" is
// asserted for the formats string_format() knows and an annotation for the others.)
bool is_annotation(const std::string& keyword) {
  static const std::set<std::string> kAnnotations = {
      "title", "description", "default",    "examples",     "$schema",
      "$id",   "$comment",    "deprecated", "readOnly",     "writeOnly",
      "$defs", "definitions", "$anchor",    "discriminator"};
  return kAnnotations.contains(keyword);
}

const char* type_name(uint8_t bit) {
  switch (bit) {
    case kJsonObjectBit:
      return "object";
    case kJsonArrayBit:
      return "array";
    case kJsonStringBit:
      return "string";
    case kJsonNumberBit:
      return "number";
    case kJsonBooleanBit:
      return "boolean";
    default:
      return "null";
  }
}

uint8_t type_of_value(const Json& value) {
  switch (value.type()) {
    case Json::value_t::object:
      return kJsonObjectBit;
    case Json::value_t::array:
      return kJsonArrayBit;
    case Json::value_t::string:
      return kJsonStringBit;
    case Json::value_t::boolean:
      return kJsonBooleanBit;
    case Json::value_t::null:
      return kJsonNullBit;
    default:
      return kJsonNumberBit;
  }
}

int type_index(uint8_t bit) { return std::countr_zero(bit); }

// A text's compact serialization as the walker expects it (UTF-8 kept as it is).
StatusOr<std::string> compact_text(const Json& value) {
  try {
    return value.dump(-1, ' ', false, Json::error_handler_t::strict);
  } catch (const Json::exception& e) {
    return invalid_argument(std::string("a value cannot be written as JSON: ") + e.what());
  }
}

}  // namespace

uint8_t json_type_of_first_byte(unsigned char byte) {
  switch (byte) {
    case '{':
      return kJsonObjectBit;
    case '[':
      return kJsonArrayBit;
    case '"':
      return kJsonStringBit;
    case 't':
    case 'f':
      return kJsonBooleanBit;
    case 'n':
      return kJsonNullBit;
    default:
      return byte == '-' || (byte >= '0' && byte <= '9') ? kJsonNumberBit : 0;
  }
}

int32_t JsonSchema::node_for_type(int32_t index, uint8_t type_bit) const {
  if (index == kNoNode) return kNoNode;
  const Node& n = node(index);
  if (!n.branch_by_type.empty()) return n.branch_by_type[static_cast<size_t>(type_index(type_bit))];
  return (n.types & type_bit) != 0 ? index : kNoNode;
}

int32_t JsonSchema::item_node(int32_t array_node, uint32_t position) const {
  const Node& n = node(array_node);
  if (position >= n.max_items) return kNoNode;
  if (position < n.prefix_items.size()) return n.prefix_items[position];
  return n.items;
}

// Builds a JsonSchema from a parsed document, one node per schema object (a $ref reuses its
// target's node, so recursive schemas are cycles of indices).
class JsonSchemaCompiler {
 public:
  explicit JsonSchemaCompiler(const Json& document) : document_(document) {
    schema_.nodes_.emplace_back();  // kAnyNode
    complete_.push_back(true);
  }

  StatusOr<std::shared_ptr<const JsonSchema>> run() {
    StatusOr<int32_t> root = compile(document_, "#", 0);
    if (!root.ok()) return root.status();
    if (*root == JsonSchema::kNoNode) return invalid_argument("#: the schema accepts no value");
    schema_.root_ = *root;
    prune_unsatisfiable(schema_.nodes_);
    if (schema_.node(schema_.root_).types == 0) {
      return invalid_argument(
          "#: the schema accepts no finite value (every value it describes "
          "holds another it requires without end, or needs what it forbids)");
    }
    return std::make_shared<const JsonSchema>(std::move(schema_));
  }

 private:
  using Node = JsonSchema::Node;

  static Status error(const std::string& where, const std::string& what) {
    return invalid_argument(where + ": " + what);
  }

  int32_t reserve() {
    schema_.nodes_.emplace_back();
    complete_.push_back(false);
    return static_cast<int32_t>(schema_.nodes_.size() - 1);
  }

  // A schema (object or boolean): its node, kNoNode for `false` where `false` is allowed.
  StatusOr<int32_t> compile(const Json& s, const std::string& where, int depth,
                            bool false_allowed = false) {
    if (depth > kMaxNesting) return error(where, "the schema is nested too deeply");
    if (s.is_boolean()) {
      if (s.get<bool>()) return JsonSchema::kAnyNode;
      if (false_allowed) return JsonSchema::kNoNode;
      return error(where, "the schema `false` accepts no value");
    }
    if (!s.is_object()) return error(where, "a schema is an object or a boolean");
    if (s.contains("$ref")) {
      for (const auto& [keyword, value] : s.items()) {
        if (keyword != "$ref" && !is_annotation(keyword)) {
          return error(where, "\"" + keyword + "\" beside \"$ref\" is not supported");
        }
      }
      return resolve_ref(s.at("$ref"), where, depth);
    }
    const int32_t index = reserve();
    if (Status st = fill(s, index, where, depth); !st.ok()) return st;
    complete_[static_cast<size_t>(index)] = true;
    return index;
  }

  StatusOr<int32_t> resolve_ref(const Json& ref, const std::string& where, int depth) {
    if (!ref.is_string()) return error(where, "\"$ref\" must be a string");
    const std::string text = ref.get<std::string>();
    if (text.empty() || text[0] != '#' || (text.size() > 1 && text[1] != '/')) {
      return error(where,
                   "only references within the schema (\"#\", \"#/...\") are supported, not \"" +
                       text + "\"");
    }
    const std::string pointer = text.substr(1);
    if (auto it = refs_.find(pointer); it != refs_.end()) return it->second;
    if (resolving_.contains(pointer)) return error(where, "\"$ref\" " + text + " refers to itself");
    const Json* target = nullptr;
    try {
      target = &document_.at(Json::json_pointer(pointer));
    } catch (const Json::exception&) {
      return error(where, "\"$ref\" " + text + " points at nothing in the schema");
    }
    if (depth > kMaxNesting) return error(where, "the schema is nested too deeply");
    if (!target->is_object() || target->contains("$ref")) {
      // A boolean or an alias: no node of its own.
      resolving_.insert(pointer);
      StatusOr<int32_t> resolved = compile(*target, text, depth + 1);
      resolving_.erase(pointer);
      if (resolved.ok()) refs_[pointer] = *resolved;
      return resolved;
    }
    const int32_t index = reserve();
    refs_[pointer] = index;  // before the body: a recursive schema refers to this node
    if (Status st = fill(*target, index, text, depth + 1); !st.ok()) return st;
    complete_[static_cast<size_t>(index)] = true;
    return index;
  }

  Status fill(const Json& s, int32_t index, const std::string& where, int depth) {
    static const std::set<std::string> kConstraints = {"type",
                                                       "enum",
                                                       "const",
                                                       "properties",
                                                       "required",
                                                       "additionalProperties",
                                                       "minProperties",
                                                       "maxProperties",
                                                       "items",
                                                       "prefixItems",
                                                       "minItems",
                                                       "maxItems",
                                                       "minLength",
                                                       "maxLength",
                                                       "pattern",
                                                       "format",
                                                       "minimum",
                                                       "maximum",
                                                       "exclusiveMinimum",
                                                       "exclusiveMaximum",
                                                       "anyOf",
                                                       "oneOf",
                                                       "allOf"};
    std::vector<std::string> present;
    for (const auto& [keyword, value] : s.items()) {
      if (is_annotation(keyword)) continue;
      if (!kConstraints.contains(keyword)) {
        return error(where, "the keyword \"" + keyword + "\" is not supported");
      }
      present.push_back(keyword);
    }
    const auto only = [&](const std::string& keyword) {
      return present.size() == 1 && present[0] == keyword;
    };
    for (const char* combinator : {"anyOf", "oneOf", "allOf"}) {
      if (!s.contains(combinator)) continue;
      if (!only(combinator)) {
        return error(
            where, std::string("\"") + combinator + "\" beside other constraints is not supported");
      }
      const Json& branches = s.at(combinator);
      if (!branches.is_array() || branches.empty()) {
        return error(where, std::string("\"") + combinator + "\" must be a non-empty array");
      }
      if (std::string(combinator) == "allOf" && branches.size() != 1) {
        return error(where, "\"allOf\" of more than one schema is not supported");
      }
      return fill_union(branches, index, where + "/" + combinator, depth,
                        std::string(combinator) == "oneOf");
    }
    Node node;
    if (Status st = fill_types(s, node, where); !st.ok()) return st;
    if (s.contains("enum") || s.contains("const")) {
      for (const std::string& keyword : present) {
        if (keyword != "enum" && keyword != "const" && keyword != "type" && keyword != "format") {
          return error(where, "\"" + keyword + "\" beside \"enum\" or \"const\" is not supported");
        }
      }
      if (Status st = fill_enum(s, node, where); !st.ok()) return st;
      schema_.nodes_[static_cast<size_t>(index)] = std::move(node);
      return ok_status();
    }
    if (Status st = fill_object(s, node, where, depth); !st.ok()) return st;
    if (Status st = fill_array(s, node, where, depth); !st.ok()) return st;
    if (Status st = read_counts_and_bounds(s, node, where); !st.ok()) return st;
    if (Status st = read_string_pattern(s, node, where); !st.ok()) return st;
    schema_.nodes_[static_cast<size_t>(index)] = std::move(node);
    return ok_status();
  }

  Status fill_types(const Json& s, Node& node, const std::string& where) {
    if (!s.contains("type")) return ok_status();
    const Json& type = s.at("type");
    std::vector<std::string> names;
    if (type.is_string()) {
      names.push_back(type.get<std::string>());
    } else if (type.is_array()) {
      for (const Json& t : type) {
        if (!t.is_string()) return error(where, "\"type\" lists type names");
        names.push_back(t.get<std::string>());
      }
    } else {
      return error(where, "\"type\" is a type name or a list of them");
    }
    static const std::map<std::string, uint8_t> kTypes = {
        {"object", kJsonObjectBit}, {"array", kJsonArrayBit},    {"string", kJsonStringBit},
        {"number", kJsonNumberBit}, {"integer", kJsonNumberBit}, {"boolean", kJsonBooleanBit},
        {"null", kJsonNullBit}};
    node.types = 0;
    bool integer = false;
    bool number = false;
    for (const std::string& name : names) {
      auto it = kTypes.find(name);
      if (it == kTypes.end()) return error(where, "unknown type \"" + name + "\"");
      node.types |= it->second;
      integer |= name == "integer";
      number |= name == "number";
    }
    node.integer_only = integer && !number;
    if (node.types == 0) return error(where, "\"type\" lists no type");
    return ok_status();
  }

  Status fill_enum(const Json& s, Node& node, const std::string& where) {
    if (s.contains("enum") && s.contains("const")) {
      return error(where, "\"enum\" beside \"const\" is not supported");
    }
    std::vector<Json> values;
    if (s.contains("const")) {
      values.push_back(s.at("const"));
    } else {
      const Json& list = s.at("enum");
      if (!list.is_array() || list.empty())
        return error(where, "\"enum\" must be a non-empty array");
      values.assign(list.begin(), list.end());
    }
    // An asserted format keeps the strings it matches.
    StatusOr<std::shared_ptr<const StringPattern>> format = read_format_pattern(s, where);
    if (!format.ok()) return format.status();
    const std::shared_ptr<const StringPattern> format_pattern = std::move(*format);
    uint8_t types = 0;
    for (const Json& value : values) {
      const uint8_t type = type_of_value(value);
      if ((node.types & type) == 0) continue;
      if (format_pattern && value.is_string() &&
          !format_pattern->matches(value.get<std::string>())) {
        continue;
      }
      if (type == kJsonNumberBit && node.integer_only && value.is_number_float()) continue;
      StatusOr<std::string> text = compact_text(value);
      if (!text.ok()) return error(where, text.status().message());
      node.enum_texts.push_back(std::move(*text));
      types |= type;
    }
    if (node.enum_texts.empty())
      return error(where, "no value of \"enum\" has the schema's type and format");
    std::sort(node.enum_texts.begin(), node.enum_texts.end());
    node.enum_texts.erase(std::unique(node.enum_texts.begin(), node.enum_texts.end()),
                          node.enum_texts.end());
    node.types = types;
    node.integer_only = false;  // the texts say exactly what is written
    node.has_enum = true;
    return ok_status();
  }

  Status fill_object(const Json& s, Node& node, const std::string& where, int depth) {
    if (s.contains("additionalProperties")) {
      StatusOr<int32_t> extra =
          compile(s.at("additionalProperties"), where + "/additionalProperties", depth + 1, true);
      if (!extra.ok()) return extra.status();
      node.additional = *extra;
    }
    std::map<std::string, int32_t> properties;
    if (s.contains("properties")) {
      const Json& list = s.at("properties");
      if (!list.is_object()) return error(where, "\"properties\" must be an object");
      for (const auto& [name, sub] : list.items()) {
        StatusOr<std::string> quoted = compact_text(Json(name));
        if (!quoted.ok() || *quoted != "\"" + name + "\"") {
          return error(where, "the property name " + (quoted.ok() ? *quoted : "?") +
                                  " needs escapes, which are not supported");
        }
        StatusOr<int32_t> child = compile(sub, where + "/properties/" + name, depth + 1, true);
        if (!child.ok()) return child.status();
        properties[name] = *child;
      }
    }
    std::vector<std::string> required;
    if (s.contains("required")) {
      const Json& list = s.at("required");
      if (!list.is_array()) return error(where, "\"required\" must be an array of names");
      for (const Json& name : list) {
        if (!name.is_string()) return error(where, "\"required\" must be an array of names");
        required.push_back(name.get<std::string>());
      }
    }
    for (const std::string& name : required) {
      if (properties.contains(name)) continue;
      if (node.additional == JsonSchema::kNoNode) {
        return error(where, "the required property \"" + name +
                                "\" is not among \"properties\" and no other is allowed");
      }
      StatusOr<std::string> quoted = compact_text(Json(name));
      if (!quoted.ok() || *quoted != "\"" + name + "\"") {
        return error(where, "the property name " + (quoted.ok() ? *quoted : "?") +
                                " needs escapes, which are not supported");
      }
      properties[name] = node.additional;
    }
    if (properties.size() > static_cast<size_t>(JsonSchema::kMaxProperties)) {
      return error(where, "more than 64 properties are not supported");
    }
    for (const auto& [name, child] : properties) node.properties.push_back({name, child});
    for (size_t i = 0; i < node.properties.size(); ++i) {
      const JsonSchema::Property& p = node.properties[i];
      const bool is_required =
          std::find(required.begin(), required.end(), p.name) != required.end();
      if (!is_required) continue;
      if (p.node == JsonSchema::kNoNode) {
        return error(where, "the required property \"" + p.name + "\" accepts no value");
      }
      node.required |= uint64_t{1} << i;
    }
    return ok_status();
  }

  Status fill_array(const Json& s, Node& node, const std::string& where, int depth) {
    if (s.contains("prefixItems")) {
      const Json& list = s.at("prefixItems");
      if (!list.is_array()) return error(where, "\"prefixItems\" must be an array of schemas");
      for (size_t i = 0; i < list.size(); ++i) {
        StatusOr<int32_t> child =
            compile(list[i], where + "/prefixItems/" + std::to_string(i), depth + 1);
        if (!child.ok()) return child.status();
        node.prefix_items.push_back(*child);
      }
    }
    if (s.contains("items")) {
      if (s.at("items").is_array()) {
        return error(where, "\"items\" as an array is not supported (use \"prefixItems\")");
      }
      StatusOr<int32_t> child = compile(s.at("items"), where + "/items", depth + 1, true);
      if (!child.ok()) return child.status();
      node.items = *child;
    }
    return ok_status();
  }

  // anyOf / oneOf (and allOf of one): each JSON type goes to at most one branch.
  Status fill_union(const Json& branches, int32_t index, const std::string& where, int depth,
                    bool one_of) {
    std::array<std::vector<int32_t>, 6> takers;  // by type index: the branches' nodes
    for (size_t i = 0; i < branches.size(); ++i) {
      const std::string at = where + "/" + std::to_string(i);
      StatusOr<int32_t> branch = compile(branches[i], at, depth + 1);
      if (!branch.ok()) return branch.status();
      if (!complete_[static_cast<size_t>(*branch)]) {
        return error(at,
                     "a branch that refers back to its union without an object or array "
                     "between is not supported");
      }
      for (uint8_t bit = 1; bit < 64; bit = static_cast<uint8_t>(bit << 1)) {
        const int32_t taker = schema_.node_for_type(*branch, bit);
        if (taker == JsonSchema::kNoNode) continue;
        std::vector<int32_t>& list = takers[static_cast<size_t>(type_index(bit))];
        const std::vector<int32_t>& nested = schema_.node(taker).choices;  // flattened
        for (const int32_t t : nested.empty() ? std::vector<int32_t>{taker} : nested) {
          if (std::find(list.begin(), list.end(), t) != list.end()) continue;
          if (one_of) {
            for (const int32_t other : list) {
              if (!told_apart(schema_, t, other, bit)) {
                return error(at, std::string("two branches of \"oneOf\" accept ") + type_name(bit) +
                                     " values, which is supported only for objects told apart "
                                     "by a required property of different constant values "
                                     "(use \"anyOf\" where a value may fit both)");
              }
            }
          }
          list.push_back(t);
        }
      }
    }
    Node node;
    node.types = 0;
    node.branch_by_type.assign(6, JsonSchema::kNoNode);
    for (uint8_t bit = 1; bit < 64; bit = static_cast<uint8_t>(bit << 1)) {
      const std::vector<int32_t>& list = takers[static_cast<size_t>(type_index(bit))];
      if (list.empty()) continue;
      node.types |= bit;
      int32_t taker = list[0];
      if (list.size() > 1) {  // a choice node of this one type
        taker = reserve();
        complete_[static_cast<size_t>(taker)] = true;
        Node& choice = schema_.nodes_[static_cast<size_t>(taker)];
        choice.types = bit;
        choice.choices = list;
      }
      node.branch_by_type[static_cast<size_t>(type_index(bit))] = taker;
    }
    schema_.nodes_[static_cast<size_t>(index)] = std::move(node);
    return ok_status();
  }

  const Json& document_;
  JsonSchema schema_;
  std::vector<bool> complete_;           // by node: its body is filled
  std::map<std::string, int32_t> refs_;  // JSON pointer → node
  std::set<std::string> resolving_;      // aliases being followed (cycle check)
};

StatusOr<std::shared_ptr<const JsonSchema>> JsonSchema::compile(std::string_view schema_text) {
  // Values (a const, an enum) are compared and written recursively: refuse texts that nest more
  // than a schema nested kMaxNesting deep can (two levels a schema: its object and a keyword's).
  constexpr size_t kMaxTextDepth = 4 * kMaxNesting;
  if (const size_t depth = json_nesting_depth(schema_text); depth > kMaxTextDepth) {
    return invalid_argument("the schema nests " + std::to_string(depth) + " levels deep; at most " +
                            std::to_string(kMaxTextDepth));
  }
  Json document;
  try {
    document = Json::parse(schema_text.begin(), schema_text.end());
  } catch (const Json::exception& e) {
    return invalid_argument(std::string("the schema is not valid JSON: ") + e.what());
  }
  return JsonSchemaCompiler(document).run();
}

std::shared_ptr<const JsonSchema> JsonSchema::any_object() {
  static const std::shared_ptr<const JsonSchema> kAnyObject = [] {
    StatusOr<std::shared_ptr<const JsonSchema>> schema = compile(R"({"type": "object"})");
    return *schema;
  }();
  return kAnyObject;
}

}  // namespace cellm
