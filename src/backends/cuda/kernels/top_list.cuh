// A warp's best K (value, id) pairs and the merge of several such lists: the selection that
// row_logprobs and row_candidates run over a logits row. Values compare larger first, the lower
// id first on ties; id -1 is an empty entry. Device code only, no state beyond registers and what
// the caller passes. Thread-safety: per warp.
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

// The first warp takes the best of `num_lists` (<= 32) sorted lists' heads num_top times into
// (values, ids); `get(list, k, &value, &id)` reads entry k of a list (id -1: none). Lane w walks
// list w; a list holds at most K entries. Returns how many it placed (fewer when the lists run
// out). Lane 0 writes. One warp only.
template <int K, class Get>
__device__ int32_t merge_lists(int num_lists, int32_t num_top, Get get, float* values,
                               int32_t* ids) {
  const int lane = static_cast<int>(threadIdx.x & 31);
  int taken = 0;
  int32_t placed = 0;
  for (int32_t k = 0; k < num_top; ++k) {
    float best = 0.0f;
    int32_t best_id = -1;
    if (lane < num_lists && taken < K) get(lane, taken, &best, &best_id);
    int owner = lane;
    for (int offset = 16; offset > 0; offset >>= 1) {
      const float other = __shfl_xor_sync(kFull, best, offset);
      const int32_t other_id = __shfl_xor_sync(kFull, best_id, offset);
      const int other_owner = __shfl_xor_sync(kFull, owner, offset);
      if (beats(other, other_id, best, best_id) ||
          (other_id == best_id && other_owner < owner)) {  // the same pair: one owner for all
        best = other;
        best_id = other_id;
        owner = other_owner;
      }
    }
    if (best_id < 0) break;  // the lists ran out (the same in every lane)
    if (lane == 0) {
      values[placed] = best;
      ids[placed] = best_id;
    }
    ++placed;
    if (lane == owner) ++taken;
  }
  return placed;
}

}  // namespace cellm::kernels::top_list
