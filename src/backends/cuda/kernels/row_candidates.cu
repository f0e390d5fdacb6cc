// row_candidates: one block per row or per segment of it, three passes over its part
// (row_candidates.cuh).
//
// A first pass finds a floor under the part's best kMaxCandidates values (candidate_floor). Pass
// one keeps each warp's best kMaxCandidates finite (logit, id) pairs at or above it
// (top_list.cuh) and the block merges them by rank (merge_lists_block): the list, and its head
// the part's largest logit. Pass two, with that maximum known, sums exp(v/T − max/T) in double —
// the product and the difference rounded apart (no fused multiply-add), as the host computes each
// term — over each thread's share, then over the block. Every pass keeps kLoads values of each
// thread in flight (not a memory round trip per value); the row is read with ordinary loads so
// that the later passes find it in L2. Split (with scratch), the last block of a row stages the
// parts' lists in shared memory, merges them the same way and rescales their sums to the row's
// largest logit (one more rounding per part than the host's terms: within the summation-order
// difference the sum already has). The first warp then draws the row's token from the list where
// the row asks (draw_token).
#include <cmath>
#include <cstdint>
#include <string>

#include "backends/cuda/kernels/kernel_common.cuh"
#include "backends/cuda/kernels/launch_status.h"
#include "backends/cuda/kernels/row_candidates.cuh"
#include "backends/cuda/kernels/row_split.cuh"
#include "backends/cuda/kernels/row_split.h"
#include "backends/cuda/kernels/top_list.cuh"

namespace cellm::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kLoads = 16;                                          // values in flight per thread
constexpr int64_t kTile = static_cast<int64_t>(kThreads) * kLoads;  // a block's loads in flight

// This thread's kLoads values of the tile of row[begin, end) at `base` (row[base + j · kThreads +
// tid]), `fill` past `end`, all loads issued before any is used.
__device__ __forceinline__ void load_tile(const float* row, int64_t base, int64_t end, float fill,
                                          float (&v)[kLoads]) {
  const auto tid = static_cast<int64_t>(threadIdx.x);
#pragma unroll
  for (int j = 0; j < kLoads; ++j) {
    const int64_t i = base + j * kThreads + tid;
    v[j] = i < end ? row[i] : fill;
  }
}
constexpr int kMaxSplits = 16;
constexpr int64_t kMinSplitElements = 8192;  // fewer per block: not worth a split
using top_list::kFull;
using WarpList = top_list::WarpList<kMaxCandidates>;

// One block's result over its part of a row: its best pairs and Σ exp(v/T − max/T) with `max`
// the part's own largest logit (the whole row's when the part is the row).
struct Partial {
  double sum;  // 0 when nothing in the part is finite
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

// A floor under the best kMaxCandidates finite values of row[begin, end), so that pass one
// inserts only values at or above it (a warp's list fills with the first values it meets and
// then inserts ≈ K · ln(n / K) more, each a chain of shuffles: the selection's cost at one row):
// each thread's largest finite value, each warp's kPerWarp-th largest of those (kPerWarp values of
// the warp at or above it), the smallest of the warps' (kWarps · kPerWarp = kMaxCandidates
// values at or above it). -infinity when the part has fewer finite values. Every thread calls it.
constexpr int kPerWarp = kMaxCandidates / kWarps;
static_assert(kPerWarp * kWarps == kMaxCandidates, "the warps' floors cover the list");

__device__ float candidate_floor(const float* row, int64_t begin, int64_t end) {
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid & 31;
  const int warp = tid >> 5;
  float mine = -INFINITY;
  for (int64_t base = begin; base < end; base += kTile) {  // kLoads loads in flight
    float v[kLoads];
    load_tile(row, base, end, -INFINITY, v);
#pragma unroll
    for (int j = 0; j < kLoads; ++j) {
      if (isfinite(v[j])) mine = fmaxf(mine, v[j]);
    }
  }
  float kth = -INFINITY;
  for (int k = 0; k < kPerWarp; ++k) {
    float best = mine;
    for (int offset = 16; offset > 0; offset >>= 1) {
      best = fmaxf(best, __shfl_xor_sync(kFull, best, offset));
    }
    kth = best;
    const unsigned holders = __ballot_sync(kFull, mine == best);  // one of them steps aside
    if (lane == __ffs(holders) - 1) mine = -INFINITY;
  }
  __shared__ float warp_floor[kWarps];
  if (lane == 0) warp_floor[warp] = kth;
  __syncthreads();
  float floor = warp_floor[0];
  for (int w = 1; w < kWarps; ++w) floor = fminf(floor, warp_floor[w]);
  return floor;
}

// One block over row[begin, end): pass one selects, pass two sums from L2 relative to the part's
// largest logit; thread 0 writes `out` (shared or global memory). Every thread calls it.
__device__ void block_partial(const float* row, int64_t begin, int64_t end, double inv_temperature,
                              Partial* out) {
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const float floor = candidate_floor(row, begin, end);
  WarpList list;
  for (int64_t base = begin; base < end; base += kTile) {
    float v[kLoads];
    load_tile(row, base, end, NAN, v);
#pragma unroll
    for (int j = 0; j < kLoads; ++j) {
      list.insert(isfinite(v[j]) && v[j] >= floor, v[j],
                  static_cast<int32_t>(base + j * kThreads + tid), lane);
    }
  }
  __shared__ float list_value[kWarps][32];
  __shared__ int32_t list_id[kWarps][32];
  __shared__ float best_value[kMaxCandidates];
  __shared__ int32_t best_id[kMaxCandidates];
  list_value[warp][lane] = list.value;
  list_id[warp][lane] = lane < kMaxCandidates ? list.id : -1;
  __syncthreads();
  const int32_t num = top_list::merge_lists_block<kMaxCandidates>(
      &list_value[0][0], &list_id[0][0], 32, kWarps, kMaxCandidates, best_value, best_id);
  double sum = 0.0;
  if (num > 0) {  // uniform over the block
    const double top = scaled(best_value[0], inv_temperature);
    for (int64_t base = begin; base < end; base += kTile) {  // each thread's values in order
      float v[kLoads];
      load_tile(row, base, end, NAN, v);
#pragma unroll
      for (int j = 0; j < kLoads; ++j) {
        if (isfinite(v[j])) sum += exp(__dsub_rn(scaled(v[j], inv_temperature), top));
      }
    }
  }
  for (int offset = 16; offset > 0; offset >>= 1) sum += __shfl_xor_sync(kFull, sum, offset);
  __shared__ double warp_sum[kWarps];
  if (lane == 0) warp_sum[warp] = sum;
  __syncthreads();
  if (tid == 0) {
    double total = 0.0;
    for (int w = 0; w < kWarps; ++w) total += warp_sum[w];
    out->sum = total;
    out->max = num > 0 ? best_value[0] : -INFINITY;
    out->num = num;
    for (int32_t k = 0; k < num; ++k) {
      out->value[k] = best_value[k];
      out->id[k] = best_id[k];
    }
  }
}

// The row's summary from its Partial over the whole row. Thread 0.
__device__ void write_summary(const Partial& whole, float temperature, RowCandidatesSummary* out) {
  out->total = whole.sum;
  out->max_logit = whole.max;
  out->temperature = temperature;
  out->num = whole.num;
  for (int32_t k = 0; k < whole.num; ++k) {
    out->ids[k] = whole.id[k];
    out->logits[k] = whole.value[k];
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
  if (draws && lane < num) {
    const double inv_temperature = 1.0 / static_cast<double>(ask.temperature);
    weights[lane] = exp(__dsub_rn(scaled(whole.value[lane], inv_temperature),
                                  scaled(whole.value[0], inv_temperature)));
  }
  __syncwarp();
  if (lane == 0) {
    out->drawn = draws ? draw_from_listed(whole.id, weights, num, num < kMaxCandidates, whole.sum,
                                          ask.cuts, draw_uniform(ask.seed, ask.position))
                       : kListedUndecided;
  }
}

__global__ void __launch_bounds__(kThreads) row_candidates_kernel(const RowCandidatesParams p) {
  const int32_t r = static_cast<int32_t>(blockIdx.x);
  const RowCandidatesAsk& ask = p.asks[r];
  const float temperature = ask.temperature;
  if (!(temperature > 0.0f)) return;  // the whole block: the row asked for nothing
  const float* row = p.logits + static_cast<int64_t>(r) * p.stride;
  __shared__ Partial whole;
  block_partial(row, 0, p.vocab, 1.0 / static_cast<double>(temperature), &whole);
  if (threadIdx.x >= 32) return;
  __syncwarp();  // thread 0 wrote `whole`
  if (threadIdx.x == 0) write_summary(whole, temperature, p.out + r);
  draw_token(whole, ask, p.out + r);
}

// The first warp of a row's last block: the row's largest logit over the parts' maxima (lane j
// reads part j's) and the parts' sums rescaled to it — exp(top_b − top) with each top the host's
// max · (1/T) — summed over the warp; every lane gets both.
__device__ void merge_part_sums(const Partial* partials, int splits, double inv_temperature,
                                float* max_out, double* sum_out) {
  const int lane = static_cast<int>(threadIdx.x & 31);
  float part_max = -INFINITY;
  double part_sum = 0.0;
  if (lane < splits) {
    part_max = __ldcg(&partials[lane].max);
    part_sum = __ldcg(&partials[lane].sum);
  }
  float max = part_max;
  for (int offset = 16; offset > 0; offset >>= 1) {
    max = fmaxf(max, __shfl_xor_sync(kFull, max, offset));
  }
  double sum = 0.0;
  if (part_max != -INFINITY) {
    const double part_top = scaled(part_max, inv_temperature);
    sum = part_max == max ? part_sum
                          : part_sum * exp(__dsub_rn(part_top, scaled(max, inv_temperature)));
  }
  for (int offset = 16; offset > 0; offset >>= 1) sum += __shfl_xor_sync(kFull, sum, offset);
  *max_out = max;
  *sum_out = sum;
}

// Grid (splits, rows): block b takes row[b · per_split, (b + 1) · per_split); the last block of a
// row to finish merges the partials — the sums rescaled to the row's largest logit, exp(top_b −
// top) with each top the host's max · (1/T) — and leaves the row's counter zeroed.
__global__ void __launch_bounds__(kThreads)
    row_candidates_split_kernel(const RowCandidatesParams p, int64_t per_split) {
  const int32_t r = static_cast<int32_t>(blockIdx.y);
  const RowCandidatesAsk& ask = p.asks[r];
  const float temperature = ask.temperature;
  if (!(temperature > 0.0f)) return;
  const double inv_temperature = 1.0 / static_cast<double>(temperature);
  const auto splits = static_cast<int>(gridDim.x);
  const float* row = p.logits + static_cast<int64_t>(r) * p.stride;
  const int64_t begin = static_cast<int64_t>(blockIdx.x) * per_split;
  const int64_t end = begin + per_split < p.vocab ? begin + per_split : p.vocab;
  const RowSplitScratch<Partial> scratch = row_split_scratch<Partial>(p.scratch, p.num_rows);
  Partial* partials = scratch.partials + static_cast<int64_t>(r) * kMaxSplits;
  block_partial(row, begin, end, inv_temperature, partials + blockIdx.x);
  if (!row_split_block_is_last(&scratch.counters[r], splits)) return;  // thread 0 wrote it
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
    merge_part_sums(partials, splits, inv_temperature, &max, &sum);
  }
  __syncthreads();
  const int32_t placed =
      top_list::merge_lists_block<kMaxCandidates>(&part_value[0][0], &part_id[0][0], kMaxCandidates,
                                                  splits, kMaxCandidates, whole.value, whole.id);
  if (threadIdx.x >= 32) return;
  if (lane == 0) {
    whole.sum = max == -INFINITY ? 0.0 : sum;
    whole.max = max;
    whole.num = placed;
    write_summary(whole, temperature, p.out + r);
    scratch.counters[r] = 0u;  // ready for the next launch
  }
  __syncwarp();  // lane 0 completed `whole`
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
  const int64_t splits = row_splits(p.scratch, p.vocab, kMaxSplits, kMinSplitElements);
  if (splits <= 1) {
    row_candidates_kernel<<<static_cast<unsigned>(p.num_rows), kThreads, 0, stream>>>(p);
    return launch_status("row candidates");
  }
  const int64_t per_split = ceil_div(p.vocab, splits);
  const dim3 grid(static_cast<unsigned>(ceil_div(p.vocab, per_split)),
                  static_cast<unsigned>(p.num_rows));
  row_candidates_split_kernel<<<grid, kThreads, 0, stream>>>(p, per_split);
  return launch_status("row candidates");
}

size_t row_candidates_scratch_bytes(int32_t num_rows) {
  return row_split_scratch_bytes<Partial>(num_rows, kMaxSplits);
}

}  // namespace cellm::kernels
