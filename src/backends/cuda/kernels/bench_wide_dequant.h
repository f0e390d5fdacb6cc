// bench_wide_dequant: cuda_kernels_bench's --wide-dequant section — a wide Q8_0 / Q4_0 product
// by the fused kernel against dequantizing to bf16 + cuBLAS (in tiles, whole, or in chunks
// overlapped on a second stream). Benchmark code only; single-threaded.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

namespace cellm::kernels {

void bench_wide_dequant(cudaStream_t stream, cublasHandle_t cublas, double copy_bw, double tc_rate);

}  // namespace cellm::kernels
