// swiglu: out = silu(gate) · up (or, with gelu_tanh, gelu(gate) · up: GeGLU) elementwise on the GPU
// (the CPU oracle's cpu_silu_mul, cpu_gelu_tanh_mul), for separate gate/up buffers or one fused [T,
// 2·ffn] gate|up matmul output (strides say which). Stream-ordered, no allocation, capturable. Who
// calls it: the CUDA forward's FFN, the tests. Thread-safety: launches on a stream.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/kernels/wide_act_order.cuh"
#include "core/status.h"

namespace cellm::kernels {

struct SwigluParams {
  int64_t num_tokens = 0;
  int64_t dim = 0;              // ffn
  const float* gate = nullptr;  // [num_tokens, gate_stride] f32
  int64_t gate_stride = 0;
  const float* up = nullptr;  // [num_tokens, up_stride] f32
  int64_t up_stride = 0;
  float* out = nullptr;  // [num_tokens, out_stride] f32 (may alias gate or up)
  int64_t out_stride = 0;
  // Or, instead of out (then null), the values rounded to bf16 in the column order the down
  // product takes (wide_act_order.cuh), [num_tokens, dim] — its input (MatmulParams::x_wide), so
  // it needs no launch to round (and permute) out. kFused: dim a multiple of 32.
  uint16_t* out_wide = nullptr;
  WideOrder out_wide_order = WideOrder::kFused;
  // GeGLU instead: gelu(gate) · up with GELU's tanh form (gemma3; cpu_gelu_tanh_mul).
  bool gelu_tanh = false;
};

// The params for a fused gate|up output `gate_up` [num_tokens, 2·dim] (gate in columns [0, dim),
// up in [dim, 2·dim)) written to `out` [num_tokens, dim].
SwigluParams swiglu_fused_params(const float* gate_up, int64_t num_tokens, int64_t dim, float* out);

Status launch_swiglu(const SwigluParams& params, cudaStream_t stream);

}  // namespace cellm::kernels
