// GGUF tensor geometry: the rules a tensor's dims and type must obey, shared by reader and writer.
//
// A GGUF tensor has 1 to 4 dims (GGML_MAX_DIMS), innermost first, each below 2^63 (GGML stores
// them as int64), an element count below 2^63, and an innermost dim that is a whole number of its
// type's blocks. A dim of 0 is allowed, as GGML allows it: the tensor is empty (0 bytes).
// The reader turns a violation into DataLoss, the writer into InvalidArgument; the messages here
// carry no prefix so each caller names the tensor and the file. Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "core/status.h"
#include "gguf/tensor_type.h"

namespace cellm {

inline constexpr size_t kGgufMaxDims = 4;
inline constexpr uint64_t kGgufMaxDim = static_cast<uint64_t>(INT64_MAX);

struct TensorGeometry {
  uint64_t num_elements = 0;  // product of dims
  uint64_t size_bytes = 0;    // rows × row_size_bytes(type, dims[0])
};

// The geometry of a tensor of `type` with `dims`; InvalidArgument naming the broken rule
// ("has 5 dims (at most 4)", "a row of 33 elements is not a whole number of q4_0 blocks of 32").
StatusOr<TensorGeometry> tensor_geometry(TensorType type, std::span<const uint64_t> dims);

// "64x512", innermost first, as llama.cpp prints shapes.
std::string gguf_shape_string(std::span<const uint64_t> dims);

}  // namespace cellm
