// bench_kernels: kernels for the kernel benchmark only — other rows-per-block choices of the
// small-M kernel at M = 1 (timed beside the shipped choice to tune gemv_<type>.cu), an SM copy
// kernel that measures the memory bandwidth ceiling, and a grid-wide barrier (what a persistent
// decode kernel would pay between stages). Not linked into the backend.
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

// One cooperative launch of `blocks` blocks of 128 threads passing `rounds` grid-wide barriers in
// a row: thread 0 of a block counts its arrival in sync[0]; the last to arrive resets the count
// and bumps the generation sync[1], for which the others spin. `sync`: 2 zeroed device words
// (left zeroed in sync[0]). Returns the launch's error (too many blocks to be co-resident: an
// error, never a hang).
cudaError_t launch_grid_barrier_rounds(int blocks, int rounds, unsigned* sync, cudaStream_t stream);

}  // namespace cellm::kernels
