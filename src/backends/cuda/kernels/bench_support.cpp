// bench_support: the kernel benchmarks' shared timing and operands (bench_support.h).
#include "backends/cuda/kernels/bench_support.h"

#include <algorithm>

#include "backends/cuda/kernels/bench_kernels.h"
#include "backends/cuda/kernels/random_fill.cuh"
#include "backends/cuda/kernels/weight_layout.h"

namespace cellm::kernels::bench {
namespace {

int g_timed_replays = 10;

}  // namespace

Buffer::Buffer(size_t bytes) { BENCH_CUDA(cudaMalloc(&ptr, std::max<size_t>(bytes, 256))); }

Buffer::~Buffer() { cudaFree(ptr); }

void set_timed_replays(int replays) {
  CELLM_CHECK(replays > 0) << "timed replays " << replays;
  g_timed_replays = replays;
}

double time_graph(cudaStream_t stream, const std::function<void()>& body) {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  BENCH_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  body();
  BENCH_CUDA(cudaStreamEndCapture(stream, &graph));
  BENCH_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  cudaEvent_t start, stop;
  BENCH_CUDA(cudaEventCreate(&start));
  BENCH_CUDA(cudaEventCreate(&stop));
  for (int i = 0; i < 3; ++i) BENCH_CUDA(cudaGraphLaunch(exec, stream));
  std::vector<double> seconds;
  for (int i = 0; i < g_timed_replays; ++i) {
    BENCH_CUDA(cudaEventRecord(start, stream));
    BENCH_CUDA(cudaGraphLaunch(exec, stream));
    BENCH_CUDA(cudaEventRecord(stop, stream));
    BENCH_CUDA(cudaEventSynchronize(stop));
    float ms = 0.0f;
    BENCH_CUDA(cudaEventElapsedTime(&ms, start, stop));
    seconds.push_back(ms * 1e-3);
  }
  BENCH_CUDA(cudaEventDestroy(start));
  BENCH_CUDA(cudaEventDestroy(stop));
  BENCH_CUDA(cudaGraphExecDestroy(exec));
  BENCH_CUDA(cudaGraphDestroy(graph));
  std::sort(seconds.begin(), seconds.end());
  return seconds[seconds.size() / 2];
}

void fill(void* data, TensorType type, int64_t rows, int64_t cols, uint64_t seed, float scale,
          cudaStream_t stream) {
  RandomFillParams p;
  p.data = data;
  p.type = type;
  p.num_rows = rows;
  p.num_cols = cols;
  p.seed = seed;
  p.scale = scale;
  BENCH_OK(launch_random_fill(p, stream));
}

double copy_bandwidth(cudaStream_t stream, double* memcpy_bandwidth) {
  const size_t bytes = size_t{1} << 30;
  Buffer a(bytes), b(bytes);
  fill(a.ptr, TensorType::kF32, 1, static_cast<int64_t>(bytes / 4), 1, 1.0f, stream);
  if (memcpy_bandwidth != nullptr) {
    const double t_memcpy = time_graph(stream, [&] {
      BENCH_CUDA(cudaMemcpyAsync(b.ptr, a.ptr, bytes, cudaMemcpyDeviceToDevice, stream));
    });
    *memcpy_bandwidth = 2.0 * static_cast<double>(bytes) / t_memcpy;
  }
  const double t_kernel =
      time_graph(stream, [&] { launch_copy_kernel(a.ptr, b.ptr, bytes, stream); });
  return 2.0 * static_cast<double>(bytes) / t_kernel;
}

WeightCopies::WeightCopies(TensorType type, int64_t rows, int64_t cols, uint64_t first_seed,
                           cudaStream_t stream)
    : bytes(device_row_bytes(type, cols) * static_cast<uint64_t>(rows)) {
  const int n = static_cast<int>(std::clamp<uint64_t>((512ull << 20) / bytes + 1, 1, 16));
  for (int i = 0; i < n; ++i) {
    buffers.push_back(std::make_unique<Buffer>(bytes));
    fill(buffers.back()->ptr, type, rows, cols, first_seed + static_cast<uint64_t>(i), 0.02f,
         stream);
  }
}

double seconds_per_launch(cudaStream_t stream, const WeightCopies& weights, int launches,
                          const std::function<void(const void* weights)>& launch) {
  const double t = time_graph(stream, [&] {
    for (int i = 0; i < launches; ++i) launch(weights.at(i));
  });
  return t / launches;
}

}  // namespace cellm::kernels::bench
