// swiglu: the silu(gate) · up kernel, or gelu(gate) · up (swiglu.cuh).
#include <algorithm>
#include <cstdint>
#include <string>

#include "backends/cuda/kernels/kernel_common.cuh"
#include "backends/cuda/kernels/launch_status.h"
#include "backends/cuda/kernels/op_math.cuh"
#include "backends/cuda/kernels/pdl.cuh"
#include "backends/cuda/kernels/swiglu.cuh"
#include "backends/cuda/kernels/wide_act_order.cuh"

namespace cellm::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kVector = 4;  // columns per thread where rows, strides and pointers allow float4s

// Block (x, y): columns [x · kThreads · columns, …) of tokens y, y + gridDim.y, …; each thread
// `columns` consecutive ones (4: one float4 of gate and of up; the bf16 output as two pairs, which
// stay adjacent in either order, wide_act_order.cuh).
template <int kColumns>
__global__ void __launch_bounds__(kThreads) swiglu_kernel(const SwigluParams p) {
  pdl_launch_dependents();
  pdl_wait();
  const int64_t i = (static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x) * kColumns;
  if (i >= p.dim) return;
  for (int64_t t = blockIdx.y; t < p.num_tokens; t += gridDim.y) {
    float g[kColumns];
    float u[kColumns];
    if constexpr (kColumns == kVector) {
      const float4 g4 = *reinterpret_cast<const float4*>(p.gate + t * p.gate_stride + i);
      const float4 u4 = *reinterpret_cast<const float4*>(p.up + t * p.up_stride + i);
      g[0] = g4.x, g[1] = g4.y, g[2] = g4.z, g[3] = g4.w;
      u[0] = u4.x, u[1] = u4.y, u[2] = u4.z, u[3] = u4.w;
    } else {
      g[0] = p.gate[t * p.gate_stride + i];
      u[0] = p.up[t * p.up_stride + i];
    }
    float value[kColumns];
    CELLM_UNROLL
    for (int c = 0; c < kColumns; ++c) {
      // each operation rounded as the CPU rounds it
      value[c] = p.gelu_tanh ? gelu_tanh_mul(g[c], u[c]) : silu_mul(g[c], u[c]);
    }
    if (p.out_wide != nullptr) {
      uint16_t* row = p.out_wide + t * p.dim;
      if constexpr (kColumns == kVector) {
        CELLM_UNROLL
        for (int c = 0; c < kColumns; c += 2) {
          const uint32_t pair = static_cast<uint32_t>(float_to_bf16_bits(value[c])) |
                                static_cast<uint32_t>(float_to_bf16_bits(value[c + 1])) << 16;
          *reinterpret_cast<uint32_t*>(row + wide_act_index(p.out_wide_order, i + c)) = pair;
        }
      } else {
        row[wide_act_index(p.out_wide_order, i)] = float_to_bf16_bits(value[0]);
      }
    } else if constexpr (kColumns == kVector) {
      *reinterpret_cast<float4*>(p.out + t * p.out_stride + i) =
          make_float4(value[0], value[1], value[2], value[3]);
    } else {
      p.out[t * p.out_stride + i] = value[0];
    }
  }
}

bool aligned16(const void* pointer) { return reinterpret_cast<uintptr_t>(pointer) % 16 == 0; }

}  // namespace

SwigluParams swiglu_fused_params(const float* gate_up, int64_t num_tokens, int64_t dim,
                                 float* out) {
  SwigluParams p;
  p.num_tokens = num_tokens;
  p.dim = dim;
  p.gate = gate_up;
  p.gate_stride = 2 * dim;
  p.up = gate_up + dim;
  p.up_stride = 2 * dim;
  p.out = out;
  p.out_stride = dim;
  return p;
}

Status launch_swiglu(const SwigluParams& p, cudaStream_t stream) {
  const bool wide = p.out_wide != nullptr;
  if (p.num_tokens < 0 || p.dim < 0 || p.gate_stride < p.dim || p.up_stride < p.dim ||
      (!wide && p.out_stride < p.dim) ||
      (wide && p.out_wide_order == WideOrder::kFused && p.dim % 32 != 0) ||
      (p.num_tokens * p.dim > 0 &&
       (p.gate == nullptr || p.up == nullptr || (p.out == nullptr) == !wide))) {
    return invalid_argument("swiglu: " + std::to_string(p.num_tokens) + " tokens of " +
                            std::to_string(p.dim) +
                            " with strides shorter than a row, null, not one of out and out_wide, "
                            "or a fused-order output of a dim that is no multiple of 32");
  }
  if (p.num_tokens * p.dim == 0) return ok_status();
  const bool vector = p.dim % kVector == 0 && p.gate_stride % kVector == 0 &&
                      p.up_stride % kVector == 0 && aligned16(p.gate) && aligned16(p.up) &&
                      (wide ? reinterpret_cast<uintptr_t>(p.out_wide) % 4 == 0
                            : p.out_stride % kVector == 0 && aligned16(p.out));
  const int64_t columns = vector ? kVector : 1;
  const dim3 grid(static_cast<unsigned>(ceil_div(p.dim, kThreads * columns)),
                  static_cast<unsigned>(std::min<int64_t>(p.num_tokens, 65535)));
  return pdl_launch_status(
      vector ? launch_pdl(swiglu_kernel<kVector>, grid, dim3(kThreads), 0, stream, p)
             : launch_pdl(swiglu_kernel<1>, grid, dim3(kThreads), 0, stream, p),
      "swiglu");
}

}  // namespace cellm::kernels
