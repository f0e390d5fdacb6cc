// row_split.cuh: the device side of row_split.h for kernels whose blocks each leave a partial
// result of a row segment in a scratch buffer, the last block of the row to finish merging them
// (row_logprobs, row_candidates): where the per-row counters and partials lie in the scratch, its
// size, a block's part written and its arrival that elects the row's last block, and the staging of
// the parts' lists for its merge. Knows nothing else of what a partial holds. Device code (the size
// also on the host). Thread-safety: per block, through the row's counter.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace cellm::kernels {

// The scratch of num_rows rows of at most max_splits partials each: the rows' counters (blocks
// of the row done so far; zero between launches), then [num_rows, max_splits] partials.
template <class Partial>
struct RowSplitScratch {
  unsigned int* counters;
  Partial* partials;
};

inline __host__ __device__ size_t row_split_counter_bytes(int32_t num_rows) {
  return (static_cast<size_t>(num_rows < 0 ? 0 : num_rows) * 4 + 15) / 16 * 16;
}

template <class Partial>
inline size_t row_split_scratch_bytes(int32_t num_rows, int32_t max_splits) {
  const auto rows = static_cast<size_t>(num_rows < 0 ? 0 : num_rows);
  return row_split_counter_bytes(num_rows) +
         rows * static_cast<size_t>(max_splits) * sizeof(Partial);
}

template <class Partial>
__device__ RowSplitScratch<Partial> row_split_scratch(void* scratch, int32_t num_rows) {
  auto* bytes = static_cast<uint8_t*>(scratch);
  return {reinterpret_cast<unsigned int*>(bytes),
          reinterpret_cast<Partial*>(bytes + row_split_counter_bytes(num_rows))};
}

// Called by the thread that wrote its block's partial, after writing it: whether the block is the
// last of the row's `splits` to arrive. The last one must __threadfence() before reading the
// others' partials (with __ldcg), and zero the counter when done.
__device__ __forceinline__ bool row_split_arrive(unsigned int* counter, int splits) {
  __threadfence();  // the partial is visible before the count says so
  return atomicAdd(counter, 1u) == static_cast<unsigned int>(splits - 1);
}

// Every thread of the block, after thread 0 wrote the block's partial: whether the block is the
// last of the row's `splits` to arrive (row_split_arrive by thread 0, told to the whole block). The
// last block has fenced and may read the others' partials (with __ldcg); it must zero the counter
// when done.
__device__ __forceinline__ bool row_split_block_is_last(unsigned int* counter, int splits) {
  __shared__ bool last;
  if (threadIdx.x == 0) last = row_split_arrive(counter, splits);
  __syncthreads();
  const bool is_last = last;
  if (is_last) __threadfence();
  return is_last;
}

// A row's split partials seen from one block: the row's partials and counter, and whether the
// block is the row's last to arrive.
template <class Partial>
struct RowSplitArrival {
  Partial* partials;      // [max_splits] of row blockIdx.y
  unsigned int* counter;  // the row's; the last block zeroes it when done
  bool is_last;
};

// The split kernels' first half, grid (splits, rows): block b of row r writes its part of the row,
// [b · per_split, min((b + 1) · per_split, length)), as partial b with `write_partial(begin, end,
// Partial* out)` (every thread calls it; its first warp writes `out`), then arrives. Every thread
// of the block calls it; in the row's last block the others' partials may then be read (__ldcg).
template <class Partial, class WritePartial>
__device__ __forceinline__ RowSplitArrival<Partial> row_split_write_and_arrive(
    void* scratch, int32_t num_rows, int max_splits, int64_t length, int64_t per_split,
    WritePartial write_partial) {
  const auto r = static_cast<int64_t>(blockIdx.y);
  const int64_t begin = static_cast<int64_t>(blockIdx.x) * per_split;
  const int64_t end = begin + per_split < length ? begin + per_split : length;
  const RowSplitScratch<Partial> rows = row_split_scratch<Partial>(scratch, num_rows);
  Partial* partials = rows.partials + r * max_splits;
  write_partial(begin, end, partials + blockIdx.x);
  if (threadIdx.x < 32) {  // the first warp wrote the partial: visible before thread 0 counts it
    __threadfence();
    __syncwarp();
  }
  const bool is_last = row_split_block_is_last(&rows.counters[r], static_cast<int>(gridDim.x));
  return {partials, &rows.counters[r], is_last};
}

// The last block's first warp, after its __threadfence(): the parts' lists (Partial::value, ::id
// and ::num, K entries each) copied into shared memory at once — entry k of part p at
// values[p][k], ids[p][k], id -1 past the part's count — so that a merge taking the lists' heads
// K times over waits one memory round trip, not one per entry it takes. Every lane calls it.
template <int K, int kMaxParts, class Partial>
__device__ __forceinline__ void stage_part_lists(const Partial* partials, int parts,
                                                 float (&values)[kMaxParts][K],
                                                 int32_t (&ids)[kMaxParts][K]) {
  static_assert(K <= 64, "two entries a lane at most");
  const int lane = static_cast<int>(threadIdx.x & 31);
#pragma unroll
  for (int p = 0; p < kMaxParts; ++p) {
    if (p < parts) {
      const int32_t num = __ldcg(&partials[p].num);
#pragma unroll
      for (int k = lane; k < K; k += 32) {
        values[p][k] = __ldcg(&partials[p].value[k]);
        const int32_t id = __ldcg(&partials[p].id[k]);
        ids[p][k] = k < num ? id : -1;
      }
    }
  }
  __syncwarp();
}

}  // namespace cellm::kernels
