// decode_fused_front_bench: a speed-of-light prototype of decode.md's last open route for q4_0 at
// batch 1 — a layer's whole front (the normed quantization of the residual, q|k|v, RoPE, the new
// token's K/V, the attention over 512 positions and the output product) as ONE cluster launch per
// layer, Llama-3.1-8B geometry only (hidden 4096, 32 q heads, 8 kv heads of 128 dims).
//
// A cluster of 14 blocks (one per SM, 512 threads) owns one kv head group: 4 q heads, 1 k and 1 v
// head. Its weights are repacked per block into one contiguous chunk — 56 q|k|v rows (RoPE pairs
// within a block) and the output product's 293 rows × the group's 512 input columns (split-K over
// the groups) — and the whole chunk (208 KB) starts streaming at the kernel's start, before
// pdl_wait(): the q|k|v rows by bulk copies into shared memory, the output rows into registers.
// The front's 23.9 MB stream at once, whatever the chain of dependent steps after it. Then: every
// block norms and quantizes the residual itself, multiplies its 48 rows, rotates q and k, writes
// the token's k and v, all-gathers q, k and v through distributed shared memory; each block scores
// 37 of the 512 positions for the 4 heads (its K/V tile also copied before pdl_wait()) and pushes
// its softmax state to the owners of 32-dim units (reduce-scatter); each owner merges and quantizes
// its unit and all-gathers it; each block multiplies its 293 output rows by the group's 512 values
// and writes a partial. A second launch adds the 8 groups' partials to the residual in a fixed
// order.
//
// TIMING ONLY: the weights are random bytes in the repacked layout (not a repack of the chain's
// weights), the K/V cache random, the cell list the identity; the values are computed in full
// but not checked. Benchmark only (cuda_decode_bench --persistent); not linked into the backend.
// Thread-safety: launches on the given stream.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>

namespace cellm::kernels {

inline constexpr int kFusedFrontClusters = 8;  // kv head groups
// Blocks per group: 14, as a cluster of 16 one-block-per-SM blocks fits only 7 times on the H200
// (one GPC has fewer than 16 SMs), a cluster of 14 in every GPC.
inline constexpr int kFusedFrontClusterBlocks = 14;
inline constexpr int64_t kFusedFrontHidden = 4096;
inline constexpr int64_t kFusedFrontPositions = 512;  // the session's positions, the token's last
// Each block does the largest share of the uneven split (768 / 14 q|k|v rows, 8 rows more for
// whole copies; 4096 / 14 output rows), so the timing errs slow by ≈ 2% of the bytes.
inline constexpr int kFusedFrontQkvRows = 56;
inline constexpr int kFusedFrontOutputRows = 293;
// Bytes of one layer's repacked front weights.
inline constexpr int64_t kFusedFrontLayerBytes =
    int64_t{kFusedFrontClusters} * kFusedFrontClusterBlocks *
    (kFusedFrontQkvRows * 2304 + kFusedFrontOutputRows * 288);
// Bytes of one layer's K (or V) cache: [positions, 8 kv heads, 128] bf16.
inline constexpr int64_t kFusedFrontCacheBytes = kFusedFrontPositions * 8 * 128 * 2;

struct FusedFrontArgs {
  const uint8_t* weights = nullptr;    // [kFusedFrontLayerBytes] the layer's repacked front
  uint16_t* k_cache = nullptr;         // [positions, 8, 128] bf16; the last position written
  uint16_t* v_cache = nullptr;         // the same for V
  const float* norm_weight = nullptr;  // [4096] f32
  float norm_eps = 1e-5f;
  float rope_theta = 500000.0f;
  float* x = nullptr;          // [4096] f32 residual: read, then += the output product
  float* partials = nullptr;   // [8, 4096] f32 scratch
  bool attention = true;       // false: the attention left out (q stands for its output)
  bool atomic_output = false;  // the partials added by atomics instead (races the reads of x:
                               // timing only, to price the second launch)
  bool early_trigger = false;  // the next kernel may launch at once (its blocks take free SMs)
  int num_groups = kFusedFrontClusters;  // fewer: only the first groups run (when 8 do not fit)
};

// The kernel's fit on this device: how many clusters of `cluster_blocks` of its blocks run at once
// (cudaOccupancyMaxActiveClusters), or a CUDA error.
cudaError_t fused_front_active_clusters(int cluster_blocks, int* clusters);

// The front of one layer: the cluster launch, then the partials' sum (both with programmatic
// dependent launch) unless args.atomic_output.
cudaError_t launch_fused_front(const FusedFrontArgs& args, cudaStream_t stream);

// Times 32 layers of fused fronts (their own random weights and K/V caches) on x: alone, without
// the attention, with atomics for the partials' launch, and each followed by `mlp(l)`'s launches
// of layer l's MLP; `report(name, seconds)` prints a line, `reset()` restores x.
void bench_fused_front(cudaStream_t stream, float* x, const float* norm_weight,
                       const std::function<void()>& reset,
                       const std::function<cudaError_t(int)>& mlp,
                       const std::function<void(const char*, double)>& report);

}  // namespace cellm::kernels
