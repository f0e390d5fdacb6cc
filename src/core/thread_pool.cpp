#include "core/thread_pool.h"

#include <algorithm>
#include <system_error>

#include "core/check.h"
#include "core/logging.h"

namespace cellm {
namespace {

thread_local bool inside_parallel_for = false;

struct ChunkRange {
  size_t begin;
  size_t end;
};

ChunkRange chunk_range(size_t n, size_t num_chunks, size_t index) {
  const size_t base = n / num_chunks;
  const size_t extra = n % num_chunks;
  const size_t begin = index * base + std::min(index, extra);
  return {begin, begin + base + (index < extra ? 1 : 0)};
}

}  // namespace

ThreadPool::ThreadPool(size_t num_threads) {
  if (num_threads == 0) {
    num_threads = std::clamp<size_t>(std::thread::hardware_concurrency(), 1, kMaxThreads);
  }
  CELLM_CHECK_LE(num_threads, kMaxThreads) << "callers refuse thread counts above kMaxThreads";
  workers_.reserve(num_threads - 1);
  for (size_t i = 0; i + 1 < num_threads; ++i) {
    try {
      workers_.emplace_back([this, i] { worker_loop(i + 1); });
    } catch (const std::system_error& e) {  // chunks follow num_threads(): still every index
      CELLM_LOG(kWarn) << "thread pool: the system started " << workers_.size() + 1 << " of "
                       << num_threads << " threads (" << e.what() << "); running with those";
      break;
    }
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  for (auto& worker : workers_) worker.join();
}

void ThreadPool::parallel_for(size_t n, const std::function<void(size_t, size_t)>& fn,
                              size_t min_chunk) {
  if (n == 0) return;
  const size_t max_chunks = std::max<size_t>(1, n / std::max<size_t>(1, min_chunk));
  const size_t num_chunks = std::min(num_threads(), max_chunks);
  if (num_chunks == 1 || inside_parallel_for) {
    fn(0, n);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    CELLM_CHECK(job_ == nullptr) << "ThreadPool::parallel_for called concurrently";
    job_ = &fn;
    job_size_ = n;
    job_chunks_ = num_chunks;
    num_pending_ = workers_.size();
    ++generation_;
  }
  work_ready_.notify_all();
  inside_parallel_for = true;
  const ChunkRange own = chunk_range(n, num_chunks, 0);
  fn(own.begin, own.end);
  inside_parallel_for = false;
  std::unique_lock<std::mutex> lock(mutex_);
  work_done_.wait(lock, [this] { return num_pending_ == 0; });
  job_ = nullptr;
}

void ThreadPool::worker_loop(size_t worker_index) {
  size_t seen_generation = 0;
  while (true) {
    const std::function<void(size_t, size_t)>* job;
    size_t size;
    size_t chunks;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      work_ready_.wait(lock, [&] { return stopping_ || generation_ != seen_generation; });
      if (stopping_) return;
      seen_generation = generation_;
      job = job_;
      size = job_size_;
      chunks = job_chunks_;
    }
    if (worker_index < chunks) {
      inside_parallel_for = true;
      const ChunkRange range = chunk_range(size, chunks, worker_index);
      (*job)(range.begin, range.end);
      inside_parallel_for = false;
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (--num_pending_ == 0) work_done_.notify_one();
    }
  }
}

}  // namespace cellm
