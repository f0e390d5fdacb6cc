// A JSON Schema validator for tests of the schema walker (json_schema_prefix_test): written from
// the JSON Schema specification for the subset json_schema.h supports, over nlohmann::json values,
// sharing no code with the walker or its compiler (formats: string_format_oracle_test_util.h).
// Test code only. Thread-safety: stateless.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>

#include "batching/string_format_oracle_test_util.h"

namespace cellm::testing {

// Code points of a valid UTF-8 string.
inline size_t utf8_length(const std::string& text) {
  size_t n = 0;
  for (const char c : text) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80 ? 1 : 0;
  return n;
}

// A valid UTF-8 string's code points, one per wchar_t (32 bits here).
inline std::wstring utf8_to_wide(const std::string& text) {
  std::wstring out;
  for (size_t i = 0; i < text.size();) {
    const auto b = static_cast<unsigned char>(text[i]);
    const int extra = b < 0x80 ? 0 : b < 0xE0 ? 1 : b < 0xF0 ? 2 : 3;
    uint32_t v = extra == 0 ? b : b & (0x3Fu >> extra);
    for (int k = 1; k <= extra && i + static_cast<size_t>(k) < text.size(); ++k) {
      v = (v << 6) | (static_cast<unsigned char>(text[i + static_cast<size_t>(k)]) & 0x3Fu);
    }
    out.push_back(static_cast<wchar_t>(v));
    i += static_cast<size_t>(extra) + 1;
  }
  return out;
}

// Whether `value` matches the ECMA-262 `pattern` anywhere, by the standard library's ECMAScript
// regex over code points. True where that library cannot answer as ECMA-262 does: a pattern it
// does not parse, or a value holding a character its classes read otherwise (Unicode spaces for
// \s, U+2028 / U+2029 for `.`), a long one (its matcher recurses per character), or a pattern
// with a count of more than six digits.
inline bool oracle_matches_pattern(const std::string& pattern, const std::string& value) {
  const std::wstring text = utf8_to_wide(value);
  if (text.size() > 256 || pattern.size() > 256) return true;
  size_t digits = 0;  // a count past int64 overflows inside libstdc++'s regex compiler
  for (const char c : pattern) {
    digits = c >= '0' && c <= '9' ? digits + 1 : 0;
    if (digits > 6) return true;
  }
  for (const wchar_t c : text) {
    if (c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
        c == 0x202F || c == 0x205F || c == 0x3000 || c == 0xFEFF) {
      return true;
    }
  }
  // libstdc++'s breadth-first matcher where it has one: its default backtracks, exponentially on
  // patterns such as (a*)*b.
#ifdef __GLIBCXX__
  constexpr auto kFlags = std::regex::ECMAScript | std::regex_constants::__polynomial;
#else
  constexpr auto kFlags = std::regex::ECMAScript;
#endif
  try {
    return std::regex_search(text, std::wregex(utf8_to_wide(pattern), kFlags));
  } catch (const std::regex_error&) {
    return true;
  }
}

inline bool oracle_has_type(const nlohmann::json& value, const std::string& type) {
  if (type == "object") return value.is_object();
  if (type == "array") return value.is_array();
  if (type == "string") return value.is_string();
  if (type == "boolean") return value.is_boolean();
  if (type == "null") return value.is_null();
  if (type == "number") return value.is_number();
  if (type == "integer") {
    if (value.is_number_integer()) return true;
    return value.is_number_float() && std::floor(value.get<double>()) == value.get<double>();
  }
  return false;
}

// -1, 0 or 1 as number a is below, equal to or above b: exactly when both are integers (a double
// would round 2^53 + 1), else as doubles.
inline int oracle_compare(const nlohmann::json& a, const nlohmann::json& b) {
  if (!a.is_number_float() && !b.is_number_float()) {
    const bool a_negative =
        a.is_number_integer() && !a.is_number_unsigned() && a.get<int64_t>() < 0;
    const bool b_negative =
        b.is_number_integer() && !b.is_number_unsigned() && b.get<int64_t>() < 0;
    if (a_negative != b_negative) return a_negative ? -1 : 1;
    if (a_negative) {
      const int64_t x = a.get<int64_t>();
      const int64_t y = b.get<int64_t>();
      return x < y ? -1 : x > y ? 1 : 0;
    }
    const uint64_t x = a.get<uint64_t>();
    const uint64_t y = b.get<uint64_t>();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  const double x = a.get<double>();
  const double y = b.get<double>();
  return x < y ? -1 : x > y ? 1 : 0;
}

// Whether `value` is valid against `schema` (a part of `root`, which $ref points into). Counts
// are compared as doubles: a schema may give any number (1e80 items).
inline bool oracle_valid(const nlohmann::json& root, const nlohmann::json& schema,
                         const nlohmann::json& value) {
  using nlohmann::json;
  if (schema.is_boolean()) return schema.get<bool>();
  if (schema.contains("$ref")) {
    const std::string ref = schema.at("$ref").get<std::string>();
    return oracle_valid(root, root.at(json::json_pointer(ref.substr(1))), value);
  }
  if (schema.contains("type")) {
    const json& type = schema.at("type");
    bool any = false;
    if (type.is_string()) {
      any = oracle_has_type(value, type.get<std::string>());
    } else {
      for (const json& t : type) any = any || oracle_has_type(value, t.get<std::string>());
    }
    if (!any) return false;
  }
  if (schema.contains("enum")) {
    bool found = false;
    for (const json& option : schema.at("enum")) found = found || option == value;
    if (!found) return false;
  }
  if (schema.contains("const") && schema.at("const") != value) return false;
  if (schema.contains("anyOf")) {
    bool any = false;
    for (const json& branch : schema.at("anyOf")) any = any || oracle_valid(root, branch, value);
    if (!any) return false;
  }
  if (schema.contains("oneOf")) {
    int matches = 0;
    for (const json& branch : schema.at("oneOf")) matches += oracle_valid(root, branch, value);
    if (matches != 1) return false;
  }
  if (schema.contains("allOf")) {
    for (const json& branch : schema.at("allOf")) {
      if (!oracle_valid(root, branch, value)) return false;
    }
  }
  if (value.is_object()) {
    const json properties = schema.value("properties", json::object());
    for (const auto& [key, child] : value.items()) {
      if (properties.contains(key)) {
        if (!oracle_valid(root, properties.at(key), child)) return false;
      } else if (schema.contains("additionalProperties")) {
        if (!oracle_valid(root, schema.at("additionalProperties"), child)) return false;
      }
    }
    for (const json& name : schema.value("required", json::array())) {
      if (!value.contains(name.get<std::string>())) return false;
    }
    if (schema.contains("minProperties") &&
        static_cast<double>(value.size()) < schema.at("minProperties").get<double>()) {
      return false;
    }
    if (schema.contains("maxProperties") &&
        static_cast<double>(value.size()) > schema.at("maxProperties").get<double>()) {
      return false;
    }
  }
  if (value.is_number()) {
    const auto cmp = [&](const char* keyword) { return oracle_compare(value, schema.at(keyword)); };
    if (schema.contains("minimum") && cmp("minimum") < 0) return false;
    if (schema.contains("maximum") && cmp("maximum") > 0) return false;
    if (schema.contains("exclusiveMinimum") && cmp("exclusiveMinimum") <= 0) return false;
    if (schema.contains("exclusiveMaximum") && cmp("exclusiveMaximum") >= 0) return false;
  }
  if (value.is_array()) {
    const json prefix = schema.value("prefixItems", json::array());
    for (size_t i = 0; i < value.size(); ++i) {
      if (i < prefix.size()) {
        if (!oracle_valid(root, prefix[i], value[i])) return false;
      } else if (schema.contains("items")) {
        if (!oracle_valid(root, schema.at("items"), value[i])) return false;
      }
    }
    if (schema.contains("minItems") &&
        static_cast<double>(value.size()) < schema.at("minItems").get<double>()) {
      return false;
    }
    if (schema.contains("maxItems") &&
        static_cast<double>(value.size()) > schema.at("maxItems").get<double>()) {
      return false;
    }
  }
  if (value.is_string()) {
    const size_t length = utf8_length(value.get<std::string>());
    if (schema.contains("minLength") &&
        static_cast<double>(length) < schema.at("minLength").get<double>())
      return false;
    if (schema.contains("maxLength") &&
        static_cast<double>(length) > schema.at("maxLength").get<double>())
      return false;
    if (schema.contains("pattern") &&
        !oracle_matches_pattern(schema.at("pattern").get<std::string>(),
                                value.get<std::string>())) {
      return false;
    }
    if (schema.contains("format") &&
        !oracle_matches_format(schema.at("format").get<std::string>(), value.get<std::string>())) {
      return false;
    }
  }
  return true;
}

}  // namespace cellm::testing
