#include "backends/cuda/cuda_cell_cache.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <vector>

#include "backends/cuda/cuda_test_util.h"
#include "cache/cell_cache.h"

namespace cellm {
namespace {

using Ints = std::vector<int32_t>;

class CudaCellCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(testing::require_cuda_device());
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), cudaSuccess);
  }
  void TearDown() override {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  // Places a step of tokens appended to `seqs` (in order) in `cache`.
  static CellStep place(CellCache& cache, const std::vector<SeqId>& seqs) {
    const StatusOr<bool> admitted = cache.declare_step(seqs);
    EXPECT_TRUE(admitted.ok() && *admitted);
    return cache.place();
  }

  cudaStream_t stream_ = nullptr;
};

TEST_F(CudaCellCacheTest, UploadRoundTripsAnInterleavedStepWithPadding) {
  CellCache cells(64);
  const SeqId a = cells.seq_new();
  const SeqId b = cells.seq_new();
  const SeqId c = cells.seq_new();
  place(cells, {a, a, a, b, b});
  const CellStep step = place(cells, {b, a, c, a});
  // Sequences by first appearance: b (3 cells), a (5), c (1).
  ASSERT_EQ(step.num_seqs, 3);

  auto created = CudaCellCache::create({/*max_width=*/16, /*max_session_tokens=*/32, 0});
  ASSERT_TRUE(created.ok()) << created.status().to_string();
  CudaCellCache& cache = **created;
  const Ints tokens = {11, 12, 13, 14};
  const Ints kept = {1, 3};
  const int32_t width = 8;
  auto uploaded = cache.upload(step, tokens, kept, width, stream_);
  ASSERT_TRUE(uploaded.ok()) << uploaded.status().to_string();
  const DeviceStep& d = *uploaded;
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);

  EXPECT_EQ(d.num_tokens, 4);
  EXPECT_EQ(d.width, 8);
  EXPECT_EQ(d.num_seqs, 3);
  EXPECT_EQ(d.max_seq_len, 5);
  EXPECT_EQ(d.num_kept, 2);
  EXPECT_EQ(d.total_rows, 3 + 5 + 1 + 1);
  const Ints counts = testing::copy_ints(d.counts, 6);
  EXPECT_EQ(counts, (Ints{4, 8, 3, 5, 2, 10}));
  EXPECT_EQ(testing::copy_ints(d.tokens, 8), (Ints{11, 12, 13, 14, 0, 0, 0, 0}));
  EXPECT_EQ(testing::copy_ints(d.positions, 8), (Ints{2, 3, 0, 4, 0, 0, 0, 0}));
  Ints write_rows(8, kScratchRow);
  for (int32_t t = 0; t < 4; ++t) write_rows[t] = step.token_cell[t] + kFirstCellRow;
  EXPECT_EQ(testing::copy_ints(d.write_rows, 8), write_rows);
  EXPECT_EQ(testing::copy_ints(d.token_seq, 8), (Ints{0, 1, 2, 1, 3, 3, 3, 3}));
  EXPECT_EQ(testing::copy_ints(d.kept_rows, 8), (Ints{1, 3, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(testing::copy_ints(d.seq_row_offsets, 5), (Ints{0, 3, 8, 9, 10}));
  EXPECT_EQ(testing::copy_ints(d.seq_len, 4), (Ints{3, 5, 1, 1}));
  EXPECT_EQ(testing::copy_ints(d.seq_pos_begin, 4), (Ints{2, 3, 0, 0}));
  EXPECT_EQ(testing::copy_ints(d.seq_token_offsets, 5), (Ints{0, 1, 3, 4, 8}));
  EXPECT_EQ(testing::copy_ints(d.seq_tokens, 8), (Ints{0, 1, 3, 2, 4, 5, 6, 7}));
  Ints rows;
  for (const int32_t cell : step.seq_cells) rows.push_back(cell + kFirstCellRow);
  rows.push_back(kScratchRow);
  EXPECT_EQ(testing::copy_ints(d.seq_rows, rows.size()), rows);
}

TEST_F(CudaCellCacheTest, ConsecutiveUploadsKeepTheirAddressesAsContextsGrow) {
  constexpr int32_t kNumSeqs = 64;
  constexpr int32_t kContext = 8400;  // 64 x 8400 cells: more than the first 2 MiB of lists
  CellCache cells(kNumSeqs * (kContext + 1));
  auto created = CudaCellCache::create({/*max_width=*/64, /*max_session_tokens=*/kContext + 1, 0});
  ASSERT_TRUE(created.ok()) << created.status().to_string();
  CudaCellCache& cache = **created;
  const DeviceStep fixed = cache.step();
  std::vector<SeqId> seqs;
  for (int32_t i = 0; i < kNumSeqs; ++i) seqs.push_back(cells.seq_new());
  const size_t mapped_at_start = cache.mapped_bytes();
  // Every sequence grows by 64-token steps; some steps are uploaded (and checked) on the way.
  int32_t step_index = 0;
  for (int32_t filled = 0; filled + 64 <= kContext; filled += 64) {
    for (const SeqId seq : seqs) {
      const CellStep step = place(cells, std::vector<SeqId>(64, seq));
      if (++step_index % 997 != 0) continue;
      Ints tokens(64);
      for (int32_t t = 0; t < 64; ++t) tokens[t] = (step_index + t) % 500;
      auto uploaded = cache.upload(step, tokens, {}, 64, stream_);
      ASSERT_TRUE(uploaded.ok()) << uploaded.status().to_string();
      EXPECT_EQ(uploaded->seq_rows, fixed.seq_rows);
      ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
      EXPECT_EQ(testing::copy_ints(uploaded->tokens, 64), tokens);
      Ints rows;
      for (const int32_t cell : step.seq_cells) rows.push_back(cell + kFirstCellRow);
      rows.push_back(kScratchRow);
      EXPECT_EQ(testing::copy_ints(uploaded->seq_rows, rows.size()), rows);
    }
  }
  // One token for every sequence: the cell lists of the step outgrow what was mapped.
  const CellStep wide = place(cells, seqs);
  ASSERT_GT(wide.seq_cells.size() * sizeof(int32_t), mapped_at_start);
  Ints tokens(kNumSeqs, 7);
  auto uploaded = cache.upload(wide, tokens, Ints{0, 63}, 64, stream_);
  ASSERT_TRUE(uploaded.ok()) << uploaded.status().to_string();
  EXPECT_EQ(uploaded->seq_rows, fixed.seq_rows) << "the cell lists moved";
  EXPECT_EQ(uploaded->tokens, fixed.tokens);
  EXPECT_GT(cache.mapped_bytes(), mapped_at_start);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  Ints rows;
  for (const int32_t cell : wide.seq_cells) rows.push_back(cell + kFirstCellRow);
  rows.push_back(kScratchRow);
  EXPECT_EQ(testing::copy_ints(uploaded->seq_rows, rows.size()), rows);
  EXPECT_EQ(testing::copy_ints(uploaded->kept_rows, 3), (Ints{0, 63, 0}));
}

TEST_F(CudaCellCacheTest, CacheOutlivesTheStreamItLastUploadedOn) {
  CellCache cells(1000);
  const SeqId a = cells.seq_new();
  std::vector<SeqId> seqs(500, a);
  const CellStep step = place(cells, seqs);
  Ints tokens(500, 3);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  {
    auto created = CudaCellCache::create({/*max_width=*/512, /*max_session_tokens=*/1000, 0});
    ASSERT_TRUE(created.ok()) << created.status().to_string();
    for (int32_t i = 0; i < 8; ++i) {
      ASSERT_TRUE((*created)->upload(step, tokens, {}, 512, stream).ok());
    }
    ASSERT_EQ(cudaStreamDestroy(stream), cudaSuccess);  // copies may still be in flight
  }
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

TEST_F(CudaCellCacheTest, BadSlicesAreRefused) {
  CellCache cells(16);
  const SeqId a = cells.seq_new();
  const CellStep step = place(cells, {a, a});
  auto created = CudaCellCache::create({/*max_width=*/4, /*max_session_tokens=*/16, 0});
  ASSERT_TRUE(created.ok());
  CudaCellCache& cache = **created;
  const Ints two = {1, 2};
  EXPECT_EQ(cache.upload(step, two, {}, 8, stream_).status().code(), StatusCode::kInvalidArgument)
      << "wider than max_width";
  EXPECT_EQ(cache.upload(step, two, {}, 1, stream_).status().code(), StatusCode::kInvalidArgument)
      << "narrower than the tokens";
  EXPECT_EQ(cache.upload(step, Ints{1}, {}, 2, stream_).status().code(),
            StatusCode::kInvalidArgument)
      << "tokens and cell step disagree";
  EXPECT_EQ(cache.upload(step, two, Ints{1, 0}, 2, stream_).status().code(),
            StatusCode::kInvalidArgument)
      << "kept rows not ascending";
  EXPECT_TRUE(cache.upload(step, two, Ints{1}, 2, stream_).ok());
  EXPECT_EQ(CudaCellCache::create({0, 16, 0}).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace cellm
