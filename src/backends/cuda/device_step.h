// DeviceStep: one slice's placement (a CellStep, cache/cell_step.h) as int32 arrays in device
// memory, in the form the forward's kernels read — the contract between CudaCellCache, which
// uploads it, and the kernels.
//
// Rows, not cells: K/V row r of a KvPool holds cell r - kFirstCellRow; row kScratchRow belongs to
// no cell and takes the K/V of padding tokens. A slice runs `width` token rows: the first
// num_tokens are real, the rest padding (token 0 at position 0 of a dummy sequence, index
// num_seqs, whose only cell is the scratch row), so every array below is valid up to `width` and
// a kernel captured at a static width may read it whatever the step holds; sizes that change per
// step (num_tokens, num_seqs, max_seq_len, num_kept) are in `counts` on the device as well.
// Token t in a layer of window w (0 = full) attends to step sequence s = token_seq[t] at
// positions [max(0, positions[t] + 1 - w), positions[t] + 1), i.e. rows
// seq_rows[seq_row_offsets[s] + p]. The pointers stay fixed for a CudaCellCache's life.
// Plain data; no CUDA types. Thread-safety: a plain value.
#pragma once

#include <cstdint>

namespace cellm {

inline constexpr int32_t kScratchRow = 0;    // the K/V row of padding tokens
inline constexpr int32_t kFirstCellRow = 1;  // cell c lives in row c + kFirstCellRow

// Indices into DeviceStep::counts.
enum DeviceStepCount : int32_t {
  kCountNumTokens = 0,  // real tokens
  kCountWidth = 1,      // token rows run (real + padding)
  kCountNumSeqs = 2,    // real sequences (the dummy is index num_seqs)
  kCountMaxSeqLen = 3,  // longest context among real sequences (>= 1 with the dummy)
  kCountNumKept = 4,    // kept rows
  kCountTotalRows = 5,  // entries of seq_rows (dummy included)
  kNumDeviceStepCounts = 8,
};

struct DeviceStep {
  // ---- Device pointers (int32), fixed addresses ----
  const int32_t* counts = nullptr;      // [kNumDeviceStepCounts]
  const int32_t* tokens = nullptr;      // [width] token ids (padding: 0)
  const int32_t* positions = nullptr;   // [width] (padding: 0)
  const int32_t* write_rows = nullptr;  // [width] K/V row each token writes (padding: scratch)
  const int32_t* token_seq = nullptr;   // [width] step sequence of each token (padding: num_seqs)
  const int32_t* token_row_offsets = nullptr;  // [width] seq_row_offsets[token_seq[t]]
  const int32_t* kept_rows = nullptr;          // [width] kept token rows, ascending (padded with 0)
  const int32_t* seq_row_offsets = nullptr;    // [num_seqs + 2] CSR offsets into seq_rows
  const int32_t* seq_len = nullptr;            // [num_seqs + 1] context length after the slice
  const int32_t* seq_pos_begin = nullptr;      // [num_seqs + 1] first position the slice writes
  const int32_t* seq_token_offsets = nullptr;  // [num_seqs + 2] CSR offsets into seq_tokens
  const int32_t* seq_tokens = nullptr;         // [width] token rows of each sequence, ascending
  const int32_t* seq_rows = nullptr;           // [total_rows] each sequence's rows by position

  // ---- The same sizes on the host (for eager launches and copies) ----
  int32_t num_tokens = 0;
  int32_t width = 0;
  int32_t num_seqs = 0;
  int32_t max_seq_len = 0;
  int32_t num_kept = 0;
  int32_t total_rows = 0;
  int32_t capacity_width = 0;  // the widest slice the arrays hold (the cache's max width)
};

}  // namespace cellm
