// The counting and range keywords of a JSON Schema, read into a compiled node (json_schema.h):
// minLength / maxLength, minItems / maxItems, minProperties / maxProperties, and minimum / maximum
// / exclusiveMinimum / exclusiveMaximum on integers. A part of JsonSchema::compile
// (json_schema.cpp), apart to keep each file to one job; no one else calls it.
// Thread-safety: functions over their arguments.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "batching/json_schema.h"
#include "core/status.h"

namespace cellm {

// Reads the keywords `schema` has into `node` (its types, items and properties already read) and
// drops the types no value can have under them (a string of minLength 3 and maxLength 2); an
// error names the keyword and `where`.
Status read_counts_and_bounds(const nlohmann::json& schema, JsonSchema::Node& node,
                              const std::string& where);

}  // namespace cellm
