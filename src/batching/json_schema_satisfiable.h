// What the compiled nodes of a JSON Schema can hold, for JsonSchema::compile (json_schema.cpp):
// its last pass, which types each node can hold in a finite value and the removal of every type,
// property, item and branch that cannot — so that JsonSchemaPrefix never begins a value it could
// not end (a recursive property required without end, say) —, and whether two branches of a
// oneOf can never both fit a value. Knows only the node table. Thread-safety: functions over
// their arguments.
#pragma once

#include <vector>

#include "batching/json_schema.h"

namespace cellm {

// The types each node can hold in a finite value: the least fixed point of "an object whose
// required properties can each hold some value, an array whose first minItems items can, any
// scalar" (a choice: what one of its branches can). Then every type, property, item and branch
// that cannot is removed, so that the walker
// never enters a value it could not finish (a recursive property required without end, say).
void prune_unsatisfiable(std::vector<JsonSchema::Node>& nodes);

// Whether no value of type `bit` fits both nodes a and b of `schema`: objects that both require a
// property whose values are constants (enums) with none in common (pydantic's discriminated
// unions). False where it cannot tell.
bool told_apart(const JsonSchema& schema, int32_t a, int32_t b, uint8_t bit);

}  // namespace cellm
