#include "backends/cuda/device_step_pack.h"

#include <gtest/gtest.h>

#include <vector>

#include "cache/cell_cache.h"

namespace cellm {
namespace {

using Ints = std::vector<int32_t>;

CellStep place(CellCache& cache, const std::vector<SeqId>& seqs) {
  const StatusOr<bool> admitted = cache.declare_step(seqs);
  EXPECT_TRUE(admitted.ok() && *admitted);
  return cache.place();
}

// The `n` entries of `block` at `offset`.
Ints slice(const Ints& block, size_t offset, size_t n) {
  return Ints(block.begin() + static_cast<ptrdiff_t>(offset),
              block.begin() + static_cast<ptrdiff_t>(offset + n));
}

TEST(DeviceStepPackTest, AnInterleavedStepBecomesRowsWithPaddingOnADummySequence) {
  CellCache cells(64);
  const SeqId a = cells.seq_new();
  const SeqId b = cells.seq_new();
  const SeqId c = cells.seq_new();
  place(cells, {a, a, a, b, b});
  const CellStep step = place(cells, {b, a, c, a});  // sequences: b (3 cells), a (5), c (1)
  const Ints tokens = {11, 12, 13, 14};
  const Ints kept = {1, 3};
  const auto sizes = measure_device_step(step, tokens, kept, /*width=*/8, /*max_width=*/16);
  ASSERT_TRUE(sizes.ok()) << sizes.status().to_string();
  EXPECT_EQ(sizes->num_tokens, 4);
  EXPECT_EQ(sizes->width, 8);
  EXPECT_EQ(sizes->num_seqs, 3);
  EXPECT_EQ(sizes->max_seq_len, 5);
  EXPECT_EQ(sizes->num_kept, 2);
  EXPECT_EQ(sizes->total_rows, 10);
  const DeviceStepLayout layout = DeviceStepLayout::for_width(16);
  EXPECT_EQ(sizes->num_ints, layout.seq_rows + 10);
  Ints block(sizes->num_ints, -7);
  pack_device_step(step, tokens, kept, *sizes, layout, block);

  EXPECT_EQ(slice(block, layout.counts, 6), (Ints{4, 8, 3, 5, 2, 10}));
  EXPECT_EQ(slice(block, layout.tokens, 8), (Ints{11, 12, 13, 14, 0, 0, 0, 0}));
  EXPECT_EQ(slice(block, layout.positions, 8), (Ints{2, 3, 0, 4, 0, 0, 0, 0}));
  Ints write_rows(8, kScratchRow);
  for (int32_t t = 0; t < 4; ++t) write_rows[t] = step.token_cell[t] + kFirstCellRow;
  EXPECT_EQ(slice(block, layout.write_rows, 8), write_rows);
  EXPECT_EQ(slice(block, layout.token_seq, 8), (Ints{0, 1, 2, 1, 3, 3, 3, 3}));
  // Each token's sequence's first row: b's at 0, a's at 3, c's at 8, the dummy's at 9.
  EXPECT_EQ(slice(block, layout.token_row_offsets, 8), (Ints{0, 3, 8, 3, 9, 9, 9, 9}));
  EXPECT_EQ(slice(block, layout.kept_rows, 8), (Ints{1, 3, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(slice(block, layout.seq_row_offsets, 5), (Ints{0, 3, 8, 9, 10}));
  EXPECT_EQ(slice(block, layout.seq_len, 4), (Ints{3, 5, 1, 1}));
  EXPECT_EQ(slice(block, layout.seq_pos_begin, 4), (Ints{2, 3, 0, 0}));
  EXPECT_EQ(slice(block, layout.seq_token_offsets, 5), (Ints{0, 1, 3, 4, 8}));
  EXPECT_EQ(slice(block, layout.seq_tokens, 8), (Ints{0, 1, 3, 2, 4, 5, 6, 7}));
  // b's cells, a's cells, c's cell, then the scratch row; cell k is row k + 1.
  Ints rows;
  for (const SeqId s : {b, a, c}) {
    for (const int32_t cell : cells.cells(s)) rows.push_back(cell + 1);
  }
  rows.push_back(0);
  EXPECT_EQ(slice(block, layout.seq_rows, 10), rows);
}

TEST(DeviceStepPackTest, AFullWidthSliceHasAnEmptyDummySequence) {
  CellCache cells(16);
  const SeqId a = cells.seq_new();
  const CellStep step = place(cells, {a, a, a});
  const Ints tokens = {5, 6, 7};
  const auto sizes = measure_device_step(step, tokens, Ints{2}, 3, 4);
  ASSERT_TRUE(sizes.ok());
  const DeviceStepLayout layout = DeviceStepLayout::for_width(4);
  Ints block(sizes->num_ints, -7);
  pack_device_step(step, tokens, Ints{2}, *sizes, layout, block);
  EXPECT_EQ(slice(block, layout.seq_token_offsets, 3), (Ints{0, 3, 3}));
  EXPECT_EQ(slice(block, layout.seq_tokens, 3), (Ints{0, 1, 2}));
  EXPECT_EQ(slice(block, layout.seq_row_offsets, 3), (Ints{0, 3, 4}));
  EXPECT_EQ(slice(block, layout.seq_rows, 4), (Ints{1, 2, 3, 0}));
  EXPECT_EQ(slice(block, layout.kept_rows, 3), (Ints{2, 0, 0}));
}

TEST(DeviceStepPackTest, ArraysStartOn128ByteBoundariesAndDoNotOverlap) {
  for (const int32_t w : {1, 5, 32, 512}) {
    const DeviceStepLayout l = DeviceStepLayout::for_width(w);
    const std::vector<std::pair<size_t, size_t>> arrays = {{l.counts, kNumDeviceStepCounts},
                                                           {l.tokens, w},
                                                           {l.positions, w},
                                                           {l.write_rows, w},
                                                           {l.token_seq, w},
                                                           {l.kept_rows, w},
                                                           {l.seq_row_offsets, w + 2},
                                                           {l.seq_len, w + 1},
                                                           {l.seq_pos_begin, w + 1},
                                                           {l.seq_token_offsets, w + 2},
                                                           {l.seq_tokens, w},
                                                           {l.seq_rows, 0}};
    for (size_t i = 0; i < arrays.size(); ++i) {
      EXPECT_EQ(arrays[i].first % 32, 0u) << "array " << i << " at width " << w;
      if (i > 0) {
        EXPECT_GE(arrays[i].first, arrays[i - 1].first + arrays[i - 1].second);
      }
    }
  }
}

TEST(DeviceStepPackTest, BadSlicesAreRefused) {
  CellCache cells(16);
  const SeqId a = cells.seq_new();
  const CellStep step = place(cells, {a, a});
  const Ints two = {1, 2};
  EXPECT_EQ(measure_device_step(step, two, {}, 8, 4).status().code(), StatusCode::kInvalidArgument)
      << "wider than max_width";
  EXPECT_EQ(measure_device_step(step, two, {}, 1, 4).status().code(), StatusCode::kInvalidArgument)
      << "narrower than the tokens";
  EXPECT_EQ(measure_device_step(step, Ints{1}, {}, 2, 4).status().code(),
            StatusCode::kInvalidArgument)
      << "tokens and cell step disagree";
  EXPECT_EQ(measure_device_step(step, two, Ints{1, 0}, 2, 4).status().code(),
            StatusCode::kInvalidArgument)
      << "kept rows not ascending";
  EXPECT_EQ(measure_device_step(step, two, Ints{2}, 2, 4).status().code(),
            StatusCode::kInvalidArgument)
      << "kept row outside the slice";
  EXPECT_TRUE(measure_device_step(step, two, Ints{1}, 2, 4).ok());
}

}  // namespace
}  // namespace cellm
