// rms_norm: RMSNorm kernels (rms_norm.cuh).
#include <string>

#include "backends/cuda/kernels/kernel_common.cuh"
#include "backends/cuda/kernels/launch_status.h"
#include "backends/cuda/kernels/op_math.cuh"
#include "backends/cuda/kernels/pdl.cuh"
#include "backends/cuda/kernels/rms_norm.cuh"
#include "backends/cuda/kernels/wide_act_order.cuh"

namespace cellm::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kBatch = 8;  // elements per thread in flight at once (rows streamed)
// Elements per thread held in registers for rows of up to kHeld · kThreads (4096): 80 registers.
// Twice as many (8192) took 161 — one block per SM — and stay streamed.
constexpr int kHeld = 16;

__device__ double warp_sum(double v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// The row's sum of squares over the block (thread partial sums in double, warps in order).
__device__ float row_scale(double sum, const RmsNormParams& p) {
  __shared__ double partial[kThreads / 32];
  sum = warp_sum(sum);
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = sum;
  __syncthreads();
  double total = 0.0;
  for (int w = 0; w < kThreads / 32; ++w) total += partial[w];
  return rms_inverse(total, p.dim, p.eps);
}

__device__ __forceinline__ void store_normed(const RmsNormParams& p, int64_t row, int32_t i,
                                             float value) {
  if (p.y_wide == nullptr) {
    p.y[row * p.y_stride + i] = value;
  } else {
    p.y_wide[row * p.dim + wide_act_index(p.y_wide_order, i)] = float_to_bf16_bits(value);
  }
}

// Rows of at most kElements · kThreads: thread i holds elements i, i + kThreads, … (the sum's
// order, as the streaming kernel below) and the weights' in registers — the weights loaded
// before pdl_wait(), the row with all its loads in flight at once, nothing read twice.
template <int kElements>
__global__ void __launch_bounds__(kThreads) rms_norm_held_kernel(const RmsNormParams p) {
  pdl_launch_dependents();
  const int64_t row = blockIdx.x;
  float w[kElements];
  CELLM_UNROLL
  for (int u = 0; u < kElements; ++u) {
    const int32_t i = static_cast<int32_t>(threadIdx.x) + u * kThreads;
    w[u] = i < p.dim ? p.weight[i] : 0.0f;  // weights: written by no kernel of the step
  }
  pdl_wait();
  float* x = p.x + row * p.x_stride;
  float v[kElements];
  CELLM_UNROLL
  for (int u = 0; u < kElements; ++u) {
    const int32_t i = static_cast<int32_t>(threadIdx.x) + u * kThreads;
    v[u] = i < p.dim ? x[i] : 0.0f;
  }
  if (p.add != nullptr) {
    float a[kElements];
    CELLM_UNROLL
    for (int u = 0; u < kElements; ++u) {
      const int32_t i = static_cast<int32_t>(threadIdx.x) + u * kThreads;
      a[u] = i < p.dim ? p.add[row * p.add_stride + i] : 0.0f;
    }
    CELLM_UNROLL
    for (int u = 0; u < kElements; ++u) {
      const int32_t i = static_cast<int32_t>(threadIdx.x) + u * kThreads;
      if (i < p.dim) {
        v[u] = __fadd_rn(v[u], a[u]);
        x[i] = v[u];
      }
    }
  }
  double sum = 0.0;
  CELLM_UNROLL
  for (int u = 0; u < kElements; ++u) {
    if (static_cast<int32_t>(threadIdx.x) + u * kThreads < p.dim) {
      sum += static_cast<double>(__fmul_rn(v[u], v[u]));
    }
  }
  const float scale = row_scale(sum, p);
  CELLM_UNROLL
  for (int u = 0; u < kElements; ++u) {
    const int32_t i = static_cast<int32_t>(threadIdx.x) + u * kThreads;
    if (i < p.dim) store_normed(p, row, i, __fmul_rn(__fmul_rn(v[u], scale), w[u]));
  }
}

// Any dim: kBatch elements per thread in flight at a time, the row read again for the output.
__global__ void __launch_bounds__(kThreads) rms_norm_kernel(const RmsNormParams p) {
  pdl_launch_dependents();
  pdl_wait();
  const int64_t row = blockIdx.x;
  float* x = p.x + row * p.x_stride;
  // Thread i takes elements i, i + kThreads, ... in that order (the sum's order); kBatch of them
  // are loaded before the first is used, so a row costs one round trip per kBatch, not per element.
  double sum = 0.0;
  for (int32_t base = threadIdx.x; base < p.dim; base += kBatch * kThreads) {
    float v[kBatch];
    CELLM_UNROLL
    for (int u = 0; u < kBatch; ++u) {
      const int32_t i = base + u * kThreads;
      v[u] = i < p.dim ? x[i] : 0.0f;
    }
    if (p.add != nullptr) {
      float a[kBatch];
      CELLM_UNROLL
      for (int u = 0; u < kBatch; ++u) {
        const int32_t i = base + u * kThreads;
        a[u] = i < p.dim ? p.add[row * p.add_stride + i] : 0.0f;
      }
      CELLM_UNROLL
      for (int u = 0; u < kBatch; ++u) {
        const int32_t i = base + u * kThreads;
        if (i < p.dim) {
          v[u] = __fadd_rn(v[u], a[u]);
          x[i] = v[u];
        }
      }
    }
    CELLM_UNROLL
    for (int u = 0; u < kBatch; ++u) {
      if (base + u * kThreads < p.dim) sum += static_cast<double>(__fmul_rn(v[u], v[u]));
    }
  }
  const float scale = row_scale(sum, p);
  // Each thread re-reads the elements it wrote (or read) above: no cross-thread dependency.
  for (int32_t base = threadIdx.x; base < p.dim; base += kBatch * kThreads) {
    float v[kBatch];
    float w[kBatch];
    CELLM_UNROLL
    for (int u = 0; u < kBatch; ++u) {
      const int32_t i = base + u * kThreads;
      v[u] = i < p.dim ? x[i] : 0.0f;
      w[u] = i < p.dim ? p.weight[i] : 0.0f;
    }
    CELLM_UNROLL
    for (int u = 0; u < kBatch; ++u) {
      const int32_t i = base + u * kThreads;
      if (i < p.dim) store_normed(p, row, i, __fmul_rn(__fmul_rn(v[u], scale), w[u]));
    }
  }
}

constexpr int kHeadWarps = 4;

__global__ void __launch_bounds__(kHeadWarps * 32) head_rms_norm_kernel(const HeadRmsNormParams p) {
  pdl_launch_dependents();
  pdl_wait();
  const int64_t head = static_cast<int64_t>(blockIdx.x) * kHeadWarps + (threadIdx.x >> 5);
  if (head >= static_cast<int64_t>(p.num_tokens) * p.num_heads) return;
  const int lane = threadIdx.x & 31;
  float* x = p.x + (head / p.num_heads) * p.token_stride + (head % p.num_heads) * p.head_dim;
  float values[32];  // head_dim ≤ 1024: element lane + 32 j
  double sum = 0.0;
#pragma unroll
  for (int j = 0; j < 32; ++j) {
    const int32_t i = lane + 32 * j;
    values[j] = i < p.head_dim ? x[i] : 0.0f;
    sum += static_cast<double>(__fmul_rn(values[j], values[j]));
  }
  sum = warp_sum(sum);
  const float scale = rms_inverse(sum, p.head_dim, p.eps);
#pragma unroll
  for (int j = 0; j < 32; ++j) {
    const int32_t i = lane + 32 * j;
    if (i < p.head_dim) x[i] = __fmul_rn(__fmul_rn(values[j], scale), p.weight[i]);
  }
}

}  // namespace

Status launch_rms_norm(const RmsNormParams& p, cudaStream_t stream) {
  const bool wide = p.y_wide != nullptr;
  if (p.num_rows < 0 || p.dim <= 0 || p.x_stride < p.dim || (!wide && p.y_stride < p.dim) ||
      (p.add != nullptr && p.add_stride < p.dim) ||
      (p.num_rows > 0 && (p.x == nullptr || (p.y == nullptr) == !wide || p.weight == nullptr))) {
    return invalid_argument("rms_norm: " + std::to_string(p.num_rows) + " rows of " +
                            std::to_string(p.dim) + ", strides x " + std::to_string(p.x_stride) +
                            " y " + std::to_string(p.y_stride) +
                            ", a null pointer, or not one of y and y_wide");
  }
  if (wide && p.y_wide_order == WideOrder::kFused && p.dim % 32 != 0) {
    return invalid_argument(
        "rms_norm: a fused-order output needs a dim that is a multiple of 32, not " +
        std::to_string(p.dim));
  }
  if (p.num_rows == 0) return ok_status();
  const dim3 grid(static_cast<unsigned>(p.num_rows));
  const cudaError_t launched =
      p.dim <= kHeld * kThreads
          ? launch_pdl(rms_norm_held_kernel<kHeld>, grid, dim3(kThreads), 0, stream, p)
          : launch_pdl(rms_norm_kernel, grid, dim3(kThreads), 0, stream, p);
  return pdl_launch_status(launched, "rms_norm");
}

Status launch_head_rms_norm(const HeadRmsNormParams& p, cudaStream_t stream) {
  if (p.num_tokens < 0 || p.num_heads <= 0 || p.head_dim <= 0 || p.head_dim > 1024 ||
      p.token_stride < static_cast<int64_t>(p.num_heads) * p.head_dim ||
      (p.num_tokens > 0 && (p.x == nullptr || p.weight == nullptr))) {
    return invalid_argument("head_rms_norm: " + std::to_string(p.num_heads) + " heads of " +
                            std::to_string(p.head_dim) + " (at most 1024), token stride " +
                            std::to_string(p.token_stride) + ", or a null pointer");
  }
  if (p.num_tokens == 0) return ok_status();
  const int64_t heads = static_cast<int64_t>(p.num_tokens) * p.num_heads;
  return pdl_launch_status(
      launch_pdl(head_rms_norm_kernel, dim3(static_cast<unsigned>(ceil_div(heads, kHeadWarps))),
                 dim3(kHeadWarps * 32), 0, stream, p),
      "head_rms_norm");
}

}  // namespace cellm::kernels
