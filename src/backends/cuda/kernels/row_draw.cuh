// row_draw: the token a session's sampler draws from a whole logits row, drawn on the device where
// the row's candidates (row_candidates.cuh) leave the draw undecided — a draw past the list, a
// nucleus or top-k past it — so that no sampled row without bias or penalties travels to the host,
// and a batch-1 session samples ahead on any cuts.
//
// The chain is batching/sampler.h's sample(), best first (higher logit, the lower id on ties):
// keep the top-k, sum the weights exp(v/T − max/T) (each computed as the host computes it), keep
// those ≥ min-p, the shortest prefix whose mass reaches top-p of the sum, and draw at
// draw_uniform(seed, position) of the kept mass. Each step is a selection by cumulative count or
// mass: a radix descent over the key (logit, id), 8 bits a pass, over the row split across a
// cluster of kRowDrawBlocks blocks that merge their histograms through distributed shared memory.
// Masses are fixed-point integers (each weight × 2^(63 − bits of the vocabulary), rounded), so the
// sums are exact and the draw is the same on every run; against the host's double sums the token
// differs only where the draw falls within the rounding of a boundary (each weight to 2^-(S+1)
// for 2^S a weight of 1, S = min(46, 63 − bits of the vocabulary): about 10^-9 of the total at
// a 128K vocabulary).
//
// A row is drawn only where its ask draws (RowCandidatesAsk::draw, a temperature above 0) and its
// summary says the list did not decide it and something is finite; other rows are left as they
// are. Knows nothing of sessions or samplers. Who calls it: CudaExecutor after the candidates.
// Stream-ordered, capturable. Thread-safety: launches on a stream.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/kernels/row_candidates.cuh"
#include "core/status.h"

namespace cellm::kernels {

inline constexpr int kRowDrawBlocks = 8;                    // a row's cluster
inline constexpr int64_t kRowDrawMaxVocab = 8 * 48 * 1024;  // a block's part in shared memory

struct RowDrawParams {
  int32_t num_rows = 0;
  int64_t vocab = 0;              // <= kRowDrawMaxVocab
  const float* logits = nullptr;  // [num_rows, stride] f32
  int64_t stride = 0;
  const RowCandidatesAsk* asks = nullptr;  // [num_rows]
  // [num_rows]: row_candidates' summaries of the same rows and asks. A row drawn here gets
  // `drawn` (the token), `drawn_from_row` 1 and `drawn_logit`; the rest is left as it is.
  RowCandidatesSummary* summaries = nullptr;
};

// Checks the shape (not the per-row values) and launches.
Status launch_row_draw(const RowDrawParams& params, cudaStream_t stream);

}  // namespace cellm::kernels
