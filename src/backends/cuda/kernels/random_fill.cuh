// random_fill: fills a device weight (weight_layout.h, any supported type and layout) with
// deterministic pseudo-random values from a seed, on the GPU — for benchmarks that build an
// 8B-geometry model without reading a file. Float types get values uniform in ±scale (never 0);
// quantized types get random quants under block scales drawn so values stay within about
// ±scale: Q8_0 d ≈ scale/127 and Q4_0 d ≈ scale/8 (times a random factor in [0.5, 1]), Q4_K
// and Q6_K sub-block scales bounded so that d·sc·q ≤ scale, every sub-block scale non-zero.
// Block scales are never below 2^-14 (normal f16), so for Q8_0 with scale < 0.016 values reach
// up to 128 · 2^-14 instead. The same (seed, shape, type) always gives the same bytes.
// Stream-ordered, capturable.
// Thread-safety: launches on a stream.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/kernels/weight_layout.h"
#include "core/status.h"

namespace cellm::kernels {

struct RandomFillParams {
  void* data = nullptr;  // [num_rows, device_row_bytes(type, num_cols)] bytes, 16-byte aligned
  TensorType type = TensorType::kF32;
  int64_t num_rows = 0;
  int64_t num_cols = 0;
  uint64_t seed = 0;
  float scale = 1.0f;  // > 0
};

Status launch_random_fill(const RandomFillParams& params, cudaStream_t stream);

}  // namespace cellm::kernels
