// row_logprobs: what log-probabilities need of a logits row, on the GPU — the largest finite
// logit, log Σ exp(v − max) over the finite logits, one scored token's logit and the best
// `num_top` finite logits (the lower id first on ties) — so that a row asking for them need not be
// copied to the host ([vocab] f32 each; 512 KB for a 128K vocabulary). The host's
// summarize_logprobs (batching/token_logprobs.h) computes the same and is this kernel's oracle.
// One block per row, or with scratch a block per 8,192 logits (up to 32 a row; the last to finish
// merges their partial results, as the split argmax does): a 128K row takes 13–14 µs split on the
// H200 (cuda_kernels_bench --sampling). Rows whose num_top is -1 are skipped. Knows nothing of
// sessions or samplers. Stream-ordered, capturable. Thread-safety: launches on a stream.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/status.h"

namespace cellm::kernels {

inline constexpr int32_t kMaxRowTop = 20;  // the most top tokens a row may ask for

// One row's summary (plain values; the layout the device writes and the host reads).
struct RowLogprobsSummary {
  double log_sum_exp;  // log Σ exp(v − max_logit) over the finite v; 0 when none is finite
  float max_logit;     // -infinity when no logit is finite
  float scored_logit;  // the scored token's logit; NaN when the row scored none
  int32_t num_top;     // entries of top_* filled: min(asked, finite logits)
  int32_t top_ids[kMaxRowTop];
  float top_logits[kMaxRowTop];
};

struct RowLogprobsParams {
  int32_t num_rows = 0;
  int64_t vocab = 0;
  const float* logits = nullptr;  // [num_rows, stride] f32
  int64_t stride = 0;
  const int32_t* num_top = nullptr;   // [num_rows]: -1 skips the row (its summary is not written)
  const int32_t* scored = nullptr;    // [num_rows]: a token in [0, vocab), or -1 for none
  RowLogprobsSummary* out = nullptr;  // [num_rows]
  // Optional: row_logprobs_scratch_bytes(num_rows) bytes, zeroed before the first launch (every
  // launch leaves it zeroed), 16-byte aligned; null runs one block per row.
  void* scratch = nullptr;
  size_t scratch_bytes = 0;
};

size_t row_logprobs_scratch_bytes(int32_t num_rows);

// Checks the shape and the scratch (not the per-row values: a num_top outside [-1, kMaxRowTop] is
// clamped to it, a scored token outside the vocabulary reads as none) and launches.
Status launch_row_logprobs(const RowLogprobsParams& params, cudaStream_t stream);

}  // namespace cellm::kernels
