// swiglu: the silu(gate) · up kernel (swiglu.cuh).
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

__global__ void __launch_bounds__(kThreads) swiglu_kernel(const SwigluParams p) {
  pdl_launch_dependents();
  pdl_wait();
  const int64_t index = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (index >= p.num_tokens * p.dim) return;
  const int64_t t = index / p.dim;
  const int64_t i = index % p.dim;
  const float g = p.gate[t * p.gate_stride + i];
  const float u = p.up[t * p.up_stride + i];
  const float value = silu_mul(g, u);  // each operation rounded as the CPU rounds it
  if (p.out_wide == nullptr) {
    p.out[t * p.out_stride + i] = value;
  } else {
    p.out_wide[t * p.dim + wide_act_index(p.out_wide_order, i)] = float_to_bf16_bits(value);
  }
}

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
  return pdl_launch_status(
      launch_pdl(swiglu_kernel,
                 dim3(static_cast<unsigned>(ceil_div(p.num_tokens * p.dim, kThreads))),
                 dim3(kThreads), 0, stream, p),
      "swiglu");
}

}  // namespace cellm::kernels
