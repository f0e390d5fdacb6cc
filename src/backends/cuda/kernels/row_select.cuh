// row_select.cuh: the selection of a logits row part's best (value, id) pairs that the sampling
// candidates and the log-probabilities kernels share (row_candidates.cu, row_logprobs.cu). A block
// of kThreads threads takes a part of a row; a part of at most kHeldPart values is read once into
// registers (HeldPart: every part of a split row), a longer one is streamed from L2 by each pass
// (StreamedPart: a whole row in one block). A first pass finds a floor under the part's best K
// finite values and its largest (floor_under_best); the values at or above the floor — about a
// hundred on a random 8,192-value part for K = 32, ≈ 270 for K = 64 — are gathered in shared memory
// and each is placed by the number of gathered values that beat it (select_best). Knows nothing of
// what the kernels do with the pairs (temperatures, normalizers, draws). Device code (every
// function called by the whole block) but for launch_by_row_length, which picks the kernel a row's
// length takes. Thread-safety: per block (shared memory, barriers).
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "backends/cuda/kernels/top_list.cuh"

namespace cellm::kernels::row_select {

inline constexpr int kThreads = 256;
inline constexpr int kWarps = kThreads / 32;
inline constexpr int kLoads = 16;                                          // in flight per thread
inline constexpr int64_t kTile = static_cast<int64_t>(kThreads) * kLoads;  // a block's loads
inline constexpr int kHeldTiles = 2;  // a part of at most this many tiles is held in registers
inline constexpr int64_t kHeldPart = kHeldTiles * kTile;
// The most values at or above the floor that select_best ranks by counting; more (ties, or a part
// with fewer finite values than the list holds) select through the warps' lists instead.
inline constexpr int kMaxGathered = 512;

// This thread's kLoads values of the tile of row[begin, end) at `base` (row[base + j · kThreads +
// tid]), NaN past `end`, all loads issued before any is used. Ordinary loads: a streamed part's
// later passes find the row in L2.
__device__ __forceinline__ void load_tile(const float* row, int64_t base, int64_t end,
                                          float (&v)[kLoads]) {
  const auto tid = static_cast<int64_t>(threadIdx.x);
#pragma unroll
  for (int j = 0; j < kLoads; ++j) {
    const int64_t i = base + j * kThreads + tid;
    v[j] = i < end ? row[i] : NAN;
  }
}

// A part row[begin, end) of at most kHeldPart values, read once: this thread's values of each
// tile in registers. Tiles past `end` hold NaN (never finite: no pass counts them).
struct HeldPart {
  float v[kHeldTiles][kLoads];
  int64_t begin;
  int64_t end;

  __device__ HeldPart(const float* row, int64_t part_begin, int64_t part_end)
      : begin(part_begin), end(part_end) {
#pragma unroll
    for (int t = 0; t < kHeldTiles; ++t) load_tile(row, begin + t * kTile, end, v[t]);
  }
  // f(values, base) for each tile that holds part of the row, in order. One copy of f's code for
  // all tiles (a pass's code is fetched anew at every step): tile t's registers are picked by
  // selects, not by an index into registers (which would put them in local memory).
  template <class F>
  __device__ __forceinline__ void for_each_tile(F&& f) const {
#pragma unroll 1
    for (int t = 0; t < kHeldTiles; ++t) {
      const int64_t base = begin + t * kTile;
      if (base >= end) break;
      float w[kLoads];
#pragma unroll
      for (int j = 0; j < kLoads; ++j) {
        w[j] = v[0][j];
#pragma unroll
        for (int k = 1; k < kHeldTiles; ++k) w[j] = t == k ? v[k][j] : w[j];
      }
      f(w, base);
    }
  }
};

// A part of any length, loaded again by every pass (from L2 after the first).
struct StreamedPart {
  const float* row;
  int64_t begin;
  int64_t end;

  __device__ StreamedPart(const float* part_row, int64_t part_begin, int64_t part_end)
      : row(part_row), begin(part_begin), end(part_end) {}

  template <class F>
  __device__ __forceinline__ void for_each_tile(F&& f) const {
    for (int64_t base = begin; base < end; base += kTile) {
      float v[kLoads];
      load_tile(row, base, end, v);
      f(v, base);
    }
  }
};

// The part's largest finite value (-infinity when none) and a floor under its best K finite
// values: each thread's largest finite value, each warp's kPerWarp-th largest of those (kPerWarp
// values of the warp at or above it), the smallest of the warps' (kWarps · kPerWarp ≥ K values at
// or above it); -infinity when some warp holds fewer than kPerWarp finite values.
struct Floor {
  float max;
  float floor;
};

template <int K, class Part>
__device__ Floor floor_under_best(const Part& part) {
  constexpr int kPerWarp = (K + kWarps - 1) / kWarps;
  static_assert(kPerWarp >= 1 && kPerWarp <= 32, "a warp's share of the list");
  const int lane = static_cast<int>(threadIdx.x & 31);
  const int warp = static_cast<int>(threadIdx.x >> 5);
  float mine = -INFINITY;
  part.for_each_tile([&](const float(&v)[kLoads], int64_t) {
#pragma unroll
    for (int j = 0; j < kLoads; ++j) {
      if (isfinite(v[j])) mine = fmaxf(mine, v[j]);
    }
  });
  float warp_max = -INFINITY;
  float kth = -INFINITY;
  for (int k = 0; k < kPerWarp; ++k) {
    float best = mine;
    for (int offset = 16; offset > 0; offset >>= 1) {
      best = fmaxf(best, __shfl_xor_sync(top_list::kFull, best, offset));
    }
    if (k == 0) warp_max = best;
    kth = best;
    const unsigned holders = __ballot_sync(top_list::kFull, mine == best);  // one steps aside
    if (lane == __ffs(holders) - 1) mine = -INFINITY;
  }
  __shared__ float warp_floors[kWarps];
  __shared__ float warp_maxima[kWarps];
  if (lane == 0) {
    warp_floors[warp] = kth;
    warp_maxima[warp] = warp_max;
  }
  __syncthreads();
  Floor out{warp_maxima[0], warp_floors[0]};
  for (int w = 1; w < kWarps; ++w) {
    out.max = fmaxf(out.max, warp_maxima[w]);
    out.floor = fminf(out.floor, warp_floors[w]);
  }
  return out;
}

// The part's best min(num_top, finite values) finite pairs into (best_value, best_id), best first
// (the lower id first on ties); returns how many. `floor` is floor_under_best's for this K, and
// num_top <= K. The values at or above it (at least K when it is finite, every finite value when
// it is not) are gathered in shared memory and each placed at the number of gathered values that
// beat it: every value that beats a gathered one is gathered too. Beyond kMaxGathered of them,
// each warp keeps its best K in lists of at most 32 (top_list.cuh: a value enters with a chain of
// shuffles; one pass per list) and the block merges them. Every thread calls it; the pairs are
// complete when it returns.
template <int K, class Part>
__device__ int32_t select_best(const Part& part, float floor, int32_t num_top, float* best_value,
                               int32_t* best_id) {
  static_assert(K >= 1 && K <= 64, "at most two lists of a warp's best");
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid & 31;
  const int warp = tid >> 5;
  __shared__ int num_above;
  __shared__ int next_slot;
  __shared__ float gathered_value[kMaxGathered];
  __shared__ int32_t gathered_id[kMaxGathered];
  if (tid == 0) {
    num_above = 0;
    next_slot = 0;
  }
  int mine = 0;
  part.for_each_tile([&](const float(&v)[kLoads], int64_t) {
#pragma unroll
    for (int j = 0; j < kLoads; ++j) mine += isfinite(v[j]) && v[j] >= floor;
  });
  __syncthreads();  // the counters zeroed
  const int warp_above = __reduce_add_sync(top_list::kFull, mine);
  if (lane == 0 && warp_above > 0) atomicAdd(&num_above, warp_above);
  __syncthreads();
  const int above = num_above;
  if (above <= kMaxGathered) {  // uniform over the block
    if (mine > 0) {
      int slot = atomicAdd(&next_slot, mine);
      part.for_each_tile([&](const float(&v)[kLoads], int64_t base) {
#pragma unroll
        for (int j = 0; j < kLoads; ++j) {
          if (isfinite(v[j]) && v[j] >= floor) {
            gathered_value[slot] = v[j];
            gathered_id[slot] = static_cast<int32_t>(base + j * kThreads + tid);
            ++slot;
          }
        }
      });
    }
    __syncthreads();
    top_list::place_by_count(gathered_value, gathered_id, above, num_top, best_value, best_id);
    return above < num_top ? above : num_top;
  }
  // Each warp's best K as kLists lists of kPerList (the first the best): pass p inserts only what
  // list p − 1's last beats, so list p holds the warp's entries p · kPerList on.
  constexpr int kPerList = K < 32 ? K : 32;
  constexpr int kLists = K / kPerList;
  static_assert(kLists * kPerList == K, "a list longer than a warp is whole lists of 32");
  __shared__ float list_value[kWarps][kLists * 32];
  __shared__ int32_t list_id[kWarps][kLists * 32];
  // One list in one pass: the loop below, run once, took row_logprobs' split kernel from 64
  // registers to 79 (three blocks an SM where four fit).
  if constexpr (kLists == 1) {
    top_list::WarpList<K> list;
    part.for_each_tile([&](const float(&v)[kLoads], int64_t base) {
#pragma unroll
      for (int j = 0; j < kLoads; ++j) {
        list.insert(isfinite(v[j]) && v[j] >= floor, v[j],
                    static_cast<int32_t>(base + j * kThreads + tid), lane);
      }
    });
    list_value[warp][lane] = list.value;
    list_id[warp][lane] = lane < K ? list.id : -1;
    __syncthreads();
    return top_list::merge_lists_counted<K, kThreads>(&list_value[0][0], &list_id[0][0], 32, kWarps,
                                                      num_top, best_value, best_id);
  } else {
    float after_value = 0.0f;
    int32_t after_id = -1;  // -1: the first pass takes every value
    for (int l = 0; l < kLists; ++l) {
      top_list::WarpList<kPerList> list;
      part.for_each_tile([&](const float(&v)[kLoads], int64_t base) {
#pragma unroll
        for (int j = 0; j < kLoads; ++j) {
          const auto id = static_cast<int32_t>(base + j * kThreads + tid);
          list.insert(isfinite(v[j]) && v[j] >= floor &&
                          (after_id < 0 || top_list::beats(after_value, after_id, v[j], id)),
                      v[j], id, lane);
        }
      });
      list_value[warp][l * 32 + lane] = list.value;
      list_id[warp][l * 32 + lane] = lane < kPerList ? list.id : -1;
      if (list.last_id < 0) {  // not full: nothing is left for the next lists
        for (int rest = l + 1; rest < kLists; ++rest) list_id[warp][rest * 32 + lane] = -1;
        break;
      }
      after_value = list.last_value;
      after_id = list.last_id;
    }
    __syncthreads();
    return top_list::merge_lists_counted<K, kThreads>(
        &list_value[0][0], &list_id[0][0], kLists * 32, kWarps, num_top, best_value, best_id);
  }
}

// Blocks a row of `vocab` logits is split over: parts of kHeldPart values, each read once; 0 when
// that takes more than max_splits (the row then goes to one block that streams it).
inline int64_t held_splits(int64_t vocab, int64_t max_splits) {
  const int64_t splits = (vocab + kHeldPart - 1) / kHeldPart;
  return splits <= max_splits ? splits : 0;
}

// Launches a kernel family of this selection over p.num_rows rows of p.vocab logits: `split` on a
// grid (parts, rows) of kHeldPart-value parts where there is scratch and a row takes several (at
// most max_splits), else one block per row — `held` for a row of at most kHeldPart values,
// `streamed` for a longer one. Host code; the caller checks the launch.
template <class Params>
void launch_by_row_length(const Params& p, int64_t max_splits,
                          void (*split)(Params, int64_t per_split), void (*held)(Params),
                          void (*streamed)(Params), cudaStream_t stream) {
  const int64_t splits = held_splits(p.vocab, max_splits);
  const auto rows = static_cast<unsigned>(p.num_rows);
  if (p.scratch != nullptr && splits > 1) {
    split<<<dim3(static_cast<unsigned>(splits), rows), kThreads, 0, stream>>>(p, kHeldPart);
  } else if (p.vocab <= kHeldPart) {
    held<<<rows, kThreads, 0, stream>>>(p);
  } else {
    streamed<<<rows, kThreads, 0, stream>>>(p);
  }
}

}  // namespace cellm::kernels::row_select
