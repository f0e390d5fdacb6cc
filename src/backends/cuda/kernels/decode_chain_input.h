// decode_chain_input: the int8 input of a chain's product — one row of f32 activations quantized
// (RMS-normed where a norm is given) by the quantize launch, as the decode step feeds its
// products. Shared by the chains of decode_chain_benches.h (decode_chain_benches.cpp,
// decode_step_chain_bench.cpp). Benchmark only. Thread-safety: launches on the given stream.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/kernels/bench_support.h"
#include "backends/cuda/kernels/decode_matmul.cuh"

namespace cellm::kernels {

// Launches the int8 quantization of one row of k f32 activations at src (RMS-normed with `norm`
// when given) into xq / xs and points p's int8 input at them.
void quantize_chain_input(const float* src, int64_t k, const float* norm, const bench::Buffer& xq,
                          const bench::Buffer& xs, cudaStream_t stream, DecodeMatmulParams* p);

}  // namespace cellm::kernels
