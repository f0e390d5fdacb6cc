// gemv_launch: internal seam between the matmul dispatcher (matmul.cu) and the per-type small-M
// kernels (gemv_<type>.cu). Arguments are validated by the dispatcher; these only launch.
// Thread-safety: launches on the given stream.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "gguf/tensor_type.h"

namespace cellm::kernels {

struct GemvArgs {
  const uint8_t* w = nullptr;  // [num_rows, row_bytes] in the device layout
  int64_t num_rows = 0;        // N
  int64_t num_cols = 0;        // K
  uint64_t row_bytes = 0;
  const float* x = nullptr;  // [num_tokens, x_stride] f32
  int64_t x_stride = 0;
  int32_t num_tokens = 0;  // 1..8
  float* y = nullptr;      // [num_tokens, y_stride] f32
  int64_t y_stride = 0;
  bool accumulate = false;
  // int8 activations (quantize_activations.cuh) for the dp4a kernels; x is unused then.
  const int8_t* x_q8 = nullptr;        // [num_tokens, num_cols], interleaved order
  const float* x_q8_scales = nullptr;  // [num_tokens, num_cols / 32]
};

// Interleaved / aligned fast paths (gemv_<type>.cu).
void launch_gemv_f32(const GemvArgs& args, cudaStream_t stream);
void launch_gemv_f16(const GemvArgs& args, cudaStream_t stream);
void launch_gemv_bf16(const GemvArgs& args, cudaStream_t stream);
void launch_gemv_q8_0(const GemvArgs& args, cudaStream_t stream);
void launch_gemv_q4_0(const GemvArgs& args, cudaStream_t stream);
void launch_gemv_q4_k(const GemvArgs& args, cudaStream_t stream);
void launch_gemv_q6_k(const GemvArgs& args, cudaStream_t stream);

// Interleaved Q8_0 / Q4_0 against int8 activations (gemv_dp4a.cu).
void launch_gemv_q8_0_dp4a(const GemvArgs& args, cudaStream_t stream);
void launch_gemv_q4_0_dp4a(const GemvArgs& args, cudaStream_t stream);

// Any GGUF-layout row (gemv_generic.cu): a warp per row, one element at a time. Slow; for row
// lengths the fast layouts do not cover.
void launch_gemv_generic(const GemvArgs& args, TensorType type, cudaStream_t stream);

}  // namespace cellm::kernels
