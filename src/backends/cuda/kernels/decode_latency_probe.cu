// decode_latency_probe: the round trips of a grid-wide handoff, with and without weight traffic
// (see the header). Warp 0's first thread of every block streams (when asked); warp 1's first
// thread of block 0 times the chains, and that of the last block answers the ping-pong.
#include "backends/cuda/kernels/decode_latency_probe.h"
#include "backends/cuda/kernels/decode_ring_parts.cuh"

namespace cellm::kernels {
namespace {

#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)

using chain_bench::load_acquire;
using ring::bulk_copy;
using ring::evict_first_policy;
using ring::global_ns;
using ring::kWaitLimitNs;
using ring::mbarrier_expect_bytes;
using ring::mbarrier_init;
using ring::mbarrier_wait;

__device__ __forceinline__ void store_release(unsigned* p, unsigned v) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ void store_relaxed(unsigned* p, unsigned v) {
  asm volatile("st.relaxed.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ unsigned load_relaxed(const unsigned* p) {
  unsigned v;
  asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// Waits until *p == want (acquire, or relaxed), trapping after kWaitLimitNs: a probe must not
// hang.
template <bool kRelaxed>
__device__ __forceinline__ void wait_for(const unsigned* p, unsigned want) {
  const auto load = [p] { return kRelaxed ? load_relaxed(p) : load_acquire(p); };
  if (load() == want) return;
  const uint64_t start = global_ns();
  while (load() != want) {
    if (global_ns() - start > kWaitLimitNs) __trap();
  }
}

// One side of the ping-pong: `first` sends and then waits, the other waits and then answers.
template <bool kRelaxed>
__device__ void ping_pong(unsigned* send, const unsigned* receive, int hops, bool first,
                          unsigned base) {
  for (int h = 1; h <= hops; ++h) {
    const unsigned value = base + static_cast<unsigned>(h);
    if (!first) wait_for<kRelaxed>(receive, value);
    if (kRelaxed) {
      store_relaxed(send, value);
    } else {
      store_release(send, value);
    }
    if (first) wait_for<kRelaxed>(receive, value);
  }
}

// The ring chain's producer without consumers: slot i % slots gets the block's i-th slice of the
// buffer once copy i - copies_in_flight has landed (and with it the copy before it in that
// slot), until the prober says stop.
__device__ void stream_slices(const LatencyProbeArgs& a, uint8_t* slots, uint64_t* full,
                              const unsigned* stop) {
  const uint64_t policy = evict_first_policy();
  const uint64_t num_slices = a.stream_bytes / kLatencyProbeSlotBytes;
  uint64_t next = blockIdx.x;
  uint64_t copied = 0;
  uint32_t i = 0;
  const uint64_t start = global_ns();
  while (true) {
    const uint32_t slot = i % kLatencyProbeSlots;
    if (i >= static_cast<uint32_t>(a.copies_in_flight)) {
      const uint32_t landed = i - static_cast<uint32_t>(a.copies_in_flight);
      mbarrier_wait(&full[landed % kLatencyProbeSlots], (landed / kLatencyProbeSlots) & 1);
    }
    // Copies may land out of order: the slot's last one too, before its barrier is armed again.
    if (i >= kLatencyProbeSlots) mbarrier_wait(&full[slot], (i / kLatencyProbeSlots - 1) & 1);
    if (load_relaxed(stop) != 0 || global_ns() - start > kWaitLimitNs) break;
    mbarrier_expect_bytes(&full[slot], kLatencyProbeSlotBytes);
    bulk_copy(slots + static_cast<size_t>(slot) * kLatencyProbeSlotBytes,
              a.stream_src + (next % num_slices) * kLatencyProbeSlotBytes, kLatencyProbeSlotBytes,
              &full[slot], policy);
    next += gridDim.x;
    copied += kLatencyProbeSlotBytes;
    ++i;
  }
  // The copies still in flight land before the block's shared memory goes away.
  for (uint32_t j = i > kLatencyProbeSlots ? i - kLatencyProbeSlots : 0; j < i; ++j) {
    mbarrier_wait(&full[j % kLatencyProbeSlots], (j / kLatencyProbeSlots) & 1);
  }
  atomicAdd(reinterpret_cast<unsigned long long*>(&a.results[kProbeStreamedBytes]),
            static_cast<unsigned long long>(copied));
}

// Block 0's prober: the three chains, then stop.
__device__ void probe(const LatencyProbeArgs& a, unsigned* counter, unsigned* ping,
                      const unsigned* pong, unsigned* stop) {
  const uint64_t settle = global_ns();
  while (global_ns() - settle < 20000) {  // 20 µs: the streams reach their rate
  }
  uint32_t index = 0;
  for (int h = 0; h < a.hops; ++h) index = __ldcg(a.chase + index);  // the chain into L2
  const long long c0 = clock64();
  const uint64_t n0 = global_ns();
  for (int h = 0; h < a.hops; ++h) index = __ldcg(a.chase + index);
  const long long c1 = clock64();
  unsigned value = index & 1u;  // 0 or 1: the first atomic waits for the last load
  for (int h = 0; h < a.hops; ++h) value = atomicAdd(counter + (value >> 31), 1u);
  const long long c2 = clock64();
  ping_pong<false>(ping, pong, a.hops, true, 0);
  const long long c3 = clock64();
  ping_pong<true>(ping, pong, a.hops, true, static_cast<unsigned>(a.hops));
  const long long c4 = clock64();
  const uint64_t n4 = global_ns();
  store_release(stop, 1u);
  a.results[kProbeChaseCycles] = static_cast<uint64_t>(c1 - c0);
  a.results[kProbeAtomicCycles] = static_cast<uint64_t>(c2 - c1) + (value == 0xffffffffu ? 1 : 0);
  a.results[kProbePingPongCycles] = static_cast<uint64_t>(c3 - c2);
  a.results[kProbeRelaxedPingPongCycles] = static_cast<uint64_t>(c4 - c3);
  a.results[kProbeCycles] = static_cast<uint64_t>(c4 - c0);
  a.results[kProbeNs] = n4 - n0;
}

#endif  // __CUDA_ARCH__ >= 900

__global__ void __launch_bounds__(64, 1) latency_probe_kernel(const LatencyProbeArgs a) {
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)
  extern __shared__ __align__(128) uint8_t slots[];  // [slots][kLatencyProbeSlotBytes]
  __shared__ uint64_t full[kLatencyProbeSlots];
  unsigned* counter = a.words;
  unsigned* ping = a.words + 32;  // each word in a line of its own
  unsigned* pong = a.words + 64;
  unsigned* stop = a.words + 96;
  if (threadIdx.x == 0) {
    for (int i = 0; i < kLatencyProbeSlots; ++i) mbarrier_init(&full[i], 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (threadIdx.x % 32 != 0) return;
  const bool prober_or_partner = blockIdx.x == 0 || blockIdx.x == gridDim.x - 1;
  if (threadIdx.x == 0) {
    const bool in_range =
        a.streaming_blocks <= 0 || static_cast<int>(blockIdx.x) < a.streaming_blocks;
    if ((a.traffic == LatencyProbeTraffic::kAll && in_range) ||
        (a.traffic == LatencyProbeTraffic::kOthers && !prober_or_partner)) {
      stream_slices(a, slots, full, stop);
    }
  } else if (blockIdx.x == 0) {
    probe(a, counter, ping, pong, stop);
  } else if (blockIdx.x == gridDim.x - 1) {
    ping_pong<false>(pong, ping, a.hops, false, 0);
    ping_pong<true>(pong, ping, a.hops, false, static_cast<unsigned>(a.hops));
  }
#else
  (void)a;
#endif
}

}  // namespace

cudaError_t launch_latency_probe(const LatencyProbeArgs& a, cudaStream_t stream) {
  if (a.words == nullptr || a.results == nullptr || a.chase == nullptr || a.hops <= 0 ||
      a.copies_in_flight < 1 || a.copies_in_flight > kLatencyProbeSlots ||
      (a.traffic != LatencyProbeTraffic::kNone &&
       (a.stream_src == nullptr || a.stream_bytes % kLatencyProbeSlotBytes != 0))) {
    return cudaErrorInvalidValue;
  }
  int device = 0;
  int num_sms = 0;
  cudaError_t error = cudaGetDevice(&device);
  if (error != cudaSuccess) return error;
  error = cudaDeviceGetAttribute(&num_sms, cudaDevAttrMultiProcessorCount, device);
  if (error != cudaSuccess) return error;
  if (num_sms < 2 || (a.traffic != LatencyProbeTraffic::kNone &&
                      a.stream_bytes < static_cast<uint64_t>(num_sms) * kLatencyProbeSlotBytes)) {
    return cudaErrorInvalidValue;
  }
  constexpr size_t kSmemBytes = static_cast<size_t>(kLatencyProbeSlots) * kLatencyProbeSlotBytes;
  error = cudaFuncSetAttribute(latency_probe_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(kSmemBytes));
  if (error != cudaSuccess) return error;
  if ((error = cudaMemsetAsync(a.words, 0, 4 * 32 * sizeof(unsigned), stream)) != cudaSuccess ||
      (error = cudaMemsetAsync(a.results, 0, kLatencyProbeResults * sizeof(uint64_t), stream)) !=
          cudaSuccess) {
    return error;
  }
  // Cooperative: the prober and its partner must run at once (one block per SM, all resident).
  return chain_bench::launch_cooperative(latency_probe_kernel, a, num_sms, 64, kSmemBytes, stream);
}

}  // namespace cellm::kernels
