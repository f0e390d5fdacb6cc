// A warp's best K (value, id) pairs and the merge of several such lists: the selection that
// row_logprobs and row_candidates run over a logits row. Values compare larger first, the lower
// id first on ties; id -1 is an empty entry. Device code only, no state beyond registers, the
// merges' shared scratch and what the caller passes. Thread-safety: per warp (merge_lists_block:
// per block).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace cellm::kernels::top_list {

inline constexpr unsigned kFull = 0xffffffffu;

// (value, id) pairs: a beats b when it is larger, or equal with a lower id; id -1 loses.
__device__ __forceinline__ bool beats(float a, int32_t ia, float b, int32_t ib) {
  if (ia < 0) return false;
  if (ib < 0) return true;
  return a > b || (a == b && ia < ib);
}

// A warp's best K pairs, lane k holding entry k (best first; lanes past the list and empty
// entries hold id -1), and every lane the last entry's pair. A value enters only past the warp's
// last, with a ballot and one shuffle: the hot loop is a compare, and a warp inserts about
// K · ln(values / K) times over a row, not once per value.
template <int K>
struct WarpList {
  static_assert(K >= 1 && K <= 32, "a warp's list has one entry per lane");
  float value = 0.0f;
  int32_t id = -1;
  float last_value = 0.0f;
  int32_t last_id = -1;

  // Inserts the candidates of the lanes whose `wants` is set (v, i: each lane's own), best
  // placed by the total order whatever the lane order; called by the whole warp.
  __device__ __forceinline__ void insert(bool wants, float v, int32_t i, int lane) {
    unsigned pending = __ballot_sync(kFull, wants && beats(v, i, last_value, last_id));
    while (pending != 0) {
      const int from = __ffs(pending) - 1;
      const float cv = __shfl_sync(kFull, v, from);
      const int32_t ci = __shfl_sync(kFull, i, from);
      // Entries that beat the candidate stay; it takes the first place after them; the rest move
      // one lane down (the last falls off).
      const unsigned stays = __ballot_sync(kFull, lane < K && beats(value, id, cv, ci));
      const int place = __popc(stays);
      const float up_value = __shfl_up_sync(kFull, value, 1);
      const int32_t up_id = __shfl_up_sync(kFull, id, 1);
      if (lane == place) {
        value = cv;
        id = ci;
      } else if (lane > place && lane < K) {
        value = up_value;
        id = up_id;
      }
      last_value = __shfl_sync(kFull, value, K - 1);
      last_id = __shfl_sync(kFull, id, K - 1);
      pending &= ~(1u << from);
      // The others may have fallen below the new last.
      pending &= __ballot_sync(kFull, beats(v, i, last_value, last_id));
    }
  }
};

// The number of the sorted list (values, ids)[0, n)'s entries that beat (v, i): they are a prefix
// of it, found by binary search.
__device__ __forceinline__ int count_beating(const float* values, const int32_t* ids, int n,
                                             float v, int32_t i) {
  int lo = 0;
  int hi = n;
  while (lo < hi) {
    const int mid = (lo + hi) >> 1;
    if (beats(values[mid], ids[mid], v, i)) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

// The best min(num_top, all entries) pairs of `num_lists` sorted lists, best first, into
// (out_values, out_ids); returns how many it placed. List l's entry k is (values[l · stride + k],
// ids[l · stride + k]) for k < K, best first, its entries a prefix (id -1 after them); a pair
// appears in one list at most (each list covers its own part of a row). Each valid entry's rank
// is its index plus, for every other list, that list's entries that beat it (count_beating over
// all K: the invalid entries never beat), so the entries are placed in parallel, a thread per
// entry — not a warp-wide selection per entry taken. Every thread of the block calls it (it
// synchronizes the block twice; `out` is complete when it returns); the lists (shared memory)
// stay as they were.
template <int K>
__device__ int32_t merge_lists_block(const float* values, const int32_t* ids, int stride,
                                     int num_lists, int32_t num_top, float* out_values,
                                     int32_t* out_ids) {
  __shared__ int num_valid;
  if (threadIdx.x == 0) num_valid = 0;
  __syncthreads();
  int mine = 0;
  for (int e = static_cast<int>(threadIdx.x); e < num_lists * K;
       e += static_cast<int>(blockDim.x)) {
    const int l = e / K;
    const int k = e - l * K;
    const int32_t id = ids[l * stride + k];
    if (id < 0) continue;
    ++mine;
    const float v = values[l * stride + k];
    int rank = k;
    for (int other = 0; other < num_lists; ++other) {
      if (other != l)
        rank += count_beating(values + other * stride, ids + other * stride, K, v, id);
    }
    if (rank < num_top) {
      out_values[rank] = v;
      out_ids[rank] = id;
    }
  }
  if (mine > 0) atomicAdd(&num_valid, mine);
  __syncthreads();
  const int valid = num_valid;
  return num_top < valid ? num_top : valid;
}

// Places the pairs (values, ids)[0, n) — each pair distinct, and every pair that beats one of them
// among them — at their ranks: pair c goes to out[r], r the number of pairs that beat it, where
// r < num_top. One comparison per pair and pair, the block's threads taking a pair each in turn.
// Every thread of the block calls it; `out` is complete when it returns (it synchronizes once).
__device__ __forceinline__ void place_by_count(const float* values, const int32_t* ids, int n,
                                               int32_t num_top, float* out_values,
                                               int32_t* out_ids) {
  for (int c = static_cast<int>(threadIdx.x); c < n; c += static_cast<int>(blockDim.x)) {
    const float v = values[c];
    const int32_t id = ids[c];
    int rank = 0;
#pragma unroll 4
    for (int j = 0; j < n; ++j) rank += beats(values[j], ids[j], v, id);
    if (rank < num_top) {
      out_values[rank] = v;
      out_ids[rank] = id;
    }
  }
  __syncthreads();
}

// merge_lists_block's result (the same lists, the same out), placed by counting where that is
// cheaper. A floor bounds it from below: with L lists and m = ⌈K / L⌉, the worst of the lists' m-th
// entries when every list has m (L · m ≥ K entries at or above it), or the best of the full lists'
// last entries (each has K at or above it) — the higher of the two that hold. The entries at or
// above it (every valid entry when neither holds) are gathered in shared memory, and each is
// placed at the number of gathered entries that beat it: everything that beats a gathered entry
// is gathered too, so that count is its rank. Over a row's parts the gathered entries are about K
// (and the ties at the floor), one comparison each per entry — not a binary search in every other
// list; more than kMaxGathered of them (a row with few finite values, or many ties) falls back to
// merge_lists_block. Every thread of the block calls it (it synchronizes the block; `out` is
// complete when it returns).
template <int K, int kMaxGathered>
__device__ int32_t merge_lists_counted(const float* values, const int32_t* ids, int stride,
                                       int num_lists, int32_t num_top, float* out_values,
                                       int32_t* out_ids) {
  __shared__ float floor_value;
  __shared__ int32_t floor_id;  // -1: no floor
  __shared__ int num_gathered;
  __shared__ int num_valid;
  __shared__ float gathered_value[kMaxGathered];
  __shared__ int32_t gathered_id[kMaxGathered];
  if (threadIdx.x < 32) {
    const int m = (K + num_lists - 1) / num_lists;
    // The worst m-th entry (id -1 and `every` false once a list lacks it) and the best last one.
    float worst_value = 0.0f;
    int32_t worst_id = -1;
    bool every = true;
    float best_value = 0.0f;
    int32_t best_id = -1;
    for (int l = static_cast<int>(threadIdx.x); l < num_lists; l += 32) {
      const float mv = values[l * stride + m - 1];
      const int32_t mid = ids[l * stride + m - 1];
      if (mid < 0) every = false;
      if (worst_id < 0 || beats(worst_value, worst_id, mv, mid)) {
        worst_value = mv;
        worst_id = mid;
      }
      const float lv = values[l * stride + K - 1];
      const int32_t lid = ids[l * stride + K - 1];
      if (beats(lv, lid, best_value, best_id)) {
        best_value = lv;
        best_id = lid;
      }
    }
    every = __all_sync(kFull, every);
    for (int offset = 16; offset > 0; offset >>= 1) {
      const float wv = __shfl_xor_sync(kFull, worst_value, offset);
      const int32_t wid = __shfl_xor_sync(kFull, worst_id, offset);
      if (worst_id < 0 || (wid >= 0 && beats(worst_value, worst_id, wv, wid))) {
        worst_value = wv;
        worst_id = wid;
      }
      const float bv = __shfl_xor_sync(kFull, best_value, offset);
      const int32_t bid = __shfl_xor_sync(kFull, best_id, offset);
      if (beats(bv, bid, best_value, best_id)) {
        best_value = bv;
        best_id = bid;
      }
    }
    if (every && worst_id >= 0 && beats(worst_value, worst_id, best_value, best_id)) {
      best_value = worst_value;
      best_id = worst_id;
    }
    if (threadIdx.x == 0) {
      floor_value = best_value;
      floor_id = best_id;
      num_gathered = 0;
      num_valid = 0;
    }
  }
  __syncthreads();
  const float fv = floor_value;
  const int32_t fid = floor_id;
  int mine = 0;
  for (int e = static_cast<int>(threadIdx.x); e < num_lists * K;
       e += static_cast<int>(blockDim.x)) {
    const int l = e / K;
    const int32_t id = ids[l * stride + (e - l * K)];
    if (id < 0) continue;
    ++mine;
    const float v = values[l * stride + (e - l * K)];
    if (beats(fv, fid, v, id)) continue;  // below the floor (never when there is none)
    const int slot = atomicAdd(&num_gathered, 1);
    if (slot < kMaxGathered) {
      gathered_value[slot] = v;
      gathered_id[slot] = id;
    }
  }
  if (mine > 0) atomicAdd(&num_valid, mine);
  __syncthreads();
  const int gathered = num_gathered;
  const int valid = num_valid;
  if (gathered > kMaxGathered) {  // uniform over the block
    return merge_lists_block<K>(values, ids, stride, num_lists, num_top, out_values, out_ids);
  }
  place_by_count(gathered_value, gathered_id, gathered, num_top, out_values, out_ids);
  return num_top < valid ? num_top : valid;
}

}  // namespace cellm::kernels::top_list
