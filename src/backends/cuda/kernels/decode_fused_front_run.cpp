// decode_fused_front_run: bench_fused_front (decode_fused_front_bench.h), the host side of the
// fused front's timing.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <vector>

#include "backends/cuda/kernels/bench_support.h"
#include "backends/cuda/kernels/decode_fused_front_bench.h"

namespace cellm::kernels {

void bench_fused_front(cudaStream_t stream, float* x, const float* norm_weight,
                       const std::function<void()>& reset,
                       const std::function<cudaError_t(int)>& mlp,
                       const std::function<void(const char*, double)>& report) {
  constexpr int kLayers = 32;
  int clusters = 0;
  for (const int blocks : {16, 14, 12, 8, 4}) {
    BENCH_CUDA(fused_front_active_clusters(blocks, &clusters));
    std::printf("fused front: %d clusters of %d one-per-SM blocks fit at once\n", clusters, blocks);
  }
  BENCH_CUDA(fused_front_active_clusters(kFusedFrontClusterBlocks, &clusters));
  // Where the 8 groups do not fit at once, the first `clusters` run alone: the design's time on
  // a device where they would (the bytes 7 / 8 of a layer's), not a step's.
  const int num_groups = std::min(clusters, kFusedFrontClusters);
  if (num_groups < 1) return;
  std::printf("fused front: %d of %d groups run\n", num_groups, kFusedFrontClusters);
  std::vector<std::unique_ptr<bench::Buffer>> buffers;
  std::vector<FusedFrontArgs> layers(kLayers);
  const auto allocate = [&](size_t bytes) {
    buffers.push_back(std::make_unique<bench::Buffer>(bytes));
    return buffers.back()->as<uint8_t>();
  };
  float* partials = reinterpret_cast<float*>(allocate(4 * kFusedFrontClusters * kFusedFrontHidden));
  constexpr int64_t kChunk = kFusedFrontLayerBytes / kFusedFrontClusters / kFusedFrontClusterBlocks;
  for (int l = 0; l < kLayers; ++l) {
    uint8_t* weights = allocate(kFusedFrontLayerBytes);
    for (int64_t block = 0; block < kFusedFrontClusters * kFusedFrontClusterBlocks; ++block) {
      bench::fill(weights + block * kChunk, TensorType::kQ4_0, kFusedFrontQkvRows, 4096,
                  1000 + 300 * l + block, 0.02f, stream);
      bench::fill(weights + block * kChunk + kFusedFrontQkvRows * 2304, TensorType::kQ4_0,
                  kFusedFrontOutputRows, 512, 100000 + 300 * l + block, 0.02f, stream);
    }
    FusedFrontArgs& a = layers[l];
    a.weights = weights;
    for (uint16_t** cache : {&a.k_cache, &a.v_cache}) {
      *cache = reinterpret_cast<uint16_t*>(allocate(kFusedFrontCacheBytes));
      bench::fill(*cache, TensorType::kBF16, kFusedFrontPositions * 8, 128, 7000 + 2 * l, 1.0f,
                  stream);
    }
    a.norm_weight = norm_weight;
    a.x = x;
    a.partials = partials;
    a.num_groups = num_groups;
  }
  BENCH_CUDA(cudaStreamSynchronize(stream));
  const auto time = [&](const char* name, bool attention, bool atomic_output, bool with_mlp,
                        bool early_trigger = false) {
    const double t = bench::time_graph(stream, [&] {
      reset();
      for (int l = 0; l < kLayers; ++l) {
        FusedFrontArgs a = layers[l];
        a.attention = attention;
        a.atomic_output = atomic_output;
        a.early_trigger = early_trigger;
        BENCH_CUDA(launch_fused_front(a, stream));
        if (with_mlp) BENCH_CUDA(mlp(l));
      }
    });
    report(name, t);
  };
  time("fused front + MLP launches", true, false, true);
  time("  the same, no attention", false, false, true);
  time("  the same, early trigger", true, false, true, true);
  time("  the same, atomic output", true, true, true);
  time("  fused front alone", true, false, false);
  time("  fused front alone, no attention", false, false, false);
  time("  fused front alone, atomic output", true, true, false);
  // Finite values after a run (not checked against anything: timing only).
  reset();
  for (int l = 0; l < kLayers; ++l) {
    BENCH_CUDA(launch_fused_front(layers[l], stream));
    BENCH_CUDA(mlp(l));
  }
  std::vector<float> host(kFusedFrontHidden);
  BENCH_CUDA(
      cudaMemcpyAsync(host.data(), x, 4 * kFusedFrontHidden, cudaMemcpyDeviceToHost, stream));
  BENCH_CUDA(cudaStreamSynchronize(stream));
  int finite = 0;
  for (const float v : host) finite += std::isfinite(v) ? 1 : 0;
  std::printf("fused front: %d of %lld residual values finite after 32 layers\n", finite,
              static_cast<long long>(kFusedFrontHidden));
}

}  // namespace cellm::kernels
