// decode_bench_kernels: M = 1 launches of the fused decode product (gemv_decode.cuh) with other
// rows per block (R) and chunks per row in flight (D) than the shipped choice, for the decode
// benchmark's tuning table. Benchmark only; not linked into the backend.
// Thread-safety: launches on the given stream.
#pragma once

#include <cuda_runtime.h>

#include <vector>

#include "backends/cuda/kernels/gemv_decode_args.h"
#include "gguf/tensor_type.h"

namespace cellm::kernels {

struct DecodeVariant {
  int rows_per_block = 0;                                                            // R
  int chunks_in_flight = 0;                                                          // D
  cudaError_t (*launch)(const DecodeGemvArgs& args, cudaStream_t stream) = nullptr;  // M = 1
  // "L": Q4_0 with one block scale per lane (DecodeQ4_0Lane); "K": the same in a kernel of its
  // own (gemv_decode_lane_q4_0_kernel)
  const char* note = "";
};

// The variants built for `type` (BF16, Q8_0, Q4_0) with f32 (int8 false, no norm) or int8 input.
std::vector<DecodeVariant> decode_variants(TensorType type, bool int8);

}  // namespace cellm::kernels
