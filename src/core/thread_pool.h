// ThreadPool: a fixed set of worker threads for data-parallel loops on the CPU.
//
// `pool.parallel_for(n, fn)` calls fn(begin, end) over contiguous chunks of [0, n) on the
// workers and the calling thread, and returns when all are done. Chunks are static (equal
// sizes), so a loop's split depends only on n and the thread count: results are reproducible.
// Not a task queue; no nesting (a parallel_for from inside fn runs inline on that thread).
// Where the system refuses a worker (out of threads or memory), the pool keeps the workers it
// started, at least the calling thread, and logs a warning: num_threads() says how many run.
// Thread-safety: one parallel_for at a time per pool (callers serialize; the engine thread owns
// its pool).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace cellm {

class ThreadPool {
 public:
  // Callers refuse counts above this (a forward gains nothing from thousands of threads, and
  // each costs a stack).
  static constexpr size_t kMaxThreads = 1024;

  // num_threads counts the calling thread; 0 means std::thread::hardware_concurrency() (at most
  // kMaxThreads). At most kMaxThreads (checked).
  explicit ThreadPool(size_t num_threads = 0);
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;
  ~ThreadPool();

  size_t num_threads() const { return workers_.size() + 1; }

  // Runs fn(begin, end) over chunks covering [0, n); blocks until every chunk has run.
  // Chunks have at least `min_chunk` items so tiny loops stay on one thread.
  void parallel_for(size_t n, const std::function<void(size_t, size_t)>& fn, size_t min_chunk = 1);

 private:
  void worker_loop(size_t worker_index);

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable work_ready_;
  std::condition_variable work_done_;
  const std::function<void(size_t, size_t)>* job_ = nullptr;  // guarded by mutex_
  size_t job_size_ = 0;                                       // items in the current job
  size_t job_chunks_ = 0;                                     // chunks in the current job
  size_t generation_ = 0;   // bumped per job so workers run each job once
  size_t num_pending_ = 0;  // workers still running the current job
  bool stopping_ = false;
};

}  // namespace cellm
