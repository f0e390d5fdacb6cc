// argmax: per logits row, one block or several whose partial results the last one merges
// (argmax.cuh).
#include <algorithm>
#include <string>

#include "backends/cuda/kernels/argmax.cuh"
#include "backends/cuda/kernels/kernel_common.cuh"
#include "backends/cuda/kernels/launch_status.h"
#include "backends/cuda/kernels/pdl.cuh"
#include "backends/cuda/kernels/row_split.h"

namespace cellm::kernels {
namespace {

constexpr int kThreads = 512;
constexpr int kSplitThreads = 256;
constexpr int kMaxSplits = 64;
constexpr int64_t kMinSplitElements = 2048;  // fewer per block: not worth a split

// (value, index) pairs: a beats b when it is larger, or equal with a lower index; index -1 loses.
__device__ bool better(float a, int64_t ia, float b, int64_t ib) {
  if (ia < 0) return false;
  if (ib < 0) return true;
  return a > b || (a == b && ia < ib);
}

// The best of the warp's (value, index) pairs, in every lane.
__device__ void warp_best(float* best, int64_t* best_index) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float other = __shfl_xor_sync(0xffffffffu, *best, offset);
    const auto other_index = static_cast<int64_t>(
        __shfl_xor_sync(0xffffffffu, static_cast<long long>(*best_index), offset));
    if (better(other, other_index, *best, *best_index)) {
      *best = other;
      *best_index = other_index;
    }
  }
}

// The best finite (value, index) of row[begin, end) over the block, valid in thread 0.
template <int kBlockThreads>
__device__ void block_best(const float* row, int64_t begin, int64_t end, float* best_value,
                           int64_t* best_index_out) {
  float best = 0.0f;
  int64_t best_index = -1;
#pragma unroll 4
  for (int64_t i = begin + threadIdx.x; i < end; i += kBlockThreads) {
    const float v = row[i];
    if (isfinite(v) && better(v, i, best, best_index)) {
      best = v;
      best_index = i;
    }
  }
  warp_best(&best, &best_index);
  __shared__ float values[kBlockThreads / 32];
  __shared__ int64_t indices[kBlockThreads / 32];
  if ((threadIdx.x & 31) == 0) {
    values[threadIdx.x >> 5] = best;
    indices[threadIdx.x >> 5] = best_index;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kBlockThreads / 32; ++w) {
      if (better(values[w], indices[w], best, best_index)) {
        best = values[w];
        best_index = indices[w];
      }
    }
    *best_value = best;
    *best_index_out = best_index;
  }
}

__global__ void __launch_bounds__(kThreads) argmax_kernel(const ArgmaxParams p) {
  pdl_launch_dependents();
  pdl_wait();
  const float* row = p.logits + static_cast<int64_t>(blockIdx.x) * p.stride;
  float best = 0.0f;
  int64_t best_index = -1;
  block_best<kThreads>(row, 0, p.vocab, &best, &best_index);
  if (threadIdx.x == 0) p.out[blockIdx.x] = static_cast<int32_t>(best_index);
}

struct SplitScratch {
  unsigned int* counters;  // [num_rows] blocks of the row done so far
  float* values;           // [num_rows, kMaxSplits]
  int64_t* indices;        // [num_rows, kMaxSplits]
};

__device__ SplitScratch split_scratch(void* scratch, int32_t num_rows) {
  auto* bytes = static_cast<uint8_t*>(scratch);
  const size_t counter_bytes = (static_cast<size_t>(num_rows) * 4 + 15) / 16 * 16;
  const size_t value_bytes = (static_cast<size_t>(num_rows) * kMaxSplits * 4 + 15) / 16 * 16;
  return {reinterpret_cast<unsigned int*>(bytes), reinterpret_cast<float*>(bytes + counter_bytes),
          reinterpret_cast<int64_t*>(bytes + counter_bytes + value_bytes)};
}

// Grid: (splits, row). Block s takes elements [s · per_split, (s + 1) · per_split) of its row.
__global__ void __launch_bounds__(kSplitThreads)
    argmax_split_kernel(const ArgmaxParams p, int64_t per_split) {
  pdl_launch_dependents();
  pdl_wait();
  const int32_t r = blockIdx.y;
  const int32_t splits = static_cast<int32_t>(gridDim.x);
  const float* row = p.logits + static_cast<int64_t>(r) * p.stride;
  const int64_t begin = static_cast<int64_t>(blockIdx.x) * per_split;
  const int64_t end = begin + per_split < p.vocab ? begin + per_split : p.vocab;
  float best = 0.0f;
  int64_t best_index = -1;
  block_best<kSplitThreads>(row, begin, end, &best, &best_index);
  const SplitScratch s = split_scratch(p.scratch, p.num_rows);
  __shared__ bool last;
  if (threadIdx.x == 0) {
    s.values[r * kMaxSplits + blockIdx.x] = best;
    s.indices[r * kMaxSplits + blockIdx.x] = best_index;
    __threadfence();  // the partial result is visible before the count says so
    last = atomicAdd(&s.counters[r], 1u) == static_cast<unsigned int>(splits - 1);
  }
  __syncthreads();
  if (!last || threadIdx.x >= 32) return;
  __threadfence();
  // The last block of the row: its first warp merges the splits, a lane per split (the order
  // does not change the result: better() is a total order).
  best = 0.0f;
  best_index = -1;
  for (int32_t k = static_cast<int32_t>(threadIdx.x); k < splits; k += 32) {
    const float v = __ldcg(&s.values[r * kMaxSplits + k]);
    const int64_t i = __ldcg(reinterpret_cast<const long long*>(&s.indices[r * kMaxSplits + k]));
    if (better(v, i, best, best_index)) {
      best = v;
      best_index = i;
    }
  }
  warp_best(&best, &best_index);
  if (threadIdx.x == 0) {
    p.out[r] = static_cast<int32_t>(best_index);
    s.counters[r] = 0u;  // ready for the next launch
  }
}

}  // namespace

size_t argmax_scratch_bytes(int32_t num_rows) {
  const auto rows = static_cast<size_t>(num_rows < 0 ? 0 : num_rows);
  return (rows * 4 + 15) / 16 * 16 + (rows * kMaxSplits * 4 + 15) / 16 * 16 + rows * kMaxSplits * 8;
}

Status launch_argmax(const ArgmaxParams& p, cudaStream_t stream) {
  if (p.num_rows < 0 || p.vocab <= 0 || p.stride < p.vocab ||
      (p.num_rows > 0 && (p.logits == nullptr || p.out == nullptr)) ||
      !row_split_scratch_fits(p.scratch, p.scratch_bytes, argmax_scratch_bytes(p.num_rows),
                              p.num_rows)) {
    return invalid_argument("argmax: " + std::to_string(p.num_rows) + " rows of " +
                            std::to_string(p.vocab) + " logits, stride " +
                            std::to_string(p.stride) +
                            ", a null pointer, or scratch too small or unaligned");
  }
  if (p.num_rows == 0) return ok_status();
  const int64_t splits = row_splits(p.scratch, p.vocab, kMaxSplits, kMinSplitElements);
  if (splits <= 1) {
    return pdl_launch_status(launch_pdl(argmax_kernel, dim3(static_cast<unsigned>(p.num_rows)),
                                        dim3(kThreads), 0, stream, p),
                             "argmax");
  }
  const int64_t per_split = ceil_div(p.vocab, splits);
  const dim3 grid(static_cast<unsigned>(ceil_div(p.vocab, per_split)),
                  static_cast<unsigned>(p.num_rows));
  return pdl_launch_status(
      launch_pdl(argmax_split_kernel, grid, dim3(kSplitThreads), 0, stream, p, per_split),
      "argmax");
}

}  // namespace cellm::kernels
