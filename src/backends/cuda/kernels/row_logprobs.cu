// row_logprobs: one block per row or per part of it (row_logprobs.cuh).
//
// A block takes its part with row_select.cuh (read once into registers when split, streamed from
// L2 by every pass in one block per row): a first pass finds the part's largest finite logit and
// a floor under its best kMaxRowTop values; the next sums exp(v − max) over each thread's values
// in float (__expf, ex2.approx: ≈ 2^-22 relative for arguments <= 0; the terms are <= 1), then in
// double over the block; where the row asks for top tokens, the values at or above the floor are
// gathered and ranked by counting (select_best). Split (with scratch), each block leaves a Partial
// and the last block of the row stages the parts' lists in shared memory at once, merges them
// (top_list::merge_lists_counted) and rescales the parts' sums to the row's largest logit.
#include <cmath>
#include <cstdint>
#include <string>

#include "backends/cuda/kernels/kernel_common.cuh"
#include "backends/cuda/kernels/launch_status.h"
#include "backends/cuda/kernels/row_logprobs.cuh"
#include "backends/cuda/kernels/row_select.cuh"
#include "backends/cuda/kernels/row_split.cuh"
#include "backends/cuda/kernels/row_split.h"
#include "backends/cuda/kernels/top_list.cuh"

namespace cellm::kernels {
namespace {

using row_select::HeldPart;
using row_select::kLoads;
using row_select::kThreads;
using row_select::kWarps;
using row_select::StreamedPart;
using top_list::kFull;
constexpr int kMaxSplits = 32;  // blocks a row (parts of kHeldPart values); longer rows stream

// One block's result over its part of a row: the normalizer relative to its own largest logit
// and its best pairs (the first num_top), as the split blocks leave them in the scratch.
struct Partial {
  double sum;  // Σ exp(v − max) over the part's finite v; 0 when none
  float max;   // -infinity when none
  int32_t num;
  float value[kMaxRowTop];
  int32_t id[kMaxRowTop];
};

// One block over its part: its Partial, written by the first warp (`out` may be shared or global
// memory). Every thread of the block calls it.
template <class Part>
__device__ void block_partial(const Part& part, int32_t num_top, Partial* out) {
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const row_select::Floor floor = row_select::floor_under_best<kMaxRowTop>(part);
  const float max = floor.max;
  float s = 0.0f;
  if (max != -INFINITY) {  // uniform over the block
    part.for_each_tile([&](const float(&v)[kLoads], int64_t) {
#pragma unroll
      for (int j = 0; j < kLoads; ++j) {
        if (isfinite(v[j])) s += __expf(v[j] - max);
      }
    });
  }
  double sum = s;
  for (int offset = 16; offset > 0; offset >>= 1) sum += __shfl_xor_sync(kFull, sum, offset);
  __shared__ double warp_sum[kWarps];
  if (lane == 0) warp_sum[warp] = sum;
  __shared__ float best_value[kMaxRowTop];
  __shared__ int32_t best_id[kMaxRowTop];
  const int32_t placed = num_top > 0 ? row_select::select_best<kMaxRowTop>(
                                           part, floor.floor, num_top, best_value, best_id)
                                     : 0;
  __syncthreads();  // warp_sum (select_best synchronizes too, when it runs)
  if (tid >= 32) return;
  if (lane < placed) {
    out->value[lane] = best_value[lane];
    out->id[lane] = best_id[lane];
  }
  if (lane == 0) {
    double total = 0.0;
    for (int w = 0; w < kWarps; ++w) total += warp_sum[w];
    out->sum = total;
    out->max = max;
    out->num = placed;
  }
}

// Writes the summary of a row from its Partial over the whole row. The first warp.
__device__ void write_summary(const Partial& whole, const float* row, int32_t scored, int64_t vocab,
                              RowLogprobsSummary* out) {
  const int lane = static_cast<int>(threadIdx.x & 31);
  if (lane < whole.num) {
    out->top_ids[lane] = whole.id[lane];
    out->top_logits[lane] = whole.value[lane];
  }
  if (lane == 0) {
    out->max_logit = whole.max;
    out->log_sum_exp = whole.max == -INFINITY ? 0.0 : log(whole.sum);
    out->scored_logit = scored >= 0 && scored < vocab ? row[scored] : NAN;
    out->num_top = whole.num;
  }
}

__device__ int32_t row_num_top(const RowLogprobsParams& p, int32_t r) {
  const int32_t asked = p.num_top[r];
  return asked > kMaxRowTop ? kMaxRowTop : asked;
}

// One block per row (no scratch, or a row too long to split into held parts): a row of at most
// kHeldPart values held, a longer one streamed.
template <class Part>
__global__ void __launch_bounds__(kThreads) row_logprobs_kernel(const RowLogprobsParams p) {
  const int32_t r = static_cast<int32_t>(blockIdx.x);
  const int32_t num_top = row_num_top(p, r);
  if (num_top < 0) return;  // the whole block: the row asked for nothing
  const float* row = p.logits + static_cast<int64_t>(r) * p.stride;
  __shared__ Partial whole;
  block_partial(Part(row, 0, p.vocab), num_top, &whole);
  if (threadIdx.x >= 32) return;
  __syncwarp();  // the first warp wrote `whole`
  write_summary(whole, row, p.scored[r], p.vocab, p.out + r);
}

// Grid (splits, rows): block b holds row[b · per_split, (b + 1) · per_split) (at most kHeldPart
// values); the last block of a row to finish merges the partials and leaves the row's counter
// zeroed.
__global__ void __launch_bounds__(kThreads)
    row_logprobs_split_kernel(const RowLogprobsParams p, int64_t per_split) {
  const int32_t r = static_cast<int32_t>(blockIdx.y);
  const int32_t num_top = row_num_top(p, r);
  if (num_top < 0) return;
  const auto splits = static_cast<int>(gridDim.x);
  const float* row = p.logits + static_cast<int64_t>(r) * p.stride;
  const RowSplitArrival<Partial> arrival =
      row_split_write_and_arrive<Partial>(p.scratch, p.num_rows, kMaxSplits, p.vocab, per_split,
                                          [&](int64_t begin, int64_t end, Partial* out) {
                                            block_partial(HeldPart(row, begin, end), num_top, out);
                                          });
  if (!arrival.is_last) return;
  const Partial* partials = arrival.partials;
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
  if (threadIdx.x >= 32) return;
  if (lane == 0) {
    whole.sum = sum;
    whole.max = max;
    whole.num = placed;
    *arrival.counter = 0u;  // ready for the next launch
  }
  __syncwarp();  // lane 0 completed `whole`
  write_summary(whole, row, p.scored[r], p.vocab, p.out + r);
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
  row_select::launch_by_row_length(p, kMaxSplits, row_logprobs_split_kernel,
                                   row_logprobs_kernel<HeldPart>, row_logprobs_kernel<StreamedPart>,
                                   stream);
  return launch_status("row logprobs");
}

size_t row_logprobs_scratch_bytes(int32_t num_rows) {
  return row_split_scratch_bytes<Partial>(num_rows, kMaxSplits);
}

}  // namespace cellm::kernels
