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
// then combines the normalizers in double and merges the warps' lists (top_list.cuh's
// merge_lists_counted: the entries at or above a floor the lists give, each placed by the number
// of them that beat it). Loads are issued kLoads at a time per thread so that enough of the row is
// in flight for one SM. Split (with scratch), each block does this over a segment and leaves a
// Partial; the last block of the row stages the segments' lists in shared memory at once and
// merges them the same way.
#include <algorithm>
#include <cstdint>
#include <string>

#include "backends/cuda/kernels/kernel_common.cuh"
#include "backends/cuda/kernels/launch_status.h"
#include "backends/cuda/kernels/row_logprobs.cuh"
#include "backends/cuda/kernels/row_split.cuh"
#include "backends/cuda/kernels/row_split.h"
#include "backends/cuda/kernels/top_list.cuh"

namespace cellm::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kLoads = 16;  // values in flight per thread
using top_list::kFull;
using WarpList = top_list::WarpList<kMaxRowTop>;

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

constexpr int kMaxSplits = 16;
constexpr int64_t kMinSplitElements = 8192;  // fewer per block: not worth a split

// One block's result over its part of a row: the normalizer relative to its own largest logit
// and its best pairs (the first num_top), as the split blocks leave them in the scratch.
struct Partial {
  double sum;  // Σ exp(v − max) over the part's finite v; 0 when none
  float max;   // -infinity when none
  int32_t num;
  float value[kMaxRowTop];
  int32_t id[kMaxRowTop];
};

// One block over row[begin, end): its Partial, written by thread 0 (`out` may be shared or global
// memory). Every thread of the block calls it.
__device__ void block_partial(const float* row, int64_t begin, int64_t end, int32_t num_top,
                              Partial* out) {
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid & 31;
  const int warp = tid >> 5;
  float m = -INFINITY;
  float s = 0.0f;
  WarpList list;
  constexpr int64_t kTile = static_cast<int64_t>(kThreads) * kLoads;
  for (int64_t base = begin; base < end; base += kTile) {
    float v[kLoads];
#pragma unroll
    for (int j = 0; j < kLoads; ++j) {
      const int64_t i = base + j * kThreads + tid;
      v[j] = i < end ? __ldcs(row + i) : NAN;
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

  // The block's largest m, then Σ s · exp(m − max) in double.
  __shared__ float warp_max[kWarps];
  __shared__ double warp_sum[kWarps];
  __shared__ float block_max;
  float top = m;
  for (int offset = 16; offset > 0; offset >>= 1) {
    top = fmaxf(top, __shfl_xor_sync(kFull, top, offset));
  }
  if (lane == 0) warp_max[warp] = top;
  __syncthreads();
  if (tid == 0) {
    float best = warp_max[0];
    for (int w = 1; w < kWarps; ++w) best = fmaxf(best, warp_max[w]);
    block_max = best;
  }
  __syncthreads();
  const float max = block_max;
  double sum = m == -INFINITY ? 0.0 : static_cast<double>(s) * exp(static_cast<double>(m - max));
  for (int offset = 16; offset > 0; offset >>= 1) sum += __shfl_xor_sync(kFull, sum, offset);
  if (lane == 0) warp_sum[warp] = sum;

  __shared__ float list_value[kWarps][32];
  __shared__ int32_t list_id[kWarps][32];
  __shared__ float best_value[kMaxRowTop];
  __shared__ int32_t best_id[kMaxRowTop];
  list_value[warp][lane] = list.value;
  list_id[warp][lane] = lane < kMaxRowTop ? list.id : -1;
  __syncthreads();
  const int32_t placed = top_list::merge_lists_counted<kMaxRowTop, kThreads>(
      &list_value[0][0], &list_id[0][0], 32, kWarps, num_top, best_value, best_id);
  if (tid == 0) {
    double total = 0.0;
    for (int w = 0; w < kWarps; ++w) total += warp_sum[w];
    out->sum = total;
    out->max = max;
    out->num = placed;
    for (int32_t k = 0; k < placed; ++k) {
      out->value[k] = best_value[k];
      out->id[k] = best_id[k];
    }
  }
}

// Writes the summary of a row from its Partial over the whole row. Lane 0.
__device__ void write_summary(const Partial& whole, const float* row, int32_t scored, int64_t vocab,
                              RowLogprobsSummary* out) {
  out->max_logit = whole.max;
  out->log_sum_exp = whole.max == -INFINITY ? 0.0 : log(whole.sum);
  out->scored_logit = scored >= 0 && scored < vocab ? row[scored] : NAN;
  out->num_top = whole.num;
  for (int32_t k = 0; k < whole.num; ++k) {
    out->top_ids[k] = whole.id[k];
    out->top_logits[k] = whole.value[k];
  }
}

__device__ int32_t row_num_top(const RowLogprobsParams& p, int32_t r) {
  const int32_t asked = p.num_top[r];
  return asked > kMaxRowTop ? kMaxRowTop : asked;
}

__global__ void __launch_bounds__(kThreads) row_logprobs_kernel(const RowLogprobsParams p) {
  const int32_t r = static_cast<int32_t>(blockIdx.x);
  const int32_t num_top = row_num_top(p, r);
  if (num_top < 0) return;  // the whole block: the row asked for nothing
  const float* row = p.logits + static_cast<int64_t>(r) * p.stride;
  __shared__ Partial whole;
  block_partial(row, 0, p.vocab, num_top, &whole);
  if (threadIdx.x == 0) write_summary(whole, row, p.scored[r], p.vocab, p.out + r);
}

// Grid (splits, rows): block b takes row[b · per_split, (b + 1) · per_split); the last block of a
// row to finish merges the partials and leaves the row's counter zeroed.
__global__ void __launch_bounds__(kThreads)
    row_logprobs_split_kernel(const RowLogprobsParams p, int64_t per_split) {
  const int32_t r = static_cast<int32_t>(blockIdx.y);
  const int32_t num_top = row_num_top(p, r);
  if (num_top < 0) return;
  const auto splits = static_cast<int>(gridDim.x);
  const float* row = p.logits + static_cast<int64_t>(r) * p.stride;
  const int64_t begin = static_cast<int64_t>(blockIdx.x) * per_split;
  const int64_t end = begin + per_split < p.vocab ? begin + per_split : p.vocab;
  const RowSplitScratch<Partial> scratch = row_split_scratch<Partial>(p.scratch, p.num_rows);
  Partial* partials = scratch.partials + static_cast<int64_t>(r) * kMaxSplits;
  block_partial(row, begin, end, num_top, partials + blockIdx.x);
  if (!row_split_block_is_last(&scratch.counters[r], splits)) return;  // thread 0 wrote it
  // The last block: its first warp takes the largest of the parts' maxima and the sums rescaled
  // to it, and stages the parts' lists; the whole block merges them.
  const int lane = static_cast<int>(threadIdx.x & 31);
  __shared__ Partial whole;
  __shared__ float part_value[kMaxSplits][kMaxRowTop];
  __shared__ int32_t part_id[kMaxSplits][kMaxRowTop];
  float max = -INFINITY;
  double sum = 0.0;
  if (threadIdx.x < 32) {
    stage_part_lists(partials, splits, part_value, part_id);
    float part_max = -INFINITY;
    double part_sum = 0.0;
    if (lane < splits) {
      part_max = __ldcg(&partials[lane].max);
      part_sum = __ldcg(&partials[lane].sum);
    }
    max = part_max;
    for (int offset = 16; offset > 0; offset >>= 1) {
      max = fmaxf(max, __shfl_xor_sync(kFull, max, offset));
    }
    sum = part_max == -INFINITY ? 0.0 : part_sum * exp(static_cast<double>(part_max - max));
    for (int offset = 16; offset > 0; offset >>= 1) sum += __shfl_xor_sync(kFull, sum, offset);
  }
  __syncthreads();
  const int32_t placed = top_list::merge_lists_counted<kMaxRowTop, kThreads>(
      &part_value[0][0], &part_id[0][0], kMaxRowTop, splits, num_top, whole.value, whole.id);
  if (threadIdx.x == 0) {
    whole.sum = sum;
    whole.max = max;
    whole.num = placed;
    write_summary(whole, row, p.scored[r], p.vocab, p.out + r);
    scratch.counters[r] = 0u;  // ready for the next launch
  }
}

}  // namespace

Status launch_row_logprobs(const RowLogprobsParams& p, cudaStream_t stream) {
  if (p.num_rows < 0 || p.vocab <= 0 || p.vocab > 2147483647 || p.stride < p.vocab ||
      (p.num_rows > 0 &&
       (p.logits == nullptr || p.num_top == nullptr || p.scored == nullptr || p.out == nullptr)) ||
      !row_split_scratch_fits(p.scratch, p.scratch_bytes, row_logprobs_scratch_bytes(p.num_rows),
                              p.num_rows)) {
    return invalid_argument("row logprobs: " + std::to_string(p.num_rows) + " rows of " +
                            std::to_string(p.vocab) + " logits, stride " +
                            std::to_string(p.stride) +
                            ", a null pointer, or scratch too small or unaligned");
  }
  if (p.num_rows == 0) return ok_status();
  const int64_t splits = row_splits(p.scratch, p.vocab, kMaxSplits, kMinSplitElements);
  if (splits <= 1) {
    row_logprobs_kernel<<<static_cast<unsigned>(p.num_rows), kThreads, 0, stream>>>(p);
    return launch_status("row logprobs");
  }
  const int64_t per_split = ceil_div(p.vocab, splits);
  const dim3 grid(static_cast<unsigned>(ceil_div(p.vocab, per_split)),
                  static_cast<unsigned>(p.num_rows));
  row_logprobs_split_kernel<<<grid, kThreads, 0, stream>>>(p, per_split);
  return launch_status("row logprobs");
}

size_t row_logprobs_scratch_bytes(int32_t num_rows) {
  return row_split_scratch_bytes<Partial>(num_rows, kMaxSplits);
}

}  // namespace cellm::kernels
