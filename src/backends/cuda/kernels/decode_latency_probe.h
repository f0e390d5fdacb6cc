// decode_latency_probe: what one step of a grid-wide handoff costs while the bus streams weights —
// the question behind decode.md's one-launch chains (decode_persistent_bench.h,
// decode_ring_bench.h), whose stage boundaries took 22 µs of a layer with the weights streaming
// and 14 without. One block per SM; in every block one thread may stream a buffer into a ring of
// shared-memory slots by bulk copies (as the ring chain's producer does, nothing consuming),
// while one thread of block 0 times three dependent chains: loads of L2-resident words
// (`ld.global.cg`), atomic adds that return their value, and a ping-pong with a
// thread of the last block (the two halves of every grid barrier and handover), once with
// release/acquire and once relaxed. The streams can be held to a number of copies in flight per
// block, or to the first blocks only (how much one SM can pull). Run unloaded and loaded, the
// difference is what the traffic adds to each round trip (decode.md version 18).
// The decode benchmark runs it (`cuda_decode_bench --latency`). Benchmark only; not linked into
// the backend. Thread-safety: launches on the given stream.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace cellm::kernels {

enum class LatencyProbeTraffic : int { kNone, kAll, kOthers };

inline constexpr uint32_t kLatencyProbeSlotBytes = 32768;
inline constexpr int kLatencyProbeSlots = 6;  // 192 KB of slots: one block per SM

struct LatencyProbeArgs {
  const uint8_t* stream_src = nullptr;  // [stream_bytes] streamed by the loading blocks
  uint64_t stream_bytes = 0;  // a multiple of kLatencyProbeSlotBytes, ≥ 1 slot per block
  // Which blocks stream: none (the unloaded figures), all, or all but the prober's and its
  // partner's (the traffic of the chip without that of their own SMs).
  LatencyProbeTraffic traffic = LatencyProbeTraffic::kNone;
  const uint32_t* chase = nullptr;  // [chase_words]: word i holds the index of the next hop
  unsigned* words = nullptr;        // [4 · 32] zeroed by the launcher: counter, ping, pong, stop
  int hops = 256;                   // per chain
  int copies_in_flight = kLatencyProbeSlots;  // per streaming block, 1 … kLatencyProbeSlots
  int streaming_blocks = 0;     // kAll: only blocks [0, streaming_blocks) stream (0: every block)
  uint64_t* results = nullptr;  // [kLatencyProbeResults], written by block 0
};

// results[]: cycles of each chain (all hops), the prober's SM clock over the chains (cycles and
// globaltimer ns), and the bytes every streaming block copied (summed). The ping-pong runs twice:
// with release stores and acquire loads (a correct handoff of data), and relaxed (the flag's own
// latency, which orders nothing else).
enum LatencyProbeResult : int {
  kProbeChaseCycles = 0,
  kProbeAtomicCycles,
  kProbePingPongCycles,
  kProbeRelaxedPingPongCycles,
  kProbeCycles,
  kProbeNs,
  kProbeStreamedBytes,
  kLatencyProbeResults
};

// Zeroes the words and results, then launches one block per SM on `stream`.
cudaError_t launch_latency_probe(const LatencyProbeArgs& args, cudaStream_t stream);

// The benchmark's tables (decode_latency_bench.cpp): two runs of the probe in each case, ns per
// round trip and the streams' rate against `copy_bytes_per_s` (the copy kernel's); then
// decode_code_probe.h's cycles per instruction.
void bench_latency_probe(cudaStream_t stream, double copy_bytes_per_s);

}  // namespace cellm::kernels
