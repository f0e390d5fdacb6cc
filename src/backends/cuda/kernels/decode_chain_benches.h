// decode_chain_benches: the chains of `cuda_decode_bench` (decode_kernels_bench.cpp's main) —
// a decode step's products as one captured graph (32 Llama-3.1-8B layers, the LM head and argmax;
// no attention) against the bytes they read, and the layers' products as quantize + product
// launches against the one-launch prototypes (decode_persistent_bench.h, decode_ring_bench.h)
// and, for Q4_0, against launches over block-major weights (decode_block_major_bench.h), each
// checked by its residual against the launches'. Benchmark only. Thread-safety: one caller at a
// time.
#pragma once

#include <cuda_runtime.h>

#include "gguf/tensor_type.h"

namespace cellm::kernels {

// The step's products of `type` (int8 activations where they apply) as one graph: ms, GB/s and
// the share of `copy_bytes_per_s`.
void bench_chain(cudaStream_t stream, double copy_bytes_per_s, TensorType type, bool int8);

// The layers' products of `type` (Q4_0 or Q8_0) as launches, then as the persistent prototype
// (ring false) or the ring prototype in each of its shapes (ring true).
void bench_persistent(cudaStream_t stream, double copy_bytes_per_s, TensorType type, bool ring);

}  // namespace cellm::kernels
