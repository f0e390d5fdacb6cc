// quantize_activations: one warp per block of 32 activations (quantize_activations.cuh).
#include <string>

#include "backends/cuda/kernels/launch_status.h"
#include "backends/cuda/kernels/quantize_activations.cuh"

namespace cellm::kernels {
namespace {

constexpr int kWarps = 8;

__global__ void __launch_bounds__(kWarps * 32)
    quantize_activations_kernel(const QuantizeActivationsParams p) {
  const int64_t blocks_per_row = p.num_cols / 32;
  const int64_t block = static_cast<int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  if (block >= p.num_tokens * blocks_per_row) return;
  const int lane = threadIdx.x & 31;
  const int64_t t = block / blocks_per_row;
  const int64_t e = (block % blocks_per_row) * 32 + lane;
  const float x = p.x[t * p.x_stride + e];
  float amax = fabsf(x);
  for (int offset = 16; offset > 0; offset >>= 1) {
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, offset));
  }
  const float scale = q8_block_scale(amax);
  p.q[t * p.num_cols + interleaved_q8_offset(e)] = q8_quantize(x, scale);
  if (lane == 0) p.scales[t * blocks_per_row + e / 32] = scale;
}

}  // namespace

Status launch_quantize_activations(const QuantizeActivationsParams& p, cudaStream_t stream) {
  if (p.num_tokens < 0 || p.num_cols <= 0 || p.num_cols % 256 != 0 || p.x_stride < p.num_cols ||
      (p.num_tokens > 0 && (p.x == nullptr || p.q == nullptr || p.scales == nullptr)) ||
      reinterpret_cast<uintptr_t>(p.q) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(p.scales) % 16 != 0) {
    return invalid_argument("quantize_activations: " + std::to_string(p.num_tokens) + " rows of " +
                            std::to_string(p.num_cols) + " (a multiple of 256), stride " +
                            std::to_string(p.x_stride) + ", or a null or unaligned pointer");
  }
  if (p.num_tokens == 0) return ok_status();
  const int64_t blocks = p.num_tokens * (p.num_cols / 32);
  quantize_activations_kernel<<<static_cast<unsigned>(ceil_div(blocks, kWarps)), kWarps * 32, 0,
                                stream>>>(p);
  return launch_status("quantize_activations");
}

}  // namespace cellm::kernels
