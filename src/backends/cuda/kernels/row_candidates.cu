// row_candidates: one block per row or per part of it (row_candidates.cuh).
//
// A block reads its part once when it fits its registers (kHeldTiles tiles of kLoads values a
// thread: every split part does) and else streams it from L2 in every pass (a whole row in one
// block). A first pass finds a floor under the part's best kMaxCandidates values
// (candidate_floor). The next gathers the values at or above it in shared memory and places each
// by the number of gathered values that beat it (select_best; where ties or a sparse row gather
// too many, each warp keeps its best in a list, top_list.cuh, and the block merges the lists):
// the list, and its head the part's largest logit. Where the row needs its total (no top-k in the
// ask: a draw with a top-k never reads it), a last pass sums exp(v/T − max/T) in double — the
// product and the difference rounded apart (no fused multiply-add), as the host computes each term
// — over each thread's share, then over the block. Streamed passes keep kLoads values of each
// thread in flight (not a memory round trip per value); the row is read with ordinary loads so that
// later passes find it in L2. Split (with scratch), the last block of a row stages the parts' lists
// in shared memory, merges them the same way and rescales their sums to the row's largest logit
// (one more rounding per part than the host's terms: within the summation-order difference the
// sum already has). The first warp then draws the row's token from the list where the row asks
// (draw_token).
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

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
constexpr int kHeldTiles = 2;  // a part of at most this many tiles is read once, into registers
constexpr int64_t kHeldPart = kHeldTiles * kTile;
constexpr int kMaxSplits = 32;  // blocks a row; a longer row streams in one block per row
using top_list::kFull;
using WarpList = top_list::WarpList<kMaxCandidates>;

// This thread's kLoads values of the tile of row[begin, end) at `base` (row[base + j · kThreads +
// tid]), NaN past `end`, all loads issued before any is used.
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

  template <class F>
  __device__ __forceinline__ void for_each_tile(F&& f) const {
    for (int64_t base = begin; base < end; base += kTile) {
      float v[kLoads];
      load_tile(row, base, end, v);
      f(v, base);
    }
  }
};

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

// A floor under the best kMaxCandidates finite values of the part, so that the selection handles
// only the few values at or above it (on a random 8,192-value part about a hundred): each thread's
// largest finite value, each warp's kPerWarp-th largest of those (kPerWarp values of the warp at
// or above it), the smallest of the warps' (kWarps · kPerWarp = kMaxCandidates values at or above
// it). -infinity when the part has fewer finite values. Every thread calls it.
constexpr int kPerWarp = kMaxCandidates / kWarps;
static_assert(kPerWarp * kWarps == kMaxCandidates, "the warps' floors cover the list");

template <class Part>
__device__ float candidate_floor(const Part& part) {
  const int lane = static_cast<int>(threadIdx.x & 31);
  const int warp = static_cast<int>(threadIdx.x >> 5);
  float mine = -INFINITY;
  part.for_each_tile([&](const float(&v)[kLoads], int64_t) {
#pragma unroll
    for (int j = 0; j < kLoads; ++j) {
      if (isfinite(v[j])) mine = fmaxf(mine, v[j]);
    }
  });
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

// The values a block gathers to rank by counting: more at or above its floor (ties, or a part
// with fewer finite values than the list holds) select through the warps' lists instead.
constexpr int kMaxGathered = 512;

// The part's best kMaxCandidates finite pairs at or above `floor` into (best_value, best_id), best
// first; returns how many. The values at or above the floor — about kMaxCandidates on a real row,
// at least that many when the floor is finite — are gathered in shared memory and each placed at
// the number of gathered values that beat it (every value that beats a gathered one is gathered
// too). Beyond kMaxGathered of them, each warp keeps its best in a list (top_list.cuh: a value
// enters with a chain of shuffles) and the block merges the lists. Every thread calls it.
template <class Part>
__device__ int32_t select_best(const Part& part, float floor, float* best_value, int32_t* best_id) {
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
  const int warp_above = __reduce_add_sync(kFull, mine);
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
    for (int c = tid; c < above; c += kThreads) {
      const float v = gathered_value[c];
      const int32_t id = gathered_id[c];
      int rank = 0;
#pragma unroll 4
      for (int g = 0; g < above; ++g) {
        rank += top_list::beats(gathered_value[g], gathered_id[g], v, id);
      }
      if (rank < kMaxCandidates) {
        best_value[rank] = v;
        best_id[rank] = id;
      }
    }
    __syncthreads();
    return above < kMaxCandidates ? above : kMaxCandidates;
  }
  WarpList list;
  part.for_each_tile([&](const float(&v)[kLoads], int64_t base) {
#pragma unroll
    for (int j = 0; j < kLoads; ++j) {
      list.insert(isfinite(v[j]) && v[j] >= floor, v[j],
                  static_cast<int32_t>(base + j * kThreads + tid), lane);
    }
  });
  __shared__ float list_value[kWarps][32];
  __shared__ int32_t list_id[kWarps][32];
  list_value[warp][lane] = list.value;
  list_id[warp][lane] = lane < kMaxCandidates ? list.id : -1;
  __syncthreads();
  return top_list::merge_lists_counted<kMaxCandidates, kThreads>(
      &list_value[0][0], &list_id[0][0], 32, kWarps, kMaxCandidates, best_value, best_id);
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
  const int32_t num = select_best(part, candidate_floor(part), best_value, best_id);
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
  if (lane < num) {
    out->value[lane] = best_value[lane];
    out->id[lane] = best_id[lane];
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
  if (lane < whole.num) {
    out->ids[lane] = whole.id[lane];
    out->logits[lane] = whole.value[lane];
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

// One block per row (no scratch): a row of at most kHeldPart values held, a longer one streamed.
template <class Part>
__global__ void __launch_bounds__(kThreads) row_candidates_kernel(const RowCandidatesParams p) {
  const int32_t r = static_cast<int32_t>(blockIdx.x);
  const RowCandidatesAsk& ask = p.asks[r];
  const float temperature = ask.temperature;
  if (!(temperature > 0.0f)) return;  // the whole block: the row asked for nothing
  const float* row = p.logits + static_cast<int64_t>(r) * p.stride;
  __shared__ Partial whole;
  if constexpr (std::is_same_v<Part, HeldPart>) {
    block_partial(HeldPart(row, 0, p.vocab), needs_total(ask),
                  1.0 / static_cast<double>(temperature), &whole);
  } else {
    block_partial(StreamedPart{row, 0, p.vocab}, needs_total(ask),
                  1.0 / static_cast<double>(temperature), &whole);
  }
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
  const int64_t begin = static_cast<int64_t>(blockIdx.x) * per_split;
  const int64_t end = begin + per_split < p.vocab ? begin + per_split : p.vocab;
  const RowSplitScratch<Partial> scratch = row_split_scratch<Partial>(p.scratch, p.num_rows);
  Partial* partials = scratch.partials + static_cast<int64_t>(r) * kMaxSplits;
  block_partial(HeldPart(row, begin, end), with_sum, inv_temperature, partials + blockIdx.x);
  if (threadIdx.x < 32) {  // the first warp wrote the partial: visible before thread 0 counts it
    __threadfence();
    __syncwarp();
  }
  if (!row_split_block_is_last(&scratch.counters[r], splits)) return;
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
    scratch.counters[r] = 0u;  // ready for the next launch
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
  // Split: parts of kHeldPart values (read once each), as long as a row takes at most kMaxSplits.
  const int64_t splits = ceil_div(p.vocab, kHeldPart);
  if (p.scratch != nullptr && splits > 1 && splits <= kMaxSplits) {
    const dim3 grid(static_cast<unsigned>(splits), static_cast<unsigned>(p.num_rows));
    row_candidates_split_kernel<<<grid, kThreads, 0, stream>>>(p, kHeldPart);
  } else if (p.vocab <= kHeldPart) {
    row_candidates_kernel<HeldPart><<<static_cast<unsigned>(p.num_rows), kThreads, 0, stream>>>(p);
  } else {
    row_candidates_kernel<StreamedPart>
        <<<static_cast<unsigned>(p.num_rows), kThreads, 0, stream>>>(p);
  }
  return launch_status("row candidates");
}

size_t row_candidates_scratch_bytes(int32_t num_rows) {
  return row_split_scratch_bytes<Partial>(num_rows, kMaxSplits);
}

}  // namespace cellm::kernels
