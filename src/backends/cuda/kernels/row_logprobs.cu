// row_logprobs: one block per row, one pass over the row (row_logprobs.cuh).
//
// Each thread walks its strided share of the row keeping an online softmax normalizer (its
// largest finite logit m and Σ exp(v − m), rescaled when m grows) and its own best kMaxRowTop
// finite (logit, id) pairs, sorted, in its column of shared memory (a value enters only past the
// thread's last, a register, so after the first few hundred values insertions are rare and the
// hot loop is a compare and an exp). The block then combines the normalizers in double and
// merges the threads' lists by repeatedly taking the best head. Loads are issued kLoads at a time
// per thread so that enough of the row is in flight for one SM to read it at a useful rate.
#include <string>

#include "backends/cuda/kernels/kernel_common.cuh"
#include "backends/cuda/kernels/launch_status.h"
#include "backends/cuda/kernels/row_logprobs.cuh"

namespace cellm::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kLoads = 16;  // values in flight per thread

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

// Thread tid's best kMaxRowTop (value, id) pairs live in column tid of `value` / `id` (shared
// memory: a column per thread, so no bank conflicts), best first; empty slots hold -infinity and
// id -1. Ids arrive in increasing order per thread, so an equal value never enters: a finite v
// enters exactly when it is above the last slot's value, which the caller keeps in a register.
// Returns the new last value. Rare after the first values of a row: one copy of this code.
__device__ __noinline__ float insert_into_list(float v, int32_t i, float (*value)[kThreads],
                                               int32_t (*id)[kThreads], int tid) {
  int k = kMaxRowTop - 1;
  while (k > 0 && v > value[k - 1][tid]) {
    value[k][tid] = value[k - 1][tid];
    id[k][tid] = id[k - 1][tid];
    --k;
  }
  value[k][tid] = v;
  id[k][tid] = i;
  return value[kMaxRowTop - 1][tid];
}

__global__ void __launch_bounds__(kThreads) row_logprobs_kernel(const RowLogprobsParams p) {
  const int32_t r = static_cast<int32_t>(blockIdx.x);
  const int32_t asked = p.num_top[r];
  if (asked < 0) return;  // the whole block: the row asked for nothing
  const int32_t num_top = asked > kMaxRowTop ? kMaxRowTop : asked;
  const float* row = p.logits + static_cast<int64_t>(r) * p.stride;
  const int tid = static_cast<int>(threadIdx.x);

  // The thread's list, in shared memory from the start (the merge below reads it there).
  __shared__ float list_value[kMaxRowTop][kThreads];
  __shared__ int32_t list_id[kMaxRowTop][kThreads];
  for (int k = 0; k < kMaxRowTop; ++k) {
    list_value[k][tid] = -INFINITY;
    list_id[k][tid] = -1;
  }
  float last = num_top > 0 ? -INFINITY : INFINITY;  // INFINITY: nothing ever enters

  float m = -INFINITY;
  float s = 0.0f;
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
      if (!isfinite(v[j])) continue;
      add_to_normalizer(v[j], &m, &s);
      if (v[j] > last) {
        last = insert_into_list(v[j], static_cast<int32_t>(base + j * kThreads + tid), list_value,
                                list_id, tid);
      }
    }
  }

  // The normalizer: the block's largest m, then Σ s · exp(m − max) in double.
  __shared__ float warp_max[kWarps];
  __shared__ double warp_sum[kWarps];
  __shared__ float row_max;
  float block_m = m;
  for (int offset = 16; offset > 0; offset >>= 1) {
    block_m = fmaxf(block_m, __shfl_xor_sync(0xffffffffu, block_m, offset));
  }
  if ((tid & 31) == 0) warp_max[tid >> 5] = block_m;
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
  for (int offset = 16; offset > 0; offset >>= 1) {
    sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  }
  if ((tid & 31) == 0) warp_sum[tid >> 5] = sum;

  // The top list: num_top rounds of taking the best head (each thread's next untaken entry) over
  // the block.
  __shared__ float head_value[kWarps];
  __shared__ int32_t head_id[kWarps];
  __shared__ int head_owner[kWarps];
  __shared__ int winner;
  RowLogprobsSummary* out = p.out + r;
  __syncthreads();
  int taken = 0;  // this thread's entries already placed
  int32_t placed = 0;
  for (int32_t k = 0; k < num_top; ++k) {
    float best = taken < kMaxRowTop ? list_value[taken][tid] : 0.0f;
    int32_t best_id = taken < kMaxRowTop ? list_id[taken][tid] : -1;
    int owner = tid;
    for (int offset = 16; offset > 0; offset >>= 1) {
      const float other = __shfl_xor_sync(0xffffffffu, best, offset);
      const int32_t other_id = __shfl_xor_sync(0xffffffffu, best_id, offset);
      const int other_owner = __shfl_xor_sync(0xffffffffu, owner, offset);
      if (beats(other, other_id, best, best_id)) {
        best = other;
        best_id = other_id;
        owner = other_owner;
      }
    }
    if ((tid & 31) == 0) {
      head_value[tid >> 5] = best;
      head_id[tid >> 5] = best_id;
      head_owner[tid >> 5] = owner;
    }
    __syncthreads();
    if (tid == 0) {
      int w_best = 0;
      for (int w = 1; w < kWarps; ++w) {
        if (beats(head_value[w], head_id[w], head_value[w_best], head_id[w_best])) w_best = w;
      }
      winner = head_id[w_best] < 0 ? -1 : head_owner[w_best];
      if (winner >= 0) {
        out->top_ids[placed] = head_id[w_best];
        out->top_logits[placed] = head_value[w_best];
        ++placed;
      }
    }
    __syncthreads();
    const int w = winner;
    if (w < 0) break;  // fewer finite logits than asked (every thread reads the same winner)
    if (tid == w) ++taken;
    __syncthreads();  // winner is rewritten next round only after everyone read it
  }

  if (tid == 0) {
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
