// rope_kv_output: what a q|k|v product's epilogue needs to do rope_kv.cuh's op itself — RoPE with
// normal-style pairs (2i, 2i + 1) on the q and k rows, no q/k norms, q into y and k, v into the
// K/V cache rows of the tokens — and the check of those arguments. The products that take it:
// decode_matmul.cuh (DecodeOutput::kRopeKv) and matmul_int8.cuh (Int8MatmulParams::rope); the
// device side is rope_kv_output.cuh. Thread-safety: plain data and a pure function.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "program/program_spec.h"

namespace cellm::kernels {

struct RopeKvOutput {
  const int32_t* positions = nullptr;  // [num_tokens] device
  const int32_t* cells = nullptr;      // [num_tokens] device: the cache row token t writes
  int32_t q_width = 0;                 // num_heads · head_dim: rows [0, q_width) are q
  int32_t kv_width = 0;                // num_kv_heads · head_dim: the next rows are k
  int32_t v_width = 0;                 // num_kv_heads · value_head_dim: then v
  int32_t head_dim = 0;                // even
  int32_t num_rotary_dims = 0;         // even, ≤ head_dim: leading dims of a head that rotate
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;
  const float* freq_factors = nullptr;  // [num_rotary_dims / 2] device divisors, or null
  float attn_factor = 1.0f;             // cos and sin multiplied by this (LongRoPE)
  // [num_tokens, num_rotary_dims / 2] device (cos, sin) of the tokens' positions
  // (launch_rope_table, rope_kv.cuh), or null: the epilogue computes them.
  const float2* cos_sin = nullptr;
  void* k_cache = nullptr;  // [rows, kv_width] in cache_dtype
  void* v_cache = nullptr;  // [rows, v_width] in cache_dtype
  KvDtype cache_dtype = KvDtype::kF32;
};

// Empty when `r` fits a product of `num_rows` rows (q, k, v) whose q rows go to a y of `y_stride`
// columns; else what is wrong (odd or mismatched sizes, a null pointer).
std::string rope_kv_output_problem(const RopeKvOutput& r, int64_t num_rows, int64_t y_stride);

}  // namespace cellm::kernels
