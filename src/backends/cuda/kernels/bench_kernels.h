// bench_kernels: kernels for the kernel benchmark only — other rows-per-block choices of the
// small-M kernel at M = 1 (timed beside the shipped choice to tune gemv_<type>.cu) and an SM copy
// kernel that measures the memory bandwidth ceiling. Not linked into the backend.
// Thread-safety: launches on the given stream.
#pragma once

#include <cuda_runtime.h>

#include "backends/cuda/kernels/gemv_launch.h"

namespace cellm::kernels {

// Launches the M = 1 kernel for `type` with `rows_per_block` ∈ {1, 2, 4, 8}; false when that
// variant is not built (args as launch_gemv_<type>; args.num_tokens must be 1).
bool launch_gemv_variant(TensorType type, int rows_per_block, const GemvArgs& args,
                         cudaStream_t stream);

// Copies `bytes` (a multiple of 16; both pointers 16-byte aligned) with 16-byte loads and stores
// from a grid sized to fill the GPU.
void launch_copy_kernel(const void* src, void* dst, size_t bytes, cudaStream_t stream);

}  // namespace cellm::kernels
