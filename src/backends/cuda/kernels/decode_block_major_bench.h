// decode_block_major_bench: the batch-1 layer products as launches (a quantize launch, then a
// one-token product per stage, as the shipped forward runs them) with Q4_0 weights block-major
// (repack_q4_0_block_major: each 16-byte chunk one whole block of 32) and int8 inputs in natural
// order, against the shipped interleaved layout. The shipped kernel's lane holds four weights of
// each of eight blocks per chunk, so every four weights pay a scale conversion, a multiply, an
// int-to-float conversion and an FMA (`scripts/sass`: 372 instructions per thread for four rows
// of 32 weights); block-major sums a block's eight dp4a in integers and scales once. The question
// (decode.md version 18): does that matter for the launches, as it did for the ring chain?
// Benchmark only; not linked into the backend (the int8 tensor-core and wide products read the
// interleaved layout). Thread-safety: launches on the given stream.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/kernels/decode_persistent_bench.h"

namespace cellm::kernels {

// A layer's stages, in order: q|k|v, output, gate|up, down (chain_bench's stage kinds).
inline constexpr int kBlockMajorStagesPerLayer = 4;

// The quantize launch of launch_block_major_stage alone: stage `kind`'s input, RMS-normed where it
// is, quantized in natural order into q / scales.
cudaError_t launch_natural_quantize(const PersistentChainArgs& a, int kind, int8_t* q,
                                    float* scales, cudaStream_t stream);

// Stage `kind` (chain_bench's q|k|v, output, gate|up, down) of one layer whose Q4_0 weights
// (`layer`, device pointers) are block-major: its input (a.x, a.qkv's first a.hidden values, or
// a.act), RMS-normed where it is, quantized in natural order into q / scales ([a.ffn] int8,
// [a.ffn / 32] f32, device), then multiplied by a kernel of `rows_per_block` (4 or 8) rows per
// block into a.qkv (stored), a.x (added), a.act (SwiGLU) or a.x (added). Two launches with
// programmatic dependent launch.
cudaError_t launch_block_major_stage(const PersistentChainArgs& a,
                                     const PersistentChainLayer& layer, int kind,
                                     int rows_per_block, int8_t* q, float* scales,
                                     cudaStream_t stream);

}  // namespace cellm::kernels
