// cluster_common: thread-block-cluster helpers for sm_90 kernels — the halves of barrier.cluster,
// a block's rank in its cluster, and stores into another block's shared memory (distributed
// shared memory). It knows nothing of what a kernel exchanges. Included by the decode attention's
// cluster kernel and the fused-front benchmark; .cu files compiled for sm_90 only.
// Thread-safety: device functions; ordering is the barriers' (a store is visible to its target
// after a release arrival and the target's acquire wait).
#pragma once

#include <cstdint>

namespace cellm::kernels {

// barrier.cluster in its two halves: every thread of every block of the cluster arrives, and
// waits for the others' arrival before its next arrival.
__device__ __forceinline__ void cluster_arrive_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void cluster_arrive_release() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void cluster_wait_acquire() {
  asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}

__device__ __forceinline__ int cluster_block_rank() {
  uint32_t rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  return static_cast<int>(rank);
}

// The shared::cluster address of `p` (in this block's shared memory) in block `rank`'s, and
// stores there.
__device__ __forceinline__ uint32_t cluster_address(const void* p, int rank) {
  const auto address = static_cast<uint32_t>(__cvta_generic_to_shared(p));
  uint32_t remote = 0;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(address), "r"(rank));
  return remote;
}
__device__ __forceinline__ void store_cluster_float2(uint32_t address, float x, float y) {
  asm volatile("st.shared::cluster.v2.f32 [%0], {%1, %2};\n" ::"r"(address), "f"(x), "f"(y)
               : "memory");
}
__device__ __forceinline__ void store_cluster(uint32_t address, float v) {
  asm volatile("st.shared::cluster.f32 [%0], %1;\n" ::"r"(address), "f"(v) : "memory");
}
__device__ __forceinline__ void store_cluster(uint32_t address, uint32_t v) {
  asm volatile("st.shared::cluster.u32 [%0], %1;\n" ::"r"(address), "r"(v) : "memory");
}

}  // namespace cellm::kernels
