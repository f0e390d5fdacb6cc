#include "core/thread_pool.h"

#include <gtest/gtest.h>
#include <malloc.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
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

// The sanitizers reserve address space of their own that a limit on it would starve.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

// The child of WorkersTheSystemRefuses...: its exit status (0: as expected).
int refused_workers_child() {
  // Keep freed heap memory in the heap, and leave a few MB of it free, for the warning's text.
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  free(malloc(8 << 20));
  long pages = 0;
  FILE* statm = std::fopen("/proc/self/statm", "r");
  if (statm == nullptr || std::fscanf(statm, "%ld", &pages) != 1) return 10;
  std::fclose(statm);
  const rlim_t limit = static_cast<rlim_t>(pages) * sysconf(_SC_PAGESIZE) + (40 << 20);
  const rlimit as_limit{limit, limit};
  if (setrlimit(RLIMIT_AS, &as_limit) != 0) return 11;
  ThreadPool pool(64);
  if (pool.num_threads() < 1 || pool.num_threads() >= 64) return 12;
  for (const size_t n : {1u, 7u, 1001u}) {
    std::vector<std::atomic<int>> hits(n);
    pool.parallel_for(n, [&](size_t begin, size_t end) {
      for (size_t i = begin; i < end; ++i) hits[i].fetch_add(1);
    });
    for (size_t i = 0; i < n; ++i) {
      if (hits[i].load() != 1) return 13;
    }
  }
  return 0;
}

TEST(ThreadPoolTest, WorkersTheSystemRefusesLeaveAPoolThatStillCoversEveryIndex) {
  if (kSanitized) GTEST_SKIP() << "a limit on address space starves the sanitizers";
  // In a child whose address space has room for a few thread stacks (8 MB each by default) but
  // not 63: the pool starts what it can, says so, and every loop still covers each index once.
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    int code = 14;  // an exception: never back into the test runner from the child
    try {
      code = refused_workers_child();
    } catch (...) {
    }
    _exit(code);
  }
  int status = 0;
  pid_t waited = 0;
  for (int tick = 0; tick < 600 && waited == 0; ++tick) {  // at most a minute
    waited = waitpid(child, &status, WNOHANG);
    if (waited == 0) usleep(100 * 1000);
  }
  if (waited == 0) {
    kill(child, SIGKILL);
    waitpid(child, &status, 0);
    FAIL() << "the child hung";
  }
  ASSERT_EQ(waited, child);
  ASSERT_TRUE(WIFEXITED(status)) << "the child died (signal " << WTERMSIG(status) << ")";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "10/11: no limit set; 12: every thread or none started; "
                                       "13: an index not covered exactly once; 14: it threw";
}

}  // namespace
}  // namespace cellm
