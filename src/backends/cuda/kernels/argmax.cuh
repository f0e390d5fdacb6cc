// argmax: the greedy token of each logits row on the GPU — the index of the largest finite
// value, the lowest index on ties (the host sampler's rule), -1 when a row has no finite value.
// With scratch, each row is split over several blocks (a few microseconds for a 128K vocabulary
// instead of one block's long walk) and the last block of a row to finish merges their results;
// without, one block per row. Launched with programmatic dependent launch (pdl.cuh).
// Stream-ordered, capturable. Thread-safety: launches on a stream; one launch at a time per
// scratch buffer.
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
  // Optional: argmax_scratch_bytes(num_rows) bytes, zeroed before the first launch (every launch
  // leaves it zeroed), 16-byte aligned; null runs one block per row.
  void* scratch = nullptr;
  size_t scratch_bytes = 0;
};

size_t argmax_scratch_bytes(int32_t num_rows);

Status launch_argmax(const ArgmaxParams& params, cudaStream_t stream);

}  // namespace cellm::kernels
