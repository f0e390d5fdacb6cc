// rms_norm: RMSNorm on the GPU, optionally fused with the residual add that precedes it, and a
// per-head variant (qwen3's q/k norms) — the CPU oracle's cpu_rms_norm, bit for bit in practice
// (squares summed in double, scale = 1 / sqrtf(mean + eps), then (x · scale) · w, no FMAs).
// Stream-ordered, no allocation, capturable. Who calls it: the CUDA forward (attention and FFN
// norms, the final norm on kept rows), the kernel tests. Thread-safety: launches on a stream.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/kernels/wide_act_order.cuh"
#include "core/status.h"

namespace cellm::kernels {

struct RmsNormParams {
  int64_t num_rows = 0;
  int32_t dim = 0;
  float eps = 0.0f;
  const float* weight = nullptr;  // [dim] f32
  // The residual stream. When `add` is set it first becomes x + add (written back to x).
  float* x = nullptr;  // [num_rows, x_stride] f32
  int64_t x_stride = 0;
  const float* add = nullptr;  // [num_rows, add_stride] f32, or null
  int64_t add_stride = 0;
  float* y = nullptr;  // [num_rows, y_stride] f32: norm(x) · weight (may be x itself)
  int64_t y_stride = 0;
  // Or, instead of y (then null), those values rounded to bf16 in the column order the next
  // product takes (wide_act_order.cuh), [num_rows, dim] — its input (MatmulParams::x_wide), so it
  // needs no launch to round (and permute) y. kFused: dim a multiple of 32.
  uint16_t* y_wide = nullptr;
  WideOrder y_wide_order = WideOrder::kFused;
};

// One block per row; any dim ≥ 1 (rows of up to 4096 held in registers, longer ones streamed).
Status launch_rms_norm(const RmsNormParams& params, cudaStream_t stream);

struct HeadRmsNormParams {
  int32_t num_tokens = 0;
  int32_t num_heads = 0;
  int32_t head_dim = 0;  // ≤ 1024
  float eps = 0.0f;
  const float* weight = nullptr;  // [head_dim] f32, shared by every head
  float* x = nullptr;  // [num_tokens, token_stride] f32; head h at h * head_dim; in place
  int64_t token_stride = 0;
};

// Normalizes every head of every token in place (a warp per head).
Status launch_head_rms_norm(const HeadRmsNormParams& params, cudaStream_t stream);

}  // namespace cellm::kernels
