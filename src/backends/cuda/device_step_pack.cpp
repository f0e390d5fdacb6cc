#include "backends/cuda/device_step_pack.h"

#include <algorithm>
#include <string>

#include "core/check.h"

namespace cellm {

DeviceStepLayout DeviceStepLayout::for_width(int32_t max_width) {
  const size_t width = static_cast<size_t>(max_width);
  DeviceStepLayout l{};
  size_t at = 0;
  const auto take = [&at](size_t n) {
    const size_t start = at;
    at += (n + 31) / 32 * 32;  // 128-byte alignment for every array
    return start;
  };
  l.counts = take(kNumDeviceStepCounts);
  l.tokens = take(width);
  l.positions = take(width);
  l.write_rows = take(width);
  l.token_seq = take(width);
  l.token_row_offsets = take(width);
  l.kept_rows = take(width);
  l.seq_row_offsets = take(width + 2);
  l.seq_len = take(width + 1);
  l.seq_pos_begin = take(width + 1);
  l.seq_token_offsets = take(width + 2);
  l.seq_tokens = take(width);
  l.seq_rows = at;
  return l;
}

StatusOr<PackedStepSizes> measure_device_step(const CellStep& cells,
                                              std::span<const int32_t> tokens,
                                              std::span<const int32_t> kept_rows, int32_t width,
                                              int32_t max_width) {
  const int32_t num_tokens = static_cast<int32_t>(tokens.size());
  if (cells.num_tokens != num_tokens || num_tokens < 1 || width < num_tokens || width > max_width ||
      static_cast<int32_t>(kept_rows.size()) > num_tokens) {
    return invalid_argument("device step: a slice of " + std::to_string(num_tokens) +
                            " tokens (cell step of " + std::to_string(cells.num_tokens) + ", " +
                            std::to_string(kept_rows.size()) + " kept) at width " +
                            std::to_string(width) + " (max " + std::to_string(max_width) + ")");
  }
  for (size_t i = 0; i < kept_rows.size(); ++i) {
    if (kept_rows[i] < 0 || kept_rows[i] >= num_tokens ||
        (i > 0 && kept_rows[i] <= kept_rows[i - 1])) {
      return invalid_argument("device step: kept rows must ascend inside [0, " +
                              std::to_string(num_tokens) + ")");
    }
  }
  PackedStepSizes sizes;
  sizes.num_tokens = num_tokens;
  sizes.width = width;
  sizes.num_seqs = cells.num_seqs;
  sizes.max_seq_len = 1;
  for (int32_t s = 0; s < cells.num_seqs; ++s) {
    sizes.max_seq_len = std::max(sizes.max_seq_len, cells.seq_len[static_cast<size_t>(s)]);
  }
  sizes.num_kept = static_cast<int32_t>(kept_rows.size());
  sizes.total_rows = cells.seq_cell_offsets[static_cast<size_t>(cells.num_seqs)] + 1;
  sizes.num_ints =
      DeviceStepLayout::for_width(max_width).seq_rows + static_cast<size_t>(sizes.total_rows);
  return sizes;
}

void pack_device_step(const CellStep& cells, std::span<const int32_t> tokens,
                      std::span<const int32_t> kept_rows, const PackedStepSizes& sizes,
                      const DeviceStepLayout& layout, std::span<int32_t> block) {
  CELLM_CHECK(block.size() >= sizes.num_ints)
      << "device step block of " << block.size() << " ints for " << sizes.num_ints;
  int32_t* h = block.data();
  const int32_t num_tokens = sizes.num_tokens;
  const int32_t width = sizes.width;
  const int32_t num_seqs = sizes.num_seqs;
  const int32_t real_rows = sizes.total_rows - 1;
  int32_t* counts = h + layout.counts;
  std::fill(counts, counts + kNumDeviceStepCounts, 0);
  counts[kCountNumTokens] = num_tokens;
  counts[kCountWidth] = width;
  counts[kCountNumSeqs] = num_seqs;
  counts[kCountMaxSeqLen] = sizes.max_seq_len;
  counts[kCountNumKept] = sizes.num_kept;
  counts[kCountTotalRows] = sizes.total_rows;

  // Per token row: the real ones, then padding.
  std::copy(tokens.begin(), tokens.end(), h + layout.tokens);
  std::copy(cells.token_pos.begin(), cells.token_pos.end(), h + layout.positions);
  std::copy(cells.token_step_seq.begin(), cells.token_step_seq.end(), h + layout.token_seq);
  for (int32_t t = 0; t < num_tokens; ++t) {
    h[layout.write_rows + t] = cells.token_cell[static_cast<size_t>(t)] + kFirstCellRow;
  }
  for (int32_t t = 0; t < num_tokens; ++t) {
    h[layout.token_row_offsets + t] =
        cells.seq_cell_offsets[static_cast<size_t>(cells.token_step_seq[static_cast<size_t>(t)])];
  }
  for (int32_t t = num_tokens; t < width; ++t) {
    h[layout.tokens + t] = 0;
    h[layout.positions + t] = 0;
    h[layout.write_rows + t] = kScratchRow;
    h[layout.token_seq + t] = num_seqs;
    h[layout.token_row_offsets + t] = real_rows;  // the dummy's scratch row
  }
  std::copy(kept_rows.begin(), kept_rows.end(), h + layout.kept_rows);
  std::fill(h + layout.kept_rows + kept_rows.size(), h + layout.kept_rows + width, 0);

  // Per sequence: the real ones, then the dummy.
  std::copy(cells.seq_cell_offsets.begin(), cells.seq_cell_offsets.end(),
            h + layout.seq_row_offsets);
  h[layout.seq_row_offsets + num_seqs + 1] = sizes.total_rows;
  std::copy(cells.seq_len.begin(), cells.seq_len.end(), h + layout.seq_len);
  h[layout.seq_len + num_seqs] = 1;
  std::copy(cells.seq_pos_begin.begin(), cells.seq_pos_begin.end(), h + layout.seq_pos_begin);
  h[layout.seq_pos_begin + num_seqs] = 0;

  // Token rows grouped by sequence: a stable counting sort, so ascending within a sequence.
  int32_t* offsets = h + layout.seq_token_offsets;  // [num_seqs + 2]
  std::fill(offsets, offsets + num_seqs + 2, 0);
  for (int32_t t = 0; t < num_tokens; ++t) {
    ++offsets[cells.token_step_seq[static_cast<size_t>(t)] + 1];
  }
  offsets[num_seqs + 1] = width - num_tokens;
  for (int32_t s = 0; s <= num_seqs; ++s) offsets[s + 1] += offsets[s];
  int32_t* seq_tokens = h + layout.seq_tokens;
  // offsets[s] serves as sequence s's cursor, then is moved back to its start.
  for (int32_t t = 0; t < num_tokens; ++t) {
    seq_tokens[offsets[cells.token_step_seq[static_cast<size_t>(t)]]++] = t;
  }
  for (int32_t t = num_tokens; t < width; ++t) seq_tokens[offsets[num_seqs]++] = t;
  for (int32_t s = num_seqs; s >= 1; --s) offsets[s] = offsets[s - 1];
  offsets[0] = 0;

  // Cell lists as rows, then the dummy's scratch row.
  int32_t* rows = h + layout.seq_rows;
  for (int32_t i = 0; i < real_rows; ++i) {
    rows[i] = cells.seq_cells[static_cast<size_t>(i)] + kFirstCellRow;
  }
  rows[real_rows] = kScratchRow;
}

}  // namespace cellm
