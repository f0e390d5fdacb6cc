// row_gather: copies selected rows of an f32 matrix into a dense one on the GPU — the kept rows
// of a step's hidden states before the final norm and LM head. Stream-ordered, capturable.
// Row indices are device data; an index outside [0, num_src_rows) yields a NaN row (the caller
// validates indices on the host). Thread-safety: launches on a stream.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/status.h"

namespace cellm::kernels {

struct RowGatherParams {
  int32_t num_rows = 0;           // K rows to gather
  int64_t dim = 0;                // elements per row
  const int32_t* rows = nullptr;  // [num_rows] device: source row of each output row
  const float* src = nullptr;     // [num_src_rows, src_stride] f32
  int64_t src_stride = 0;
  int64_t num_src_rows = 0;
  float* dst = nullptr;  // [num_rows, dst_stride] f32 (must not overlap src)
  int64_t dst_stride = 0;
};

Status launch_row_gather(const RowGatherParams& params, cudaStream_t stream);

}  // namespace cellm::kernels
