// cuda_defaults: the slicing plan cellm recommends for programs served by the CUDA executor —
// the defaults `cellm export` should write, and what `cellm bench` uses for random geometries.
//
// Decode calls replay a CUDA graph captured once per static width, padding a narrower slice to
// the next width through the scratch cell; prefill calls run eagerly at any width in [m, W].
// Both run the same kernels for the same number of rows (the matrix kernels pick the one-pass
// small-M path or tensor cores by row count, whatever the method), so a graph only saves launch
// overhead, and padding rows cost little while the step is memory-bound (below about 200 rows for
// bf16 weights on an H200, where the weight bytes dominate). Hence: graphs for every
// power of two up to 256, and m just above the widest graph, so every step of up to 256 tokens
// (256 concurrent decodes, or decodes plus a short prompt chunk) is one graph replay and only
// wider steps run eagerly. Header-only, no CUDA types: the exporter (and anyone) may include it.
// Thread-safety: constants.
#pragma once

#include <array>
#include <cstdint>

namespace cellm {

inline constexpr std::array<int32_t, 9> kCudaDecodeWidths = {1, 2, 4, 8, 16, 32, 64, 128, 256};
// One past the widest decode graph: shorter slices replay a graph, longer ones run as prefill.
inline constexpr int32_t kCudaMinPrefillChunk = 257;
inline constexpr int32_t kCudaMaxStepTokens = 512;

}  // namespace cellm
