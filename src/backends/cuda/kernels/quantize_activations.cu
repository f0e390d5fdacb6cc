// quantize_activations: one warp per block of 32 activations (quantize_activations.cuh), eight
// blocks (256 columns) per CTA; with a norm, every CTA first sums the squares of its row (each CTA
// redoes it: a row is a few KB).
#include <string>

#include "backends/cuda/kernels/launch_status.h"
#include "backends/cuda/kernels/op_math.cuh"
#include "backends/cuda/kernels/pdl.cuh"
#include "backends/cuda/kernels/quantize_activations.cuh"

namespace cellm::kernels {
namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;

// Grid: (column blocks of kWarps quantization blocks, row).
__global__ void __launch_bounds__(kThreads)
    quantize_activations_kernel(const QuantizeActivationsParams p) {
  pdl_trigger_at_start(p.trigger);
  const int64_t blocks_per_row = p.num_cols / 32;
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  // This lane's element e and its norm weight (a weight: loaded before pdl_wait()); the element
  // itself is loaded before the norm's reduction, so no round trip follows it.
  const int64_t block = static_cast<int64_t>(blockIdx.x) * kWarps + warp;
  const int64_t e = block * 32 + lane;
  const bool in_row = block < blocks_per_row;
  const float w = in_row && p.norm_weight != nullptr ? p.norm_weight[e] : 1.0f;
  pdl_wait_then_trigger(p.trigger);
  const int64_t t = blockIdx.y;
  const float* x = p.x + (p.x_rows != nullptr ? p.x_rows[t] : t) * p.x_stride;
  float v = in_row ? x[e] : 0.0f;
  if (p.up != nullptr && in_row) v = silu_mul(v, p.up[t * p.x_stride + e]);
  float norm_scale = 1.0f;
  if (p.norm_weight != nullptr) {
    double sum = 0.0;
    if (reinterpret_cast<uintptr_t>(x) % 16 == 0) {
      sum = row_sum_squares_share<kThreads>(x, p.num_cols);
    } else {
      for (int64_t i = threadIdx.x; i < p.num_cols; i += kThreads) {
        sum += static_cast<double>(__fmul_rn(x[i], x[i]));
      }
    }
    for (int offset = 16; offset > 0; offset >>= 1)
      sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    __shared__ double partial[kWarps];
    if (lane == 0) partial[warp] = sum;
    __syncthreads();
    double total = 0.0;
    for (int w = 0; w < kWarps; ++w) total += partial[w];
    norm_scale = rms_inverse(total, p.num_cols, p.norm_eps);
  }
  if (!in_row) return;
  if (p.norm_weight != nullptr) v = __fmul_rn(__fmul_rn(v, norm_scale), w);
  float amax = fabsf(v);
  for (int offset = 16; offset > 0; offset >>= 1) {
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, offset));
  }
  if (p.per_256) {  // the CTA's eight blocks are one 256 (K % 256 == 0: all of them in the row)
    __shared__ float block_max[kWarps];
    if (lane == 0) block_max[warp] = amax;
    __syncthreads();
    for (int w = 0; w < kWarps; ++w) amax = fmaxf(amax, block_max[w]);
  }
  const float scale = q8_block_scale(amax);
  const int8_t q = q8_quantize(v, scale);
  p.q[t * p.num_cols + interleaved_q8_offset(e)] = q;
  if (lane == 0) p.scales[t * blocks_per_row + block] = scale;
  if (p.sums != nullptr) {
    int sum = q;
    for (int offset = 16; offset > 0; offset >>= 1)
      sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    if (lane == 0) p.sums[t * blocks_per_row + block] = sum;
  }
}

}  // namespace

Status launch_quantize_activations(const QuantizeActivationsParams& p, cudaStream_t stream) {
  if (p.num_tokens < 0 || p.num_cols <= 0 || p.num_cols % 256 != 0 || p.x_stride < p.num_cols ||
      (p.num_tokens > 0 && (p.x == nullptr || p.q == nullptr || p.scales == nullptr)) ||
      reinterpret_cast<uintptr_t>(p.q) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(p.scales) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(p.sums) % alignof(int32_t) != 0 || p.num_tokens > 65535 ||
      (p.up != nullptr && (p.x_rows != nullptr || p.norm_weight != nullptr))) {
    return invalid_argument("quantize_activations: " + std::to_string(p.num_tokens) + " rows of " +
                            std::to_string(p.num_cols) + " (a multiple of 256), stride " +
                            std::to_string(p.x_stride) +
                            ", a null or unaligned pointer, or SwiGLU with a gather or norm");
  }
  if (p.num_tokens == 0) return ok_status();
  const dim3 grid(static_cast<unsigned>(ceil_div(p.num_cols / 32, kWarps)),
                  static_cast<unsigned>(p.num_tokens));
  return pdl_launch_status(
      launch_pdl(quantize_activations_kernel, grid, dim3(kThreads), 0, stream, p),
      "quantize_activations");
}

}  // namespace cellm::kernels
