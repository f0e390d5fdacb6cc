// row_logprobs: one block per row, one pass over the row (row_logprobs.cuh).
//
// Each thread walks its strided share of the row keeping an online softmax normalizer (its
// largest finite logit m and Σ exp(v − m), rescaled when m grows). Each warp keeps one list of
// its best kMaxRowTop finite (logit, id) pairs, sorted, spread over its lanes (lane k holds entry
// k) with the last entry's pair in every lane's registers: a value enters only past the warp's
// last, and an entry goes in with a ballot and one shuffle — so the hot loop is a compare and an
// exp, and a warp inserts about K · ln(values / K) times in a row, not once per value. (Lists per
// thread insert far more often: a warp waits for whichever lane inserts, and on a random row
// some lane does at almost every value — 0.4-0.5 ms a 128K row on the H200, measured.) The block
// then combines the normalizers in double and the first warp merges the warps' lists. Loads are
// issued kLoads at a time per thread so that enough of the row is in flight for one SM.
#include <string>

#include "backends/cuda/kernels/kernel_common.cuh"
#include "backends/cuda/kernels/launch_status.h"
#include "backends/cuda/kernels/row_logprobs.cuh"

namespace cellm::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kLoads = 16;  // values in flight per thread
constexpr unsigned kFull = 0xffffffffu;
static_assert(kMaxRowTop <= 32, "a warp's list has one entry per lane");

// (value, id) pairs: a beats b when it is larger, or equal with a lower id; id -1 loses.
__device__ __forceinline__ bool beats(float a, int32_t ia, float b, int32_t ib) {
  if (ia < 0) return false;
  if (ib < 0) return true;
  return a > b || (a == b && ia < ib);
}

// The online normalizer: m the largest finite value seen, s = Σ exp(v − m). __expf (ex2.approx:
// ≈ 2^-22 relative for arguments <= 0) keeps the pass short; the sum is of terms <= 1.
__device__ __forceinline__ void add_to_normalizer(float v, float* m, float* s) {
  if (v > *m) {
    *s = *s * __expf(*m - v) + 1.0f;  // exp(-inf) = 0 for the first value
    *m = v;
  } else {
    *s += __expf(v - *m);
  }
}

// A warp's best kMaxRowTop pairs, lane k holding entry k (best first; lanes past the list and
// empty entries hold id -1), and every lane the last entry's pair.
struct WarpList {
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
      const unsigned stays = __ballot_sync(kFull, lane < kMaxRowTop && beats(value, id, cv, ci));
      const int place = __popc(stays);
      const float up_value = __shfl_up_sync(kFull, value, 1);
      const int32_t up_id = __shfl_up_sync(kFull, id, 1);
      if (lane == place) {
        value = cv;
        id = ci;
      } else if (lane > place && lane < kMaxRowTop) {
        value = up_value;
        id = up_id;
      }
      last_value = __shfl_sync(kFull, value, kMaxRowTop - 1);
      last_id = __shfl_sync(kFull, id, kMaxRowTop - 1);
      pending &= ~(1u << from);
      // The others may have fallen below the new last.
      pending &= __ballot_sync(kFull, beats(v, i, last_value, last_id));
    }
  }
};

__global__ void __launch_bounds__(kThreads) row_logprobs_kernel(const RowLogprobsParams p) {
  const int32_t r = static_cast<int32_t>(blockIdx.x);
  const int32_t asked = p.num_top[r];
  if (asked < 0) return;  // the whole block: the row asked for nothing
  const int32_t num_top = asked > kMaxRowTop ? kMaxRowTop : asked;
  const float* row = p.logits + static_cast<int64_t>(r) * p.stride;
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid & 31;
  const int warp = tid >> 5;

  float m = -INFINITY;
  float s = 0.0f;
  WarpList list;
  constexpr int64_t kTile = static_cast<int64_t>(kThreads) * kLoads;
  for (int64_t base = 0; base < p.vocab; base += kTile) {
    float v[kLoads];
#pragma unroll
    for (int j = 0; j < kLoads; ++j) {
      const int64_t i = base + j * kThreads + tid;
      v[j] = i < p.vocab ? __ldcs(row + i) : NAN;
    }
#pragma unroll
    for (int j = 0; j < kLoads; ++j) {
      const bool finite = isfinite(v[j]);
      if (finite) add_to_normalizer(v[j], &m, &s);
      if (num_top > 0) {  // uniform over the block
        list.insert(finite, v[j], static_cast<int32_t>(base + j * kThreads + tid), lane);
      }
    }
  }

  // The normalizer: the block's largest m, then Σ s · exp(m − max) in double.
  __shared__ float warp_max[kWarps];
  __shared__ double warp_sum[kWarps];
  __shared__ float row_max;
  float block_m = m;
  for (int offset = 16; offset > 0; offset >>= 1) {
    block_m = fmaxf(block_m, __shfl_xor_sync(kFull, block_m, offset));
  }
  if (lane == 0) warp_max[warp] = block_m;
  __syncthreads();
  if (tid == 0) {
    float top = warp_max[0];
    for (int w = 1; w < kWarps; ++w) top = fmaxf(top, warp_max[w]);
    row_max = top;
  }
  __syncthreads();
  const float max_logit = row_max;
  double sum =
      m == -INFINITY ? 0.0 : static_cast<double>(s) * exp(static_cast<double>(m - max_logit));
  for (int offset = 16; offset > 0; offset >>= 1) sum += __shfl_xor_sync(kFull, sum, offset);
  if (lane == 0) warp_sum[warp] = sum;

  // The warps' lists, then the first warp takes the best of their heads num_top times: lane w < 8
  // walks warp w's list.
  __shared__ float list_value[kWarps][32];
  __shared__ int32_t list_id[kWarps][32];
  list_value[warp][lane] = list.value;
  list_id[warp][lane] = lane < kMaxRowTop ? list.id : -1;
  __syncthreads();
  RowLogprobsSummary* out = p.out + r;
  if (warp != 0) return;
  int taken = 0;  // lane w: entries of warp w's list already placed
  int32_t placed = 0;
  for (int32_t k = 0; k < num_top; ++k) {
    float best = 0.0f;
    int32_t best_id = -1;
    if (lane < kWarps && taken < kMaxRowTop) {
      best = list_value[lane][taken];
      best_id = list_id[lane][taken];
    }
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
    if (best_id < 0) break;  // fewer finite logits than asked (the same in every lane)
    if (lane == 0) {
      out->top_ids[placed] = best_id;
      out->top_logits[placed] = best;
    }
    ++placed;
    if (lane == owner) ++taken;
  }
  if (lane == 0) {
    double total = 0.0;
    for (int w = 0; w < kWarps; ++w) total += warp_sum[w];
    out->max_logit = max_logit;
    out->log_sum_exp = max_logit == -INFINITY ? 0.0 : log(total);
    const int32_t scored = p.scored[r];
    out->scored_logit = scored >= 0 && scored < p.vocab ? row[scored] : NAN;
    out->num_top = placed;
  }
}

}  // namespace

Status launch_row_logprobs(const RowLogprobsParams& p, cudaStream_t stream) {
  if (p.num_rows < 0 || p.num_rows > 2147483647 || p.vocab <= 0 || p.vocab > 2147483647 ||
      p.stride < p.vocab ||
      (p.num_rows > 0 &&
       (p.logits == nullptr || p.num_top == nullptr || p.scored == nullptr || p.out == nullptr))) {
    return invalid_argument("row logprobs: " + std::to_string(p.num_rows) + " rows of " +
                            std::to_string(p.vocab) + " logits, stride " +
                            std::to_string(p.stride) + ", or a null pointer");
  }
  if (p.num_rows == 0) return ok_status();
  row_logprobs_kernel<<<static_cast<unsigned>(p.num_rows), kThreads, 0, stream>>>(p);
  return launch_status("row logprobs");
}

}  // namespace cellm::kernels
