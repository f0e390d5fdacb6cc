// argmax: one block per logits row (argmax.cuh).
#include <string>

#include "backends/cuda/kernels/argmax.cuh"
#include "backends/cuda/kernels/launch_status.h"

namespace cellm::kernels {
namespace {

constexpr int kThreads = 512;

// (value, index) pairs: a beats b when it is larger, or equal with a lower index; index -1 loses.
__device__ bool better(float a, int64_t ia, float b, int64_t ib) {
  if (ia < 0) return false;
  if (ib < 0) return true;
  return a > b || (a == b && ia < ib);
}

__global__ void __launch_bounds__(kThreads) argmax_kernel(const ArgmaxParams p) {
  const float* row = p.logits + static_cast<int64_t>(blockIdx.x) * p.stride;
  float best = 0.0f;
  int64_t best_index = -1;
  for (int64_t i = threadIdx.x; i < p.vocab; i += kThreads) {
    const float v = row[i];
    if (isfinite(v) && better(v, i, best, best_index)) {
      best = v;
      best_index = i;
    }
  }
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float other = __shfl_xor_sync(0xffffffffu, best, offset);
    const auto other_index = static_cast<int64_t>(
        __shfl_xor_sync(0xffffffffu, static_cast<long long>(best_index), offset));
    if (better(other, other_index, best, best_index)) {
      best = other;
      best_index = other_index;
    }
  }
  __shared__ float values[kThreads / 32];
  __shared__ int64_t indices[kThreads / 32];
  if ((threadIdx.x & 31) == 0) {
    values[threadIdx.x >> 5] = best;
    indices[threadIdx.x >> 5] = best_index;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kThreads / 32; ++w) {
      if (better(values[w], indices[w], best, best_index)) {
        best = values[w];
        best_index = indices[w];
      }
    }
    p.out[blockIdx.x] = static_cast<int32_t>(best_index);
  }
}

}  // namespace

Status launch_argmax(const ArgmaxParams& p, cudaStream_t stream) {
  if (p.num_rows < 0 || p.vocab <= 0 || p.stride < p.vocab ||
      (p.num_rows > 0 && (p.logits == nullptr || p.out == nullptr))) {
    return invalid_argument("argmax: " + std::to_string(p.num_rows) + " rows of " +
                            std::to_string(p.vocab) + " logits, stride " +
                            std::to_string(p.stride) + ", or a null pointer");
  }
  if (p.num_rows == 0) return ok_status();
  argmax_kernel<<<static_cast<unsigned>(p.num_rows), kThreads, 0, stream>>>(p);
  return launch_status("argmax");
}

}  // namespace cellm::kernels
