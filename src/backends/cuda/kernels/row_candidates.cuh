// row_candidates: what sampling at a temperature needs of a logits row when the draw stays among
// its best tokens — the row's kMaxCandidates best finite logits (the lower id first on ties) and,
// where the draw may read it, Σ exp(v/T − max/T) over its finite logits, each term in double as
// the host's sampler computes it — so that a sampled row need not be read on the host
// (batching/sampler.h's sample_from_candidates; its sampling_candidates is this kernel's oracle).
// One block per row, or with scratch a block per 8,192 logits (up to 32 a row; the last to finish
// merges them, as row_logprobs does): a part read once into registers (a longer row in one block
// is streamed from L2 by every pass), a pass finding a floor under its best values, one selecting
// above it, one summing. Rows whose temperature is not above 0 are skipped. A row that asks draws
// its token from its list too (core/listed_draw.h, the host sampler's draw), so that a step can
// start from it before the host has the list.
// Knows nothing of sessions or samplers. Stream-ordered, capturable. Thread-safety: launches on
// a stream.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "core/listed_draw.h"
#include "core/status.h"

namespace cellm::kernels {

inline constexpr int32_t kMaxCandidates = 64;  // the candidates a row lists

// One row's ask (plain values; the host writes them, the device reads them).
struct RowCandidatesAsk {
  float temperature = 0.0f;  // the row's T; <= 0 (or NaN): the row asks for nothing
  int32_t draw = 0;          // nonzero: also draw the token (RowCandidatesSummary::drawn)
  ListedDrawParams cuts;     // the draw's top-k, top-p and min-p; a top-k: no total (below)
  uint64_t seed = 0;         // the draw's draw_uniform(seed, position)
  int64_t position = 0;
};

// One row's candidates (plain values; the layout the device writes and the host reads).
struct RowCandidatesSummary {
  // Σ exp(v/T − max/T) over the finite v; 0 when none is finite; NaN when the ask's cuts hold a
  // top-k (a draw with a top-k never reads it: core/listed_draw.h), so the kernel skips the sum.
  double total;
  float max_logit;    // -infinity when no logit is finite
  float temperature;  // the row's T
  int32_t num;        // entries filled: min(kMaxCandidates, finite logits)
  // The token core/listed_draw.h draws from the list with the ask's cuts, seed and position, the
  // weights computed as the host's sampler computes them; kListedUndecided when the row asks for
  // no draw, has no finite logit, or the list does not decide it — unless row_draw.cuh then drew
  // it from the whole row (drawn_from_row 1).
  int32_t drawn;
  int32_t drawn_from_row;  // 1: `drawn` is row_draw's, from the whole row; 0: from the list
  float drawn_logit;       // with drawn_from_row: the drawn token's logit
  int32_t ids[kMaxCandidates];
  float logits[kMaxCandidates];
};

struct RowCandidatesParams {
  int32_t num_rows = 0;
  int64_t vocab = 0;
  const float* logits = nullptr;  // [num_rows, stride] f32
  int64_t stride = 0;
  const RowCandidatesAsk* asks = nullptr;  // [num_rows]: a temperature <= 0 (or NaN) skips the row
  RowCandidatesSummary* out = nullptr;     // [num_rows]; a skipped row's is not written
  // Optional: row_candidates_scratch_bytes(num_rows) bytes, zeroed before the first launch
  // (every launch leaves it zeroed), 16-byte aligned; null: one block per row.
  void* scratch = nullptr;
  size_t scratch_bytes = 0;
};

size_t row_candidates_scratch_bytes(int32_t num_rows);

// Checks the shape and the scratch (not the per-row values) and launches.
Status launch_row_candidates(const RowCandidatesParams& params, cudaStream_t stream);

}  // namespace cellm::kernels
