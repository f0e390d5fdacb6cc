#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

namespace cellm {
namespace {

TEST(ThreadPoolTest, ParallelForCoversEveryIndexExactlyOnce) {
  ThreadPool pool(4);
  for (size_t n : {1u, 2u, 3u, 7u, 100u, 1001u}) {
    std::vector<std::atomic<int>> hits(n);
    pool.parallel_for(n, [&](size_t begin, size_t end) {
      for (size_t i = begin; i < end; ++i) hits[i].fetch_add(1);
    });
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "n=" << n << " i=" << i;
  }
}

TEST(ThreadPoolTest, ManyJobsInARowAllComplete) {
  ThreadPool pool(3);
  std::atomic<long> total{0};
  for (int job = 0; job < 2000; ++job) {
    pool.parallel_for(
        10, [&](size_t begin, size_t end) { total.fetch_add(static_cast<long>(end - begin)); });
  }
  EXPECT_EQ(total.load(), 20000);
}

TEST(ThreadPoolTest, NestedLoopsRunInlineInsteadOfDeadlocking) {
  ThreadPool pool(2);
  std::atomic<int> inner{0};
  pool.parallel_for(4, [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) {
      pool.parallel_for(3, [&](size_t b, size_t e) { inner.fetch_add(static_cast<int>(e - b)); });
    }
  });
  EXPECT_EQ(inner.load(), 12);
}

TEST(ThreadPoolTest, MinChunkKeepsSmallLoopsOnOneChunk) {
  ThreadPool pool(4);
  std::atomic<int> calls{0};
  pool.parallel_for(
      10, [&](size_t, size_t) { calls.fetch_add(1); }, 64);
  EXPECT_EQ(calls.load(), 1);
}

}  // namespace
}  // namespace cellm
