// The string keywords of a JSON Schema beyond its lengths, read into a compiled node
// (json_schema.h): "pattern" and the "format"s string_format.h asserts, compiled into the node's
// StringPattern. A part of JsonSchema::compile (json_schema.cpp), apart to keep each file to one
// job; no one else calls it. Thread-safety: functions over their arguments.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "batching/json_schema.h"
#include "batching/string_pattern.h"
#include "core/status.h"

namespace cellm {

// "pattern" or an asserted "format" into node.pattern, compiled with the node's lengths (read
// before; a hostname's or an email's own bound folded in); both at once, the strings of the format
// the pattern matches. A string type no string can satisfy is dropped; an error names the keyword
// and `where`.
Status read_string_pattern(const nlohmann::json& schema, JsonSchema::Node& node,
                           const std::string& where);

// The strings an asserted "format" allows (a pattern without length bounds), or null where the
// schema has none or only an annotation.
StatusOr<std::shared_ptr<const StringPattern>> read_format_pattern(const nlohmann::json& schema,
                                                                   const std::string& where);

}  // namespace cellm
