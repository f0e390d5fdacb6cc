// CellStep: where one step's tokens write their K/V and which cells each of them may read.
//
// Plain data, produced by CellCache::place() and owned by the caller: ids, counts and flat int32
// vectors, no pointer into the cache, so it stays valid after the cache changes and can be
// uploaded to a device as is (every array below is one contiguous int32 copy). A forward uses it
// as follows, for token t in layer l of window w (0 = full attention):
//   write K/V of t to cell token_cell[t];
//   s = token_step_seq[t]; r = visible_range(token_pos[t], w);
//   attend over seq_cells[seq_cell_offsets[s] + r.begin, seq_cell_offsets[s] + r.end)
// (visible_cells(t, w) gives that span). A token sees only its own sequence's cells at positions
// [0, its position] (narrowed by the window), never a later token of the same step, never another
// sequence's cells. It knows nothing of tensors or layers. Thread-safety: a plain value.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace cellm {

// A sequence of the cell cache. Ids of removed sequences may be reused by later seq_new().
using SeqId = int32_t;

// A half-open range [begin, end) of positions, which are also indices into a cell list.
struct PositionRange {
  int32_t begin = 0;
  int32_t end = 0;
  int32_t size() const { return end - begin; }
};

// The positions a token at `pos` sees in a layer of window `window` (0 = full attention):
// [max(0, pos - window + 1), pos + 1). Requires pos >= 0, window >= 0.
PositionRange visible_range(int32_t pos, int32_t window);

struct CellStep {
  int32_t num_tokens = 0;  // tokens placed by the step
  int32_t num_seqs = 0;    // distinct sequences among them, numbered by first appearance

  // Per token, in the order the step declared them.
  std::vector<SeqId> token_seq;         // [num_tokens] the token's sequence
  std::vector<int32_t> token_pos;       // [num_tokens] its position; ascending within a sequence
  std::vector<int32_t> token_cell;      // [num_tokens] the cell its K/V is written to (distinct)
  std::vector<int32_t> token_step_seq;  // [num_tokens] index of its sequence in the arrays below

  // Per sequence of the step, in order of first appearance.
  std::vector<SeqId> seq_id;           // [num_seqs] distinct
  std::vector<int32_t> seq_pos_begin;  // [num_seqs] its length before the step (first new position)
  std::vector<int32_t> seq_len;        // [num_seqs] its length after the step (context length)
  // [num_seqs + 1] CSR offsets into seq_cells; seq_cell_offsets[0] = 0 and
  // seq_cell_offsets[s + 1] - seq_cell_offsets[s] = seq_len[s].
  std::vector<int32_t> seq_cell_offsets;
  // [seq_cell_offsets[num_seqs]] every sequence's full cell list: position p of step sequence s
  // lives in seq_cells[seq_cell_offsets[s] + p]. The sum fits int32 (declare_step checks it).
  std::vector<int32_t> seq_cells;
  int32_t max_seq_len = 0;  // max of seq_len (0 when empty): sizes attention scratch / grids

  // The whole cell list of step sequence s (positions [0, seq_len[s])).
  std::span<const int32_t> cells_of(int32_t step_seq) const;
  // The cells token t reads in a layer of window `window` (0 = full), oldest position first.
  std::span<const int32_t> visible_cells(int32_t token, int32_t window) const;
};

}  // namespace cellm
