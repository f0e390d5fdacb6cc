// decode_latency_bench: the tables of `cuda_decode_bench --latency` (decode_latency_probe.h,
// decode_code_probe.h).
// Benchmark only. Thread-safety: one caller at a time.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <utility>
#include <vector>

#include "backends/cuda/kernels/bench_support.h"
#include "backends/cuda/kernels/decode_code_probe.h"
#include "backends/cuda/kernels/decode_latency_probe.h"

namespace cellm::kernels {

using bench::Buffer;

// decode_code_probe.h's blocks, cycles per instruction of each pass (two launches each).
void bench_code_probe(cudaStream_t stream) {
  Buffer cycles((kCodeProbePasses + 1) * sizeof(uint64_t));
  std::printf("\n== straight code run three times by one warp, cycles per instruction ==\n");
  std::printf("%8s %8s %8s %8s\n", "code KB", "pass 1", "pass 2", "pass 3");
  for (const int instructions : kCodeProbeSizes) {
    for (int run = 0; run < 2; ++run) {
      BENCH_CUDA(launch_code_probe(instructions, cycles.as<uint64_t>(), stream));
      uint64_t c[kCodeProbePasses + 1] = {};
      BENCH_CUDA(cudaMemcpyAsync(c, cycles.ptr, sizeof(c), cudaMemcpyDeviceToHost, stream));
      BENCH_CUDA(cudaStreamSynchronize(stream));
      std::printf("%8d", instructions * 16 / 1024);
      for (int pass = 0; pass < kCodeProbePasses; ++pass) {
        std::printf(" %8.2f", static_cast<double>(c[pass]) / instructions);
      }
      std::printf("\n");
    }
  }
}

// Two runs of the probe each with nothing streaming, every SM but the prober's and its partner's
// streaming, every SM streaming with 6, 3, 2 or 1 copies of 32 KB in flight per SM, and only 66,
// 33, 8 or 1 SMs streaming; ns per round trip (the handoffs one way) at the prober's measured
// clock, and the streams' rate over the launch (per SM too).
void bench_latency_probe(cudaStream_t stream, double copy_bytes_per_s) {
  constexpr uint64_t kStreamBytes = uint64_t{1} << 30;  // far beyond L2: every copy from DRAM
  constexpr int kChaseLines = 512;                      // 64 KB of 128-byte lines, L2-resident
  constexpr int kHops = 256;
  Buffer src(kStreamBytes), chase(kChaseLines * 128), words(4 * 32 * 4);
  Buffer results(kLatencyProbeResults * 8);
  BENCH_CUDA(cudaMemsetAsync(src.ptr, 1, kStreamBytes, stream));
  // A random cycle over the lines (a fixed seed): word 32 · i holds the next line's first word.
  std::vector<uint32_t> order(kChaseLines);
  for (int i = 0; i < kChaseLines; ++i) order[i] = static_cast<uint32_t>(i);
  uint64_t state = 0x9e3779b97f4a7c15ull;
  for (int i = kChaseLines - 1; i > 0; --i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    std::swap(order[i], order[(state >> 33) % static_cast<uint64_t>(i + 1)]);
  }
  int device = 0, num_sms = 0;
  BENCH_CUDA(cudaGetDevice(&device));
  BENCH_CUDA(cudaDeviceGetAttribute(&num_sms, cudaDevAttrMultiProcessorCount, device));
  std::vector<uint32_t> host(kChaseLines * 32, 0);
  for (int i = 0; i < kChaseLines; ++i) {
    host[32 * order[i]] = 32 * order[(i + 1) % kChaseLines];
  }
  BENCH_CUDA(
      cudaMemcpyAsync(chase.ptr, host.data(), host.size() * 4, cudaMemcpyHostToDevice, stream));
  cudaEvent_t begin, end;
  BENCH_CUDA(cudaEventCreate(&begin));
  BENCH_CUDA(cudaEventCreate(&end));
  std::printf("\n== a grid-wide handoff's round trips, ns each (one block per SM; %d hops) ==\n",
              kHops);
  std::printf("%-20s %8s %8s %9s %9s %9s %12s %s\n", "traffic (KB in flight)", "L2 load", "atomic",
              "handoff", "relaxed", "SM clock", "stream", "(of copy)  per SM");
  struct Case {
    LatencyProbeTraffic traffic;
    int copies_in_flight;
    int streaming_blocks;  // 0: all
  };
  constexpr int kSlots = kLatencyProbeSlots;
  constexpr LatencyProbeTraffic kAll = LatencyProbeTraffic::kAll;
  for (const Case c : {Case{LatencyProbeTraffic::kNone, kSlots, 0},
                       Case{LatencyProbeTraffic::kOthers, kSlots, 0}, Case{kAll, kSlots, 0},
                       Case{kAll, 3, 0}, Case{kAll, 2, 0}, Case{kAll, 1, 0}, Case{kAll, kSlots, 66},
                       Case{kAll, kSlots, 33}, Case{kAll, kSlots, 8}, Case{kAll, kSlots, 1}}) {
    for (int run = 0; run < 2; ++run) {
      LatencyProbeArgs a;
      a.stream_src = src.as<uint8_t>();
      a.stream_bytes = kStreamBytes;
      a.traffic = c.traffic;
      a.copies_in_flight = c.copies_in_flight;
      a.streaming_blocks = c.streaming_blocks;
      a.chase = chase.as<uint32_t>();
      a.words = words.as<unsigned>();
      a.hops = kHops;
      a.results = results.as<uint64_t>();
      BENCH_CUDA(cudaEventRecord(begin, stream));
      BENCH_CUDA(launch_latency_probe(a, stream));
      BENCH_CUDA(cudaEventRecord(end, stream));
      uint64_t r[kLatencyProbeResults] = {};
      BENCH_CUDA(cudaMemcpyAsync(r, results.ptr, sizeof(r), cudaMemcpyDeviceToHost, stream));
      BENCH_CUDA(cudaStreamSynchronize(stream));
      float ms = 0.0f;
      BENCH_CUDA(cudaEventElapsedTime(&ms, begin, end));
      const double ghz = static_cast<double>(r[kProbeCycles]) / static_cast<double>(r[kProbeNs]);
      const auto ns = [&](int field, double per) {
        return static_cast<double>(r[field]) / ghz / (kHops * per);
      };
      const double gbps = static_cast<double>(r[kProbeStreamedBytes]) / (ms * 1e-3) / 1e9;
      const char* name = c.traffic == LatencyProbeTraffic::kNone     ? "none"
                         : c.traffic == LatencyProbeTraffic::kOthers ? "others"
                                                                     : "all";
      char traffic[32];
      if (c.streaming_blocks > 0) {
        std::snprintf(traffic, sizeof(traffic), "%d SMs", c.streaming_blocks);
      } else {
        std::snprintf(traffic, sizeof(traffic), "%s", name);
      }
      const int streaming = c.traffic == LatencyProbeTraffic::kNone     ? 0
                            : c.traffic == LatencyProbeTraffic::kOthers ? num_sms - 2
                            : c.streaming_blocks > 0                    ? c.streaming_blocks
                                                                        : num_sms;
      std::printf("%-9s (%4u KB)     %8.0f %8.0f %9.0f %9.0f %5.2f GHz %7.0f GB/s %5.1f%% %6.1f\n",
                  traffic,
                  c.traffic == LatencyProbeTraffic::kNone
                      ? 0u
                      : c.copies_in_flight * kLatencyProbeSlotBytes / 1024,
                  ns(kProbeChaseCycles, 1.0), ns(kProbeAtomicCycles, 1.0),
                  ns(kProbePingPongCycles, 2.0), ns(kProbeRelaxedPingPongCycles, 2.0), ghz, gbps,
                  100.0 * gbps * 1e9 / copy_bytes_per_s, streaming > 0 ? gbps / streaming : 0.0);
    }
  }
  BENCH_CUDA(cudaEventDestroy(begin));
  BENCH_CUDA(cudaEventDestroy(end));
  bench_code_probe(stream);
}

}  // namespace cellm::kernels
