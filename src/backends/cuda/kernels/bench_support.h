// bench_support: what the two kernel benchmarks (cuda_kernels_bench, cuda_decode_bench) share —
// error checks that abort with the failing call, a device allocation freed on scope exit, timing
// of a captured CUDA graph (median of replays after a warm-up), random device operands
// (random_fill), weight copies that together exceed L2 and the timing of launches rotated
// through them, and the measured copy bandwidth (the ceiling every GB/s figure is set against).
// It knows no particular kernel but the copy kernel; the benchmarks time theirs through these.
// Benchmarks only; not linked into the backend. Thread-safety: single-threaded benchmark code (the
// replay count is a process-wide setting).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "core/check.h"
#include "core/status.h"
#include "gguf/tensor_type.h"

#define BENCH_CUDA(expr)                                                                           \
  do {                                                                                             \
    const cudaError_t bench_error_ = (expr);                                                       \
    CELLM_CHECK(bench_error_ == cudaSuccess) << #expr << ": " << cudaGetErrorString(bench_error_); \
  } while (false)
#define BENCH_OK(expr)                                            \
  do {                                                            \
    const ::cellm::Status bench_status_ = (expr);                 \
    CELLM_CHECK(bench_status_.ok()) << bench_status_.to_string(); \
  } while (false)

namespace cellm::kernels::bench {

// A weight matrix's shape as the tables name it: N rows of K elements.
struct MatShape {
  const char* name;
  int64_t rows;  // N
  int64_t cols;  // K
};

// A device allocation (at least 256 bytes) freed on scope exit.
struct Buffer {
  void* ptr = nullptr;
  explicit Buffer(size_t bytes);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr);
  }
};

// How many timed replays time_graph() takes the median of (after 3 untimed ones).
void set_timed_replays(int replays);

// Median seconds of one replay of a graph holding `body`'s launches on `stream`.
double time_graph(cudaStream_t stream, const std::function<void()>& body);

// `rows` × `cols` elements of `type` at `data` (device layout), random in ±scale, seeded.
void fill(void* data, TensorType type, int64_t rows, int64_t cols, uint64_t seed, float scale,
          cudaStream_t stream);

// Bytes read + written per second by an SM copy kernel over 1 GiB (the bandwidth ceiling); with
// `memcpy_bandwidth`, also that of cudaMemcpyAsync.
double copy_bandwidth(cudaStream_t stream, double* memcpy_bandwidth = nullptr);

// A weight matrix of one shape and type in random copies (seeds first_seed, first_seed + 1, …)
// that together exceed L2 (512 MiB, at most 16 copies), so rotated launches read DRAM.
struct WeightCopies {
  WeightCopies(TensorType type, int64_t rows, int64_t cols, uint64_t first_seed,
               cudaStream_t stream);
  int count() const { return static_cast<int>(buffers.size()); }
  const void* at(int i) const { return buffers[static_cast<size_t>(i) % buffers.size()]->ptr; }

  std::vector<std::unique_ptr<Buffer>> buffers;
  uint64_t bytes = 0;  // of one copy (device layout)
};

// Median seconds per launch of `launches` launches captured in one graph, launch i reading
// weights.at(i).
double seconds_per_launch(cudaStream_t stream, const WeightCopies& weights, int launches,
                          const std::function<void(const void* weights)>& launch);

}  // namespace cellm::kernels::bench
