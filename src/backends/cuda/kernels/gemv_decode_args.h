// gemv_decode_args: the launch arguments of the fused decode product's kernels (gemv_decode.cuh),
// a plain struct host code may hold (the benchmark's variant launches), and their construction
// from checked DecodeMatmulParams. Thread-safety: plain data.
#pragma once

#include <cstdint>

#include "backends/cuda/kernels/decode_matmul.cuh"

namespace cellm::kernels {

// The launch arguments of gemv_decode_kernel, by value (fields as in DecodeMatmulParams).
struct DecodeGemvArgs {
  const uint8_t* w = nullptr;  // [num_rows, row_bytes] device layout
  int64_t num_rows = 0;        // N
  int64_t num_cols = 0;        // K
  uint64_t row_bytes = 0;
  int32_t num_tokens = 0;
  const float* x = nullptr;
  int64_t x_stride = 0;
  const int32_t* x_rows = nullptr;
  const float* norm_weight = nullptr;
  float norm_eps = 0.0f;
  const int8_t* x_q8 = nullptr;
  const float* x_q8_scales = nullptr;
  bool x_q8_per_256 = false;
  const int32_t* x_q8_sums = nullptr;
  const double* x_q8_sum_squares = nullptr;
  bool x_q8_per_16 = false;
  bool int8_fold = false;  // DecodeMatmulParams::int8_activations
  const float* bias = nullptr;
  DecodeOutput output = DecodeOutput::kStore;
  bool gelu_tanh = false;
  float* y = nullptr;
  int64_t y_stride = 0;
  bool accumulate = false;
  RopeKvOutput rope;
  DecodeHandover handover;
  PdlTrigger trigger = PdlTrigger::kAtStart;
};

// The arguments of `params` (which launch_decode_matmul's checks accept).
DecodeGemvArgs make_decode_gemv_args(const DecodeMatmulParams& params);

}  // namespace cellm::kernels
