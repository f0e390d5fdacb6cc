// row_candidates: one block per row, two passes over it (row_candidates.cuh).
//
// Pass one keeps each warp's best kMaxCandidates finite (logit, id) pairs (top_list.cuh) and the
// first warp merges them: the list, and its head the row's largest logit. Pass two, with that
// maximum known, sums exp(v/T − max/T) in double — the product and the difference rounded apart
// (no fused multiply-add), as the host computes each term — over each thread's share, then over
// the block. The row is read with ordinary loads so that pass two finds it in L2.
#include <cmath>
#include <cstdint>
#include <string>

#include "backends/cuda/kernels/launch_status.h"
#include "backends/cuda/kernels/row_candidates.cuh"
#include "backends/cuda/kernels/top_list.cuh"

namespace cellm::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kLoads = 16;  // values in flight per thread
using top_list::kFull;
using WarpList = top_list::WarpList<kMaxCandidates>;

__global__ void __launch_bounds__(kThreads) row_candidates_kernel(const RowCandidatesParams p) {
  const int32_t r = static_cast<int32_t>(blockIdx.x);
  const float temperature = p.temperature[r];
  if (!(temperature > 0.0f)) return;  // the whole block: the row asked for nothing
  const float* row = p.logits + static_cast<int64_t>(r) * p.stride;
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid & 31;
  const int warp = tid >> 5;

  // Pass one: the warps' lists, then the block's.
  WarpList list;
  constexpr int64_t kTile = static_cast<int64_t>(kThreads) * kLoads;
  for (int64_t base = 0; base < p.vocab; base += kTile) {
    float v[kLoads];
#pragma unroll
    for (int j = 0; j < kLoads; ++j) {
      const int64_t i = base + j * kThreads + tid;
      v[j] = i < p.vocab ? row[i] : NAN;
    }
#pragma unroll
    for (int j = 0; j < kLoads; ++j) {
      list.insert(isfinite(v[j]), v[j], static_cast<int32_t>(base + j * kThreads + tid), lane);
    }
  }
  __shared__ float list_value[kWarps][32];
  __shared__ int32_t list_id[kWarps][32];
  __shared__ float best_value[kMaxCandidates];
  __shared__ int32_t best_id[kMaxCandidates];
  __shared__ int32_t num_best;
  list_value[warp][lane] = list.value;
  list_id[warp][lane] = lane < kMaxCandidates ? list.id : -1;
  __syncthreads();
  if (warp == 0) {
    const int32_t placed = top_list::merge_lists<kMaxCandidates>(
        kWarps, kMaxCandidates,
        [&](int w, int k, float* value, int32_t* id) {
          *value = list_value[w][k];
          *id = list_id[w][k];
        },
        best_value, best_id);
    if (lane == 0) num_best = placed;
  }
  __syncthreads();
  RowCandidatesSummary* out = p.out + r;
  const int32_t num = num_best;
  if (num == 0) {  // nothing finite
    if (tid == 0) {
      out->total = 0.0;
      out->max_logit = -INFINITY;
      out->temperature = temperature;
      out->num = 0;
    }
    return;
  }

  // Pass two: the normalizer at T, each term as the host's exp(v · (1/T) − max · (1/T)).
  const double inv_temperature = 1.0 / static_cast<double>(temperature);
  const double top = __dmul_rn(static_cast<double>(best_value[0]), inv_temperature);
  double sum = 0.0;
  for (int64_t i = tid; i < p.vocab; i += kThreads) {
    const float v = row[i];
    if (isfinite(v)) sum += exp(__dsub_rn(__dmul_rn(static_cast<double>(v), inv_temperature), top));
  }
  for (int offset = 16; offset > 0; offset >>= 1) sum += __shfl_xor_sync(kFull, sum, offset);
  __shared__ double warp_sum[kWarps];
  if (lane == 0) warp_sum[warp] = sum;
  __syncthreads();
  if (tid == 0) {
    double total = 0.0;
    for (int w = 0; w < kWarps; ++w) total += warp_sum[w];
    out->total = total;
    out->max_logit = best_value[0];
    out->temperature = temperature;
    out->num = num;
  }
  if (tid < num) {
    out->ids[tid] = best_id[tid];
    out->logits[tid] = best_value[tid];
  }
}

}  // namespace

Status launch_row_candidates(const RowCandidatesParams& p, cudaStream_t stream) {
  if (p.num_rows < 0 || p.vocab <= 0 || p.vocab > 2147483647 || p.stride < p.vocab ||
      (p.num_rows > 0 && (p.logits == nullptr || p.temperature == nullptr || p.out == nullptr))) {
    return invalid_argument("row candidates: " + std::to_string(p.num_rows) + " rows of " +
                            std::to_string(p.vocab) + " logits, stride " +
                            std::to_string(p.stride) + ", or a null pointer");
  }
  if (p.num_rows == 0) return ok_status();
  row_candidates_kernel<<<static_cast<unsigned>(p.num_rows), kThreads, 0, stream>>>(p);
  return launch_status("row candidates");
}

}  // namespace cellm::kernels
