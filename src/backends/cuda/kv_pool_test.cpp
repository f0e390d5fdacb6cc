#include "backends/cuda/kv_pool.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "backends/cuda/cuda_test_util.h"

namespace cellm {
namespace {

KvPoolGeometry small_geometry(int32_t max_rows) {
  KvPoolGeometry g;
  g.num_layers = 3;
  g.num_kv_heads = 2;
  g.head_dim = 64;
  g.value_head_dim = 32;
  g.dtype = KvDtype::kBF16;
  g.max_rows = max_rows;
  return g;
}

// A byte pattern that depends on the row, the layer and K/V, so misplaced bytes show.
std::vector<uint8_t> pattern(int32_t rows, int64_t row_bytes, int32_t layer, int32_t kv) {
  std::vector<uint8_t> bytes(static_cast<size_t>(rows * row_bytes));
  for (size_t i = 0; i < bytes.size(); ++i) {
    bytes[i] = static_cast<uint8_t>((i * 131 + static_cast<size_t>(layer) * 7 + kv * 3 + 1) % 251);
  }
  return bytes;
}

void write_all(const KvPool& pool, int32_t rows) {
  for (int32_t l = 0; l < pool.geometry().num_layers; ++l) {
    const auto k = pattern(rows, pool.k_row_bytes(), l, 0);
    const auto v = pattern(rows, pool.v_row_bytes(), l, 1);
    ASSERT_EQ(cudaMemcpy(pool.k_data(l), k.data(), k.size(), cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(pool.v_data(l), v.data(), v.size(), cudaMemcpyHostToDevice), cudaSuccess);
  }
}

void expect_contents(const KvPool& pool, int32_t rows) {
  for (int32_t l = 0; l < pool.geometry().num_layers; ++l) {
    for (int32_t kv = 0; kv < 2; ++kv) {
      const int64_t row_bytes = kv == 0 ? pool.k_row_bytes() : pool.v_row_bytes();
      std::vector<uint8_t> got(static_cast<size_t>(rows * row_bytes));
      ASSERT_EQ(cudaMemcpy(got.data(), kv == 0 ? pool.k_data(l) : pool.v_data(l), got.size(),
                           cudaMemcpyDeviceToHost),
                cudaSuccess);
      EXPECT_EQ(got, pattern(rows, row_bytes, l, kv)) << "layer " << l << (kv ? " V" : " K");
    }
  }
}

class KvPoolTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(testing::require_cuda_device()); }
};

TEST_F(KvPoolTest, CreationMapsNothingAndGrowthMapsWholeGranules) {
  auto pool = KvPool::create(small_geometry(100000));
  ASSERT_TRUE(pool.ok()) << pool.status().to_string();
  KvPoolMetrics m = (*pool)->metrics();
  EXPECT_EQ(m.num_rows, 0);
  EXPECT_EQ(m.mapped_bytes, 0u);
  EXPECT_GE(m.reserved_bytes, 100000u * 3 * (2 * 64 + 2 * 32) * 2);
  ASSERT_TRUE((*pool)->reserve_rows(1).ok());
  m = (*pool)->metrics();
  EXPECT_GE(m.num_rows, KvPool::kMinRows);
  EXPECT_GT(m.mapped_bytes, 0u);
  EXPECT_EQ(m.num_growths, 1);
  ASSERT_TRUE((*pool)->reserve_rows(m.num_rows).ok());
  EXPECT_EQ((*pool)->metrics().num_growths, 1) << "rows already mapped need no growth";
}

TEST_F(KvPoolTest, GrowthKeepsAddressesAndContents) {
  auto created = KvPool::create(small_geometry(200000));
  ASSERT_TRUE(created.ok()) << created.status().to_string();
  KvPool& pool = **created;
  ASSERT_TRUE(pool.reserve_rows(100).ok());
  const int32_t first_rows = pool.num_rows();
  std::vector<void*> addresses;
  for (int32_t l = 0; l < 3; ++l) {
    addresses.push_back(pool.k_data(l));
    addresses.push_back(pool.v_data(l));
  }
  write_all(pool, first_rows);
  ASSERT_TRUE(pool.reserve_rows(150000).ok());
  EXPECT_GE(pool.num_rows(), 150000);
  EXPECT_EQ(pool.metrics().num_growths, 2);
  for (int32_t l = 0; l < 3; ++l) {
    EXPECT_EQ(pool.k_data(l), addresses[2 * l]) << "layer " << l << " K moved";
    EXPECT_EQ(pool.v_data(l), addresses[2 * l + 1]) << "layer " << l << " V moved";
  }
  expect_contents(pool, first_rows);
  // The new rows are usable up to the last one.
  write_all(pool, pool.num_rows());
  expect_contents(pool, pool.num_rows());
  EXPECT_EQ(pool.reserve_rows(200001).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(pool.reserve_rows(-1).code(), StatusCode::kOutOfRange);
}

TEST_F(KvPoolTest, FailedGrowthChangesNothingAndThePoolStaysUsable) {
  auto created = KvPool::create(small_geometry(300000));
  ASSERT_TRUE(created.ok()) << created.status().to_string();
  KvPool& pool = **created;
  ASSERT_TRUE(pool.reserve_rows(1000).ok());
  const int32_t rows = pool.num_rows();
  write_all(pool, rows);
  const KvPoolMetrics before = pool.metrics();
  for (int32_t fail_at : {0, 3, 5}) {  // the first array, layer 1's V, the last array
    pool.inject_allocation_failure(fail_at);
    const Status status = pool.reserve_rows(250000);
    EXPECT_EQ(status.code(), StatusCode::kResourceExhausted) << status.to_string();
    const KvPoolMetrics after = pool.metrics();
    EXPECT_EQ(after.num_rows, before.num_rows) << "failure at " << fail_at;
    EXPECT_EQ(after.mapped_bytes, before.mapped_bytes) << "failure at " << fail_at;
    EXPECT_EQ(after.num_growths, before.num_growths);
    expect_contents(pool, rows);
  }
  EXPECT_EQ(pool.metrics().num_failed_growths, 3);
  ASSERT_TRUE(pool.reserve_rows(250000).ok()) << "the pool stays usable after a failed growth";
  expect_contents(pool, rows);
  write_all(pool, pool.num_rows());
  expect_contents(pool, pool.num_rows());
}

TEST_F(KvPoolTest, CacheOutlivesTheStreamItLastSteppedOn) {
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  {
    auto created = KvPool::create(small_geometry(400000));
    ASSERT_TRUE(created.ok()) << created.status().to_string();
    KvPool& pool = **created;
    ASSERT_TRUE(pool.reserve_rows(400000).ok());
    // Queue a lot of work on the stream, destroy the stream while it may still run, then the pool.
    for (int32_t repeat = 0; repeat < 20; ++repeat) {
      for (int32_t l = 0; l < 3; ++l) {
        ASSERT_EQ(
            cudaMemsetAsync(pool.k_data(l), repeat, pool.k_row_bytes() * pool.num_rows(), stream),
            cudaSuccess);
      }
    }
    ASSERT_EQ(cudaStreamDestroy(stream), cudaSuccess);
  }
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

TEST_F(KvPoolTest, AGraphCapturedBeforeGrowthStillWritesTheSameRowsAfterIt) {
  auto created = KvPool::create(small_geometry(100000));
  ASSERT_TRUE(created.ok()) << created.status().to_string();
  KvPool& pool = **created;
  ASSERT_TRUE(pool.reserve_rows(16).ok());
  const size_t bytes = static_cast<size_t>(pool.k_row_bytes()) * 16;
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(pool.k_data(1), 0x5a, bytes, stream), cudaSuccess);
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_TRUE(pool.reserve_rows(90000).ok());
  ASSERT_EQ(cudaMemset(pool.k_data(1), 0, bytes), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  std::vector<uint8_t> got(bytes);
  ASSERT_EQ(cudaMemcpy(got.data(), pool.k_data(1), bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(got, std::vector<uint8_t>(bytes, 0x5a));
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

TEST_F(KvPoolTest, BadGeometryIsAnError) {
  KvPoolGeometry g = small_geometry(10);
  g.num_kv_heads = 0;
  EXPECT_EQ(KvPool::create(g).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace cellm
