// bench_l2_stage.cu: see bench_l2_stage.h.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "backends/cuda/kernels/bench_l2_stage.h"
#include "backends/cuda/kernels/bench_support.h"

namespace cellm::kernels {
namespace {

using bench::Buffer;

// How the idle kernel pulls the matrix's first bytes toward L2.
enum StageMode : int {
  kNone = 0,
  kBulk = 1,           // cp.async.bulk.prefetch.L2, 64 KB pieces, one thread a block
  kLineEvictLast = 2,  // prefetch.global.L2::evict_last, one per 128-byte line
  kLine = 3,           // prefetch.global.L2, one per line
  kLoad = 4,           // a volatile 4-byte load a line (ld.volatile.global), discarded
};
const char* const kModeNames[] = {"none", "bulk prefetch", "line prefetch, evict-last",
                                  "line prefetch", "loads"};
constexpr int kIdleThreads = 128;
constexpr int kReadThreads = 256;
constexpr int kReadBlocksPerSm = 8;
constexpr uint32_t kBulkPiece = 65536;

__device__ __forceinline__ uint64_t now_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Every block: its share of w's first `stage_bytes` (whole 128-byte lines) pulled toward L2 by
// `mode`, then thread 0 sleeps until `idle_ns` after the block began.
__global__ void idle_stage_kernel(const uint8_t* w, size_t stage_bytes, uint64_t idle_ns, int mode,
                                  unsigned* sink) {
  const uint64_t start = now_ns();
  const size_t share = ((stage_bytes + gridDim.x - 1) / gridDim.x + 127) / 128 * 128;
  const size_t first = static_cast<size_t>(blockIdx.x) * share;
  const size_t begin = first < stage_bytes ? first : stage_bytes;
  const size_t end = begin + share < stage_bytes ? begin + share : stage_bytes;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (mode == kBulk && threadIdx.x == 0) {
    for (size_t o = begin; o < end; o += kBulkPiece) {
      const uint32_t bytes = static_cast<uint32_t>(end - o < kBulkPiece ? end - o : kBulkPiece);
      asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(w + o), "r"(bytes)
                   : "memory");
    }
  }
#endif
  if (mode == kLineEvictLast || mode == kLine || mode == kLoad) {
    uint32_t acc = 0;
    for (size_t o = begin + 128 * threadIdx.x; o < end; o += 128 * blockDim.x) {
      if (mode == kLineEvictLast) {
        asm volatile("prefetch.global.L2::evict_last [%0];" ::"l"(w + o));
      } else if (mode == kLine) {
        asm volatile("prefetch.global.L2 [%0];" ::"l"(w + o));
      } else {
        acc ^= *reinterpret_cast<const volatile uint32_t*>(w + o);
      }
    }
    if (acc == 0x9e3779b9u) sink[0] = acc;  // never in practice; keeps the loads
  }
  if (threadIdx.x == 0) {
    while (now_ns() - start < idle_ns) __nanosleep(200);
  }
  __syncthreads();
}

// Streams `num_vectors` 16-byte words of w (four in flight a thread; kStreaming: evict-first loads
// as the shipped products read weights) and, with `span`, folds the grid's first start and last
// end (globaltimer ns) into span[0] (min) and span[1] (max).
template <bool kStreaming>
__global__ void stream_read_kernel(const uint4* w, size_t num_vectors, unsigned* sink,
                                   unsigned long long* span) {
  const uint64_t start = now_ns();
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  uint32_t acc = 0;
  const auto load = [&](size_t k) { return kStreaming ? __ldcs(w + k) : __ldg(w + k); };
  for (; i + 3 * stride < num_vectors; i += 4 * stride) {
    const uint4 a = load(i), b = load(i + stride), c = load(i + 2 * stride),
                d = load(i + 3 * stride);
    acc ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w ^ c.x ^ c.y ^ c.z ^ c.w ^ d.x ^ d.y ^ d.z ^
           d.w;
  }
  for (; i < num_vectors; i += stride) {
    const uint4 a = load(i);
    acc ^= a.x ^ a.y ^ a.z ^ a.w;
  }
  if (acc == 0x9e3779b9u) sink[1] = acc;
  if (span == nullptr) return;
  __syncthreads();
  if (threadIdx.x == 0) {
    atomicMin(&span[0], static_cast<unsigned long long>(start));
    atomicMax(&span[1], static_cast<unsigned long long>(now_ns()));
  }
}

struct L2StageBench {
  cudaStream_t stream;
  int num_sms;
  Buffer matrix;  // [matrix_bytes], the streamed weights (contents irrelevant)
  Buffer flush;   // [flush_bytes], read before every trial so L2 holds none of the matrix
  Buffer sink;    // [2], u32
  Buffer span;    // [2], u64 globaltimer ns
  size_t matrix_bytes;
  size_t flush_bytes;

  L2StageBench(cudaStream_t s, int sms, size_t matrix_b, size_t flush_b)
      : stream(s),
        num_sms(sms),
        matrix(matrix_b),
        flush(flush_b),
        sink(256),
        span(256),
        matrix_bytes(matrix_b),
        flush_bytes(flush_b) {
    BENCH_CUDA(cudaMemsetAsync(matrix.ptr, 0x5a, matrix_b, stream));
    BENCH_CUDA(cudaMemsetAsync(flush.ptr, 0xa5, flush_b, stream));
    BENCH_CUDA(cudaStreamSynchronize(stream));
  }

  // Median µs of the matrix read's span (flush, idle T with `stage_bytes` staged by `mode`, read)
  // over `replays` replays of one graph.
  double read_us(double idle_us, size_t stage_bytes, int mode, bool streaming, int replays = 15) {
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    auto* span_words = span.as<unsigned long long>();
    BENCH_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    stream_read_kernel<false><<<num_sms * kReadBlocksPerSm, kReadThreads, 0, stream>>>(
        flush.as<uint4>(), flush_bytes / 16, sink.as<unsigned>(), nullptr);
    BENCH_CUDA(cudaMemsetAsync(span_words, 0xff, 8, stream));
    BENCH_CUDA(cudaMemsetAsync(span_words + 1, 0, 8, stream));
    idle_stage_kernel<<<num_sms, kIdleThreads, 0, stream>>>(matrix.as<uint8_t>(), stage_bytes,
                                                            static_cast<uint64_t>(idle_us * 1e3),
                                                            mode, sink.as<unsigned>());
    if (streaming) {
      stream_read_kernel<true><<<num_sms * kReadBlocksPerSm, kReadThreads, 0, stream>>>(
          matrix.as<uint4>(), matrix_bytes / 16, sink.as<unsigned>(), span_words);
    } else {
      stream_read_kernel<false><<<num_sms * kReadBlocksPerSm, kReadThreads, 0, stream>>>(
          matrix.as<uint4>(), matrix_bytes / 16, sink.as<unsigned>(), span_words);
    }
    BENCH_CUDA(cudaStreamEndCapture(stream, &graph));
    BENCH_CUDA(cudaGraphInstantiate(&exec, graph, 0));
    std::vector<double> us;
    for (int r = 0; r < replays + 3; ++r) {
      BENCH_CUDA(cudaGraphLaunch(exec, stream));
      unsigned long long words[2];
      BENCH_CUDA(cudaMemcpyAsync(words, span_words, sizeof(words), cudaMemcpyDeviceToHost, stream));
      BENCH_CUDA(cudaStreamSynchronize(stream));
      if (r >= 3) us.push_back(static_cast<double>(words[1] - words[0]) * 1e-3);
    }
    BENCH_CUDA(cudaGraphExecDestroy(exec));
    BENCH_CUDA(cudaGraphDestroy(graph));
    std::sort(us.begin(), us.end());
    return us[us.size() / 2];
  }
};

}  // namespace

void bench_l2_stage(cudaStream_t stream, double copy_bandwidth, int num_sms) {
  // Llama-3.1-8B's gate|up product in Q4_0: 28,672 rows of 4,096 columns at 18 bytes a block.
  const size_t matrix_bytes = size_t{28672} * 4096 / 32 * 18;
  L2StageBench b(stream, num_sms, matrix_bytes, size_t{512} << 20);
  const double mb = 1e6;
  std::printf(
      "\n== L2 staging: a %.1f MB stream after an idle kernel that pulls its first P MiB toward "
      "L2 (read span on the device, median µs; copy %.0f GB/s) ==\n",
      matrix_bytes / mb, copy_bandwidth / 1e9);
  const double cold = b.read_us(20.0, 0, kNone, true);
  const double cold_ldg = b.read_us(20.0, 0, kNone, false);
  std::printf(
      "cold read: %.2f µs (%.0f GB/s) evict-first loads, %.2f µs (%.0f GB/s) ld.global.nc\n", cold,
      matrix_bytes / cold / 1e3, cold_ldg, matrix_bytes / cold_ldg / 1e3);
  const double cold_rate = matrix_bytes / cold;  // bytes per µs
  std::printf("%-28s %6s %6s %9s %9s %9s %9s\n", "staged by", "idle", "P MiB", "read µs",
              "saved µs", "P @ cold", "ldg µs");
  for (const double idle_us : {20.0, 0.0}) {
    for (const int mode : {kBulk, kLineEvictLast, kLine, kLoad}) {
      for (const int p_mb : {8, 16, 24, 32, 40, 48}) {
        const size_t p = std::min(matrix_bytes, static_cast<size_t>(p_mb) << 20);
        const double t = b.read_us(idle_us, p, mode, true);
        const double t_ldg = b.read_us(idle_us, p, mode, false);
        std::printf("%-28s %6.0f %6d %9.2f %9.2f %9.2f %9.2f\n", kModeNames[mode], idle_us, p_mb, t,
                    cold - t, p / cold_rate, t_ldg);
      }
    }
  }
  std::printf(
      "(saved: the cold read's span less this one; P @ cold: P's bytes at the cold read's rate, "
      "what L2 at no cost would save. idle 0: the staging kernel does not wait, so the read "
      "overlaps the prefetches.)\n");
}

}  // namespace cellm::kernels
