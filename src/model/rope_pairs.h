// rope_pairs: where the rotary pairs of a query or key head sit. Hugging Face's rotate_half (neox)
// pairs dim i of a head with dim i + n_rot / 2; GGUF's llama layout (normal) pairs 2i with 2i + 1;
// dims from n_rot on do not rotate. Reordering a projection's rows from one layout to the other
// leaves q · k unchanged when q and k are reordered alike. Who calls it: HfCheckpoint (llama and
// mistral checkpoints become GGUF's layout, as llama.cpp's converter permutes them) and
// CudaWeights (a neox model's q and k rows uploaded in normal order). Thread-safety: pure.
#pragma once

#include <cstdint>

namespace cellm {

// The row of the neox layout that becomes row `row` of the normal layout, in a matrix (or
// vector) of whole heads of `head_dim` rows whose leading `num_rotary_dims` rotate (even).
inline int64_t neox_source_row(int64_t row, int32_t head_dim, int32_t num_rotary_dims) {
  const int64_t head = row / head_dim;
  const int64_t d = row % head_dim;  // 2j + t in the normal layout
  if (d >= num_rotary_dims) return row;
  return head * head_dim + (d % 2) * (num_rotary_dims / 2) + d / 2;
}

}  // namespace cellm
