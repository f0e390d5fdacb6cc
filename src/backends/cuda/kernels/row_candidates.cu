// row_candidates: one block per row or per part of it (row_candidates.cuh).
//
// A block selects its part's best kMaxCandidates pairs with row_select.cuh (the part read once
// into registers when split, streamed from L2 by every pass in one block per row; a floor under
// the best values, the values at or above it gathered and ranked by counting): the list, and its
// head the part's largest logit. Where the row needs its total (no top-k in the ask: a draw with a
// top-k never reads it), a last pass sums exp(v/T − max/T) in double — the product and the
// difference rounded apart (no fused multiply-add), as the host computes each term — over each
// thread's share, then over the block. Split (with scratch), the last block of a row stages the
// parts' lists in shared memory, merges them (top_list::merge_lists_counted) and rescales their
// sums to the row's largest logit (one more rounding per part than the host's terms: within the
// summation-order difference the sum already has). The first warp then draws the row's token from
// the list where the row asks (draw_token).
#include <cmath>
#include <cstdint>
#include <string>

#include "backends/cuda/kernels/kernel_common.cuh"
#include "backends/cuda/kernels/launch_status.h"
#include "backends/cuda/kernels/row_candidates.cuh"
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

// One block's result over its part of a row: its best pairs and Σ exp(v/T − max/T) with `max`
// the part's own largest logit (the whole row's when the part is the row).
struct Partial {
  double sum;  // 0 when nothing in the part is finite; NaN when not asked for
  float max;   // -infinity when nothing is finite
  int32_t num;
  float value[kMaxCandidates];
  int32_t id[kMaxCandidates];
};

// The host's term: exp(v · (1/T) − top) with top = max · (1/T), the product and the difference
// rounded apart.
__device__ __forceinline__ double scaled(float v, double inv_temperature) {
  return __dmul_rn(static_cast<double>(v), inv_temperature);
}

// Whether the row's total is read: a draw with a top-k never does (core/listed_draw.h), and the
// host's sampler cuts the ask's way.
__device__ __forceinline__ bool needs_total(const RowCandidatesAsk& ask) {
  return ask.cuts.top_k <= 0;
}

// One block over its part: the selection, and the sum relative to the part's largest logit where
// `with_sum`; the first warp writes `out` (shared or global memory). Every thread calls it.
template <class Part>
__device__ void block_partial(const Part& part, bool with_sum, double inv_temperature,
                              Partial* out) {
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid & 31;
  const int warp = tid >> 5;
  __shared__ float best_value[kMaxCandidates];
  __shared__ int32_t best_id[kMaxCandidates];
  const row_select::Floor floor = row_select::floor_under_best<kMaxCandidates>(part);
  const int32_t num = row_select::select_best<kMaxCandidates>(part, floor.floor, kMaxCandidates,
                                                              best_value, best_id);
  double sum = 0.0;
  if (with_sum && num > 0) {  // uniform over the block
    const double top = scaled(best_value[0], inv_temperature);
    part.for_each_tile([&](const float(&v)[kLoads], int64_t) {  // each thread's values in order
#pragma unroll
      for (int j = 0; j < kLoads; ++j) {
        if (isfinite(v[j])) sum += exp(__dsub_rn(scaled(v[j], inv_temperature), top));
      }
    });
  }
  __shared__ double warp_sum[kWarps];
  if (with_sum) {
    for (int offset = 16; offset > 0; offset >>= 1) sum += __shfl_xor_sync(kFull, sum, offset);
    if (lane == 0) warp_sum[warp] = sum;
    __syncthreads();
  }
  if (tid >= 32) return;
  for (int k = lane; k < num; k += 32) {
    out->value[k] = best_value[k];
    out->id[k] = best_id[k];
  }
  if (lane == 0) {
    double total = 0.0;
    for (int w = 0; w < kWarps; ++w) total += with_sum ? warp_sum[w] : 0.0;
    out->sum = with_sum ? total : NAN;
    out->max = num > 0 ? best_value[0] : -INFINITY;
    out->num = num;
  }
}

// The row's summary from its Partial over the whole row. The first warp.
__device__ void write_summary(const Partial& whole, float temperature, RowCandidatesSummary* out) {
  const int lane = static_cast<int>(threadIdx.x & 31);
  for (int k = lane; k < whole.num; k += 32) {
    out->ids[k] = whole.id[k];
    out->logits[k] = whole.value[k];
  }
  if (lane == 0) {
    out->total = whole.sum;
    out->max_logit = whole.max;
    out->temperature = temperature;
    out->num = whole.num;
  }
}

// The first warp (every lane), after `whole` is complete in shared memory: out->drawn, the token
// core/listed_draw.h draws from the list with weights exp(v/T − top) computed as the host's
// sampler computes them (scaled(): no fused multiply-add).
__device__ void draw_token(const Partial& whole, const RowCandidatesAsk& ask,
                           RowCandidatesSummary* out) {
  __shared__ double weights[kMaxCandidates];
  const int lane = static_cast<int>(threadIdx.x & 31);
  const int32_t num = whole.num;
  const bool draws = ask.draw != 0 && num > 0;
  if (draws) {
    const double inv_temperature = 1.0 / static_cast<double>(ask.temperature);
    for (int k = lane; k < num; k += 32) {
      weights[k] = exp(__dsub_rn(scaled(whole.value[k], inv_temperature),
                                 scaled(whole.value[0], inv_temperature)));
    }
  }
  __syncwarp();
  if (lane == 0) {
    out->drawn = draws ? draw_from_listed(whole.id, weights, num, num < kMaxCandidates, whole.sum,
                                          ask.cuts, draw_uniform(ask.seed, ask.position))
                       : kListedUndecided;
    out->drawn_from_row = 0;
  }
}

// One block per row (no scratch, or a row too long to split into held parts): a row of at most
// kHeldPart values held, a longer one streamed.
template <class Part>
__global__ void __launch_bounds__(kThreads) row_candidates_kernel(const RowCandidatesParams p) {
  const int32_t r = static_cast<int32_t>(blockIdx.x);
  const RowCandidatesAsk& ask = p.asks[r];
  const float temperature = ask.temperature;
  if (!(temperature > 0.0f)) return;  // the whole block: the row asked for nothing
  const float* row = p.logits + static_cast<int64_t>(r) * p.stride;
  __shared__ Partial whole;
  block_partial(Part(row, 0, p.vocab), needs_total(ask), 1.0 / static_cast<double>(temperature),
                &whole);
  if (threadIdx.x >= 32) return;
  __syncwarp();  // the first warp wrote `whole`
  write_summary(whole, temperature, p.out + r);
  draw_token(whole, ask, p.out + r);
}

// The first warp of a row's last block: the row's largest logit over the parts' maxima (lane j
// reads part j's) and, `with_sum`, the parts' sums rescaled to it — exp(top_b − top) with each top
// the host's max · (1/T) — summed over the warp (NaN without); every lane gets both.
__device__ void merge_part_sums(const Partial* partials, int splits, bool with_sum,
                                double inv_temperature, float* max_out, double* sum_out) {
  const int lane = static_cast<int>(threadIdx.x & 31);
  float part_max = -INFINITY;
  double part_sum = 0.0;
  if (lane < splits) {
    part_max = __ldcg(&partials[lane].max);
    if (with_sum) part_sum = __ldcg(&partials[lane].sum);
  }
  float max = part_max;
  for (int offset = 16; offset > 0; offset >>= 1) {
    max = fmaxf(max, __shfl_xor_sync(kFull, max, offset));
  }
  *max_out = max;
  if (!with_sum) {
    *sum_out = NAN;
    return;
  }
  double sum = 0.0;
  if (part_max != -INFINITY) {
    const double part_top = scaled(part_max, inv_temperature);
    sum = part_max == max ? part_sum
                          : part_sum * exp(__dsub_rn(part_top, scaled(max, inv_temperature)));
  }
  for (int offset = 16; offset > 0; offset >>= 1) sum += __shfl_xor_sync(kFull, sum, offset);
  *sum_out = sum;
}

// Grid (splits, rows): block b holds row[b · per_split, (b + 1) · per_split) (at most kHeldPart
// values); the last block of a row to finish merges the partials — the sums rescaled to the row's
// largest logit, exp(top_b − top) with each top the host's max · (1/T) — and leaves the row's
// counter zeroed.
__global__ void __launch_bounds__(kThreads)
    row_candidates_split_kernel(const RowCandidatesParams p, int64_t per_split) {
  const int32_t r = static_cast<int32_t>(blockIdx.y);
  const RowCandidatesAsk& ask = p.asks[r];
  const float temperature = ask.temperature;
  if (!(temperature > 0.0f)) return;
  const double inv_temperature = 1.0 / static_cast<double>(temperature);
  const bool with_sum = needs_total(ask);
  const auto splits = static_cast<int>(gridDim.x);
  const float* row = p.logits + static_cast<int64_t>(r) * p.stride;
  const RowSplitArrival<Partial> arrival = row_split_write_and_arrive<Partial>(
      p.scratch, p.num_rows, kMaxSplits, p.vocab, per_split,
      [&](int64_t begin, int64_t end, Partial* out) {
        block_partial(HeldPart(row, begin, end), with_sum, inv_temperature, out);
      });
  if (!arrival.is_last) return;
  const Partial* partials = arrival.partials;
  // The last block: its first warp reads the parts' maxima and sums (lane j part j's) and stages
  // their lists; the whole block merges them.
  const int lane = static_cast<int>(threadIdx.x & 31);
  __shared__ Partial whole;
  __shared__ float part_value[kMaxSplits][kMaxCandidates];
  __shared__ int32_t part_id[kMaxSplits][kMaxCandidates];
  float max = -INFINITY;
  double sum = 0.0;
  if (threadIdx.x < 32) {
    stage_part_lists(partials, splits, part_value, part_id);
    merge_part_sums(partials, splits, with_sum, inv_temperature, &max, &sum);
  }
  __syncthreads();
  const int32_t placed = top_list::merge_lists_counted<kMaxCandidates, kThreads>(
      &part_value[0][0], &part_id[0][0], kMaxCandidates, splits, kMaxCandidates, whole.value,
      whole.id);
  if (threadIdx.x >= 32) return;
  if (lane == 0) {
    whole.sum = max == -INFINITY && with_sum ? 0.0 : sum;
    whole.max = max;
    whole.num = placed;
    *arrival.counter = 0u;  // ready for the next launch
  }
  __syncwarp();  // lane 0 completed `whole`
  write_summary(whole, temperature, p.out + r);
  draw_token(whole, ask, p.out + r);
}

}  // namespace

Status launch_row_candidates(const RowCandidatesParams& p, cudaStream_t stream) {
  if (p.num_rows < 0 || p.vocab <= 0 || p.vocab > 2147483647 || p.stride < p.vocab ||
      (p.num_rows > 0 && (p.logits == nullptr || p.asks == nullptr || p.out == nullptr)) ||
      !row_split_scratch_fits(p.scratch, p.scratch_bytes, row_candidates_scratch_bytes(p.num_rows),
                              p.num_rows)) {
    return invalid_argument("row candidates: " + std::to_string(p.num_rows) + " rows of " +
                            std::to_string(p.vocab) + " logits, stride " +
                            std::to_string(p.stride) +
                            ", a null pointer, or scratch too small or unaligned");
  }
  if (p.num_rows == 0) return ok_status();
  row_select::launch_by_row_length(p, kMaxSplits, row_candidates_split_kernel,
                                   row_candidates_kernel<HeldPart>,
                                   row_candidates_kernel<StreamedPart>, stream);
  return launch_status("row candidates");
}

size_t row_candidates_scratch_bytes(int32_t num_rows) {
  return row_split_scratch_bytes<Partial>(num_rows, kMaxSplits);
}

}  // namespace cellm::kernels
