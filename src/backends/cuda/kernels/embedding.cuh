// embedding: gathers token rows of an embedding table of any device weight type
// (weight_layout.h: f32, f16, bf16, q8_0, q4_0, q4_K, q6_K, GGUF or interleaved layout) into f32
// activations on the GPU, with the CPU oracle's dequantization (cpu_embed) bit for bit. Token ids
// are device data: an id outside the table yields a NaN row (the executor validates ids on the
// host). Stream-ordered, capturable. Thread-safety: launches on a stream.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/kernels/weight_layout.h"
#include "core/status.h"

namespace cellm::kernels {

struct EmbeddingParams {
  DeviceWeight table;  // [vocab rows, hidden cols]
  int32_t num_tokens = 0;
  const int32_t* tokens = nullptr;  // [num_tokens] device
  float* out = nullptr;             // [num_tokens, out_stride] f32
  int64_t out_stride = 0;
  float scale = 1.0f;  // every value multiplied by this, rounded once (gemma3: sqrt(hidden))
};

Status launch_embedding(const EmbeddingParams& params, cudaStream_t stream);

}  // namespace cellm::kernels
