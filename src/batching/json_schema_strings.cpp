#include "batching/json_schema_strings.h"

#include <algorithm>
#include <optional>

#include "batching/string_format.h"
#include "core/check.h"

namespace cellm {
namespace {

using Json = nlohmann::json;

Status error(const std::string& where, const std::string& what) {
  return invalid_argument(where + ": " + what);
}

// "format", where string_format() asserts it; nullopt where it is absent or an annotation.
StatusOr<std::optional<StringFormat>> read_format(const Json& s, const std::string& where) {
  if (!s.contains("format")) return std::optional<StringFormat>();
  if (!s.at("format").is_string()) return error(where, "\"format\" must be a string");
  return string_format(s.at("format").get<std::string>());
}

}  // namespace

Status read_string_pattern(const Json& s, JsonSchema::Node& node, const std::string& where) {
  StatusOr<std::optional<StringFormat>> format = read_format(s, where);
  if (!format.ok()) return format.status();
  if (s.contains("pattern") && !s.at("pattern").is_string()) {
    return error(where, "\"pattern\" must be a string");
  }
  if (!s.contains("pattern") && !format->has_value()) return ok_status();
  if ((node.types & kJsonStringBit) == 0) return ok_status();
  const bool both = s.contains("pattern") && format->has_value();
  const std::string keyword = both                  ? "\"pattern\" and \"format\""
                              : format->has_value() ? "\"format\""
                                                    : "\"pattern\"";
  if (format->has_value()) node.max_length = std::min(node.max_length, (*format)->max_length);
  StatusOr<std::shared_ptr<const StringPattern>> pattern = StringPattern::compile(
      s.contains("pattern") ? s.at("pattern").get<std::string>() : (*format)->pattern,
      node.min_length, node.max_length);
  if (!pattern.ok()) {
    return error(where, (both ? "\"pattern\"" : keyword) + ": " + pattern.status().message());
  }
  if (both) {  // the strings the format allows that the pattern matches
    StatusOr<std::shared_ptr<const StringPattern>> allowed =
        StringPattern::compile((*format)->pattern, 0, StringPattern::kUnbounded);
    CELLM_CHECK(allowed.ok()) << "a format's expression compiles: " << allowed.status().message();
    pattern = StringPattern::intersect(**pattern, **allowed, node.min_length, node.max_length);
    if (!pattern.ok()) return error(where, keyword + ": " + pattern.status().message());
  }
  if (!(*pattern)->matches_something()) {
    node.types &= static_cast<uint8_t>(~kJsonStringBit);
    if (node.types == 0) {
      return error(where, "no string matches " + keyword + " within its length bounds");
    }
    return ok_status();
  }
  node.pattern = std::move(*pattern);
  return ok_status();
}

StatusOr<std::shared_ptr<const StringPattern>> read_format_pattern(const Json& s,
                                                                   const std::string& where) {
  StatusOr<std::optional<StringFormat>> format = read_format(s, where);
  if (!format.ok()) return format.status();
  if (!format->has_value()) return std::shared_ptr<const StringPattern>();
  StatusOr<std::shared_ptr<const StringPattern>> compiled =
      StringPattern::compile((*format)->pattern, 0, (*format)->max_length);
  CELLM_CHECK(compiled.ok()) << "a format's expression compiles: " << compiled.status().message();
  return compiled;
}

}  // namespace cellm
