// attention_common: device helpers shared by the decode and prefill attention kernels — the
// visible range of a token, the split arithmetic, asynchronous global → shared copies, K/V
// element conversion and warp reductions. Device code; include only from .cu files.
#pragma once

#include "backends/cuda/kernels/attention.cuh"
#include "backends/cuda/kernels/kernel_common.cuh"

namespace cellm::kernels {

struct VisibleRange {
  int32_t begin;  // first visible position
  int32_t end;    // one past the last (pos + 1)
};

__device__ __forceinline__ VisibleRange visible_positions(int32_t pos, int32_t window) {
  VisibleRange r;
  r.begin = window > 0 ? max(0, pos - window + 1) : 0;
  r.end = pos + 1;
  return r;
}

// Cells per split and number of (non-empty) splits for n visible cells.
__device__ __forceinline__ void split_shape(int32_t n, int32_t max_splits, int32_t min_cells,
                                            int32_t* cells_per_split, int32_t* num_splits) {
  const int32_t wanted = max(1, min(max_splits, (n + min_cells - 1) / min_cells));
  *cells_per_split = (n + wanted - 1) / wanted;
  *num_splits = (n + *cells_per_split - 1) / *cells_per_split;
}

__device__ __forceinline__ void copy_async_16(void* smem, const void* gmem) {
  const auto address = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(address), "l"(gmem));
}
__device__ __forceinline__ void copy_async_wait_all() {
  asm volatile("cp.async.commit_group;\n" ::);
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
}

template <KvDtype kDtype>
struct KvTraits;
template <>
struct KvTraits<KvDtype::kF32> {
  static constexpr int kBytes = 4;
  __device__ __forceinline__ static float load(const uint8_t* row, int d) {
    return reinterpret_cast<const float*>(row)[d];
  }
};
template <>
struct KvTraits<KvDtype::kF16> {
  static constexpr int kBytes = 2;
  __device__ __forceinline__ static float load(const uint8_t* row, int d) {
    return f16_bits_to_float(reinterpret_cast<const uint16_t*>(row)[d]);
  }
};
template <>
struct KvTraits<KvDtype::kBF16> {
  static constexpr int kBytes = 2;
  __device__ __forceinline__ static float load(const uint8_t* row, int d) {
    return bf16_bits_to_float(reinterpret_cast<const uint16_t*>(row)[d]);
  }
};

__device__ __forceinline__ float warp_max(float v) {
  for (int offset = 16; offset > 0; offset >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// e^(a − b) where a may be −inf (→ 0).
__device__ __forceinline__ float exp_diff(float a, float b) {
  return a == -INFINITY ? 0.0f : expf(a - b);
}

}  // namespace cellm::kernels
