// matmul_wide: the fused tensor-core product of the wide matmul path for interleaved Q8_0 / Q4_0
// weights (weight_layout.h) at 1 ≤ M ≤ kFusedMaxTokens tokens — y (+)= x·Wᵀ reading the quantized
// weights once, with no dequantized copy of them in device memory. x is first rounded to bf16 into
// the caller's scratch, with the columns of every 32-element block permuted to match the
// interleaved weight layout (a product is the same sum whatever the order of k, taken alike for
// both operands; wide_act_order.cuh), unless the kernel before wrote it so (MatmulParams::x_wide).
// The kernel's blocks own 128 weight rows × 64 tokens (16 or 32 when there are no
// more, so a decode step of a few sessions does no mma work for padding tokens): each lane loads
// its weight bytes straight from global memory (32 contiguous bytes per 256 columns for Q4_0, 64
// for Q8_0) — the next 256 columns' before the current ones' math — and turns them in registers
// into mma B fragments, multiplied with activation fragments staged in shared memory (cp.async,
// two stages of 128 columns) by mma.sync m16n8k16. Up to 16 tokens the fragments hold the
// weights' integer values (q − offset, exact in bf16), each 32-column block is summed in f32 on
// its own, then multiplied by the rows' block scales in f32 and added — so only the activations
// are rounded (to bf16); 32- and 64-token tiles multiply the integers by the block scale on bf16
// pairs first (d rounded to bf16, then the product: two roundings per weight).
// The dequantization costs a few integer operations per pair of weights. When the weight has too
// few rows to fill the GPU the columns are split (split-K) and a second kernel adds the splits'
// partial sums in a fixed order (deterministic) into y. The launches (activation permute — none
// with x_wide —, product, split sum) use programmatic dependent launch (pdl.cuh): the product loads
// its first weights before it waits.
// Who calls it: launch_matmul_wide (matmul.cu) when matmul_wide_fused_applies(); the tests and the
// kernel benchmark. Stream-ordered, allocates nothing, capturable. Thread-safety: launches on the
// given stream.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "backends/cuda/kernels/matmul.cuh"
#include "core/status.h"

namespace cellm::kernels {

// Past 128 tokens dequantizing the weight to bf16 and running cuBLAS is faster (the tile path
// of launch_matmul_wide): cuda_kernels_bench --wide-dequant on the H200, Llama-3.1-8B shapes,
// TFLOP/s fused / dequantized + GEMM — at 256 tokens q4_0 q|k|v 206 / 294, output 200 / 278,
// gate|up 290 / 337, down 257 / 297 (q8_0 172–240 / 262–312); at 128 the fused product wins
// (q4_0 gate|up 247 / 199, down 240 / 175; prefill_and_batch.md, version 4).
inline constexpr int32_t kFusedMaxTokens = 128;
// With a resident bf16 copy of the weight (MatmulParams::w_bf16) cuBLAS on the copy wins from
// fewer tokens: `cellm bench` on the H200, Llama-3.1-8B geometry, tok/s with the fused product /
// with copies from 33 tokens on, at 24 / 32 / 48 / 64 / 96 sessions — q4_0 5,568 / 5,447, 6,460
// / 6,464, 6,958 / 6,753, 7,986 / 8,227, 8,067 / 11,105; q8_0 4,519 / 4,283, 5,388 / 5,443,
// 6,148 / 6,800, 7,312 / 8,322, 7,177 / 11,173. So Q4_0 keeps the fused product to 48 tokens,
// Q8_0 to 32.
inline constexpr int32_t kFusedMaxTokensWithCopyQ4_0 = 48;
inline constexpr int32_t kFusedMaxTokensWithCopyQ8_0 = 32;

// True for interleaved Q8_0 / Q4_0 weights at 1 ≤ num_tokens ≤ kFusedMaxTokens
// (kFusedMaxTokensWithCopy* with a resident bf16 copy: MatmulParams::w_bf16).
bool matmul_wide_fused_applies(const DeviceWeight& w, int32_t num_tokens, bool has_bf16_copy);
bool matmul_wide_fused_applies(const MatmulParams& params);

// Scratch the fused product needs for up to min(max_tokens, kFusedMaxTokens) tokens with this
// weight (0 for other types): the permuted bf16 activations and room for split partial sums.
size_t matmul_wide_fused_scratch_bytes(const DeviceWeight& w, int32_t max_tokens);

// The fused product; params as launch_matmul_wide (no cuBLAS handle needed). Errors name the
// weight and what is missing.
Status launch_matmul_wide_fused(const MatmulParams& params, cudaStream_t stream);

}  // namespace cellm::kernels
