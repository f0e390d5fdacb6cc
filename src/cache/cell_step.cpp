#include "cache/cell_step.h"

#include <algorithm>

#include "core/check.h"

namespace cellm {

PositionRange visible_range(int32_t pos, int32_t window) {
  CELLM_CHECK(pos >= 0 && window >= 0)
      << "visible_range(pos " << pos << ", window " << window << ")";
  const int32_t begin = window == 0 ? 0 : std::max(0, pos - window + 1);
  return {begin, pos + 1};
}

std::span<const int32_t> CellStep::cells_of(int32_t step_seq) const {
  CELLM_CHECK(step_seq >= 0 && step_seq < num_seqs)
      << "step sequence " << step_seq << " outside [0, " << num_seqs << ")";
  return std::span<const int32_t>(seq_cells).subspan(seq_cell_offsets[step_seq], seq_len[step_seq]);
}

std::span<const int32_t> CellStep::visible_cells(int32_t token, int32_t window) const {
  CELLM_CHECK(token >= 0 && token < num_tokens)
      << "token " << token << " outside [0, " << num_tokens << ")";
  const PositionRange range = visible_range(token_pos[token], window);
  return cells_of(token_step_seq[token]).subspan(range.begin, range.size());
}

}  // namespace cellm
