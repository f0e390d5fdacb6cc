// device_step_pack: how a slice's CellStep is laid out as one block of int32 for the device
// (device_step.h), and the host function that packs it — cells turned into KvPool rows, padding
// rows appended up to the slice's static width (token 0 at position 0 of a dummy sequence whose
// only row is the scratch row), tokens grouped by sequence. Pure host code: no CUDA, so it is
// unit-tested everywhere; CudaCellCache packs into pinned memory with it and copies the block to
// the device in one piece. Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "backends/cuda/device_step.h"
#include "cache/cell_step.h"
#include "core/status.h"

namespace cellm {

// Offsets (int32 entries from the block's start) of the arrays of a block for slices up to
// `max_width` rows; every array starts on a 128-byte boundary. seq_rows comes last and is the
// only one whose length depends on the step.
struct DeviceStepLayout {
  size_t counts, tokens, positions, write_rows, token_seq, token_row_offsets, kept_rows,
      seq_row_offsets, seq_len, seq_pos_begin, seq_token_offsets, seq_tokens, seq_rows;

  static DeviceStepLayout for_width(int32_t max_width);
};

// The sizes a packed slice has (the host copy of DeviceStep's counts).
struct PackedStepSizes {
  int32_t num_tokens = 0;
  int32_t width = 0;
  int32_t num_seqs = 0;
  int32_t max_seq_len = 0;
  int32_t num_kept = 0;
  int32_t total_rows = 0;  // seq_rows entries, the dummy's included
  size_t num_ints = 0;     // entries of the block the slice uses: layout.seq_rows + total_rows
};

// Checks the slice (InvalidArgument naming what is wrong: tokens and cell step disagree, width
// outside [tokens, max_width], kept rows not ascending inside the slice) and returns its sizes.
StatusOr<PackedStepSizes> measure_device_step(const CellStep& cells,
                                              std::span<const int32_t> tokens,
                                              std::span<const int32_t> kept_rows, int32_t width,
                                              int32_t max_width);

// Packs a slice measure_device_step accepted into `block` (at least sizes.num_ints entries).
void pack_device_step(const CellStep& cells, std::span<const int32_t> tokens,
                      std::span<const int32_t> kept_rows, const PackedStepSizes& sizes,
                      const DeviceStepLayout& layout, std::span<int32_t> block);

}  // namespace cellm
