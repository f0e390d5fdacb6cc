// Test support for the GGUF reader (not part of cellm_gguf): an independent check of what a
// parsed file promises, and small valid copies of real models to mutate and fuzz.
//
// Used by gguf_mutation_test, the other gguf tests, and the libFuzzer target and its seed maker.
// check_parsed_file recomputes every promise from the raw bytes and the type table rather than
// trusting the reader. Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "gguf/gguf_file.h"

namespace cellm::gguf_testing {

// Empty when every promise of a successfully parsed `file` over `bytes` holds: version 2 or 3,
// a power-of-two alignment, every key and tensor findable, each array's elements of its element
// type, each tensor's dims, element count and byte size consistent with its type, its data
// aligned, inside `bytes` and disjoint from every other tensor's. Otherwise what broke.
std::string check_parsed_file(const GgufFile& file, std::span<const uint8_t> bytes);

// A small valid GGUF v3 copy of `file`: the same keys and value types in order (arrays cut to
// their first `max_array_elements` elements, recursively), the same alignment, and the same
// tensors (names, types, dim counts, innermost dim) with every outer dim set to 1 and the first
// row's bytes copied from the original.
StatusOr<std::vector<uint8_t>> shrink_gguf(const GgufFile& file, size_t max_array_elements);

}  // namespace cellm::gguf_testing
