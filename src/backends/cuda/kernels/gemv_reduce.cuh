// gemv_reduce: the block reduction that ends both small-M product kernels (gemv_kernel.cuh,
// gemv_decode.cuh) — each thread's partial sums acc[r][t] summed over the warp by shuffles, the
// warps' sums through shared memory, always in the same order (deterministic). Device code;
// include only from .cu files. Thread-safety: called by every thread of a block.
#pragma once

#include "backends/cuda/kernels/kernel_common.cuh"

namespace cellm::kernels {

// Lane 0 of each warp writes the warp's sum of acc[r][t] to partial[warp][r * M + t]. The caller
// synchronizes the block before reading partial.
template <int R, int M, int kWarps>
__device__ __forceinline__ void warp_partials(const float (&acc)[R][M],
                                              float (&partial)[kWarps][R * M]) {
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  CELLM_UNROLL
  for (int r = 0; r < R; ++r) {
    CELLM_UNROLL
    for (int t = 0; t < M; ++t) {
      float v = acc[r][t];
      CELLM_UNROLL
      for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
      if (lane == 0) partial[warp][r * M + t] = v;
    }
  }
}

// The block's sum of entry i (= r * M + t): the warps' partials added in warp order.
template <int kCount, int kWarps>
__device__ __forceinline__ float block_sum(const float (&partial)[kWarps][kCount], int i) {
  float sum = partial[0][i];
  CELLM_UNROLL
  for (int w = 1; w < kWarps; ++w) sum += partial[w][i];
  return sum;
}

}  // namespace cellm::kernels
