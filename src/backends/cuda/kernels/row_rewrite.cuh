// row_rewrite: a session sampler's logit bias and repetition, presence and frequency penalties
// applied to its logits row on the device, in place, before the row's candidates are listed and
// drawn (row_candidates.cuh, row_draw.cuh) — so that a sampler with bias or penalties draws on the
// device too, from exactly the scores the host's Sampler::sample() computes (core/score_rewrite.h's
// rewrite_score, single roundings on both sides).
//
// One thread per listed (row, token): the caller lists each token a row's rewrite touches once
// (batching/sampler.h's rewrite_for), so no two threads write one logit. Entries naming a row or a
// token outside the launch's rows or vocabulary are skipped (the host sampler skips a context
// token past the vocabulary too). Knows nothing of sessions or samplers. Who calls it:
// CudaExecutor, after the log-probability summaries and before the candidates. Stream-ordered,
// capturable. Thread-safety: launches on a stream.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/score_rewrite.h"
#include "core/status.h"

namespace cellm::kernels {

// One token of one row (24 bytes).
struct RowRewriteEntry {
  int32_t row = 0;         // the logits row, counted from RowRewriteParams::first_row
  int32_t token = 0;       // the logit it rewrites
  int32_t count = 0;       // occurrences in the penalty window (0: no penalty)
  int32_t first_bias = 0;  // biases[first_bias, first_bias + num_biases) are added in order
  int32_t num_biases = 0;
  int32_t penalties = 0;  // its row's penalties: RowRewriteParams::penalties[penalties]
};

struct RowRewriteParams {
  int32_t num_entries = 0;
  const RowRewriteEntry* entries = nullptr;  // [num_entries], distinct (row, token) pairs
  const float* biases = nullptr;             // indexed by the entries
  const PenaltyParams* penalties = nullptr;  // indexed by the entries
  int32_t first_row = 0;                     // entries' rows are logits rows + first_row
  int32_t num_rows = 0;                      // rows the logits hold
  int64_t vocab = 0;
  float* logits = nullptr;  // [num_rows, stride] f32, rewritten in place
  int64_t stride = 0;
};

// Checks the shape (not the entries' values) and launches; nothing for no entries.
Status launch_row_rewrite(const RowRewriteParams& params, cudaStream_t stream);

}  // namespace cellm::kernels
