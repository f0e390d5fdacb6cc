// Reference CPU dequantization of GGUF tensor data to f32, and a fused dequantize-and-dot.
//
// Supports F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K exactly as
// the GGML block formats define them (block_formats.h), and cellm's q4_g32/q4_g64/q4_g128, with the
// reference dequantizers' float operations in the same order (no fused multiply-add: these files
// build with -ffp-contract=off), so a value matches llama.cpp's bit for bit. Knows bytes and
// element counts, not tensors' shapes or names: callers add the tensor name to errors
// (Status::with_context). The CPU reference forward calls dot_row / dequantize_row once per weight
// row; they allocate nothing. Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/status.h"
#include "gguf/tensor_type.h"

namespace cellm {

// True for the types listed above; agrees with tensor_type_traits(type).can_dequantize.
bool can_dequantize(TensorType type);

// OK when `num_bytes` is exactly one row of `num_elements` elements of `type` (a whole number of
// blocks) and `type` can be dequantized; otherwise an error naming the type and the sizes.
Status check_row(TensorType type, size_t num_bytes, size_t num_elements);

// Dequantizes one row: src holds dst.size() elements of `type`. Errors as check_row.
Status dequantize_row(TensorType type, std::span<const uint8_t> src,
                      std::span<float> dst);  // dst: [num_elements], f32

// Dequantizes a whole tensor's data (any number of rows, stored contiguously) of
// `num_elements` elements into a new vector. Errors as check_row.
StatusOr<std::vector<float>> dequantize_tensor(TensorType type, std::span<const uint8_t> data,
                                               uint64_t num_elements);

// The dot product of a and b (same length) in the summation order of dot_row below.
float dot_f32(std::span<const float> a, std::span<const float> b);

// sum_i w[i] * x[i] where w is `row` (n elements of `type`) dequantized, without a full-row
// temporary. Summation order, fixed and platform-independent: eight f32 partial sums, element i
// going to sum i % 8 in increasing i (w[i] * x[i] rounded to f32, then added); the result is
// ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7)). So dot_row(type, row, x, n) equals
// dot_f32(dequantized row, x) bit for bit. The sizes are a caller's contract, checked once
// with check_row when the weights are loaded: a mismatch here is a CELLM_CHECK failure.
float dot_row(TensorType type, std::span<const uint8_t> row, const float* x,  // x: [n], f32
              size_t n);

}  // namespace cellm
