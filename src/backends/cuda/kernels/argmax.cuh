// argmax: the greedy token of each logits row on the GPU — the index of the largest finite
// value, the lowest index on ties (the host sampler's rule), -1 when a row has no finite value.
// Stream-ordered, capturable. Thread-safety: launches on a stream.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/status.h"

namespace cellm::kernels {

struct ArgmaxParams {
  int32_t num_rows = 0;
  int64_t vocab = 0;
  const float* logits = nullptr;  // [num_rows, stride] f32
  int64_t stride = 0;
  int32_t* out = nullptr;  // [num_rows] token ids
};

Status launch_argmax(const ArgmaxParams& params, cudaStream_t stream);

}  // namespace cellm::kernels
