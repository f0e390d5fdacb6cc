// The last pass of JsonSchema::compile: which types each node can hold in a finite value, and the
// removal of every type, property, item and branch that cannot — so that JsonSchemaPrefix never
// begins a value it could not end (a recursive property required without end, say). Knows only
// the node table. Thread-safety: a function over its argument.
#pragma once

#include <vector>

#include "batching/json_schema.h"

namespace cellm {

// The types each node can hold in a finite value: the least fixed point of "an object whose
// required properties can each hold some value, an array whose first minItems items can, any
// scalar". Then every type, property, item and branch that cannot is removed, so that the walker
// never enters a value it could not finish (a recursive property required without end, say).
void prune_unsatisfiable(std::vector<JsonSchema::Node>& nodes);

}  // namespace cellm
