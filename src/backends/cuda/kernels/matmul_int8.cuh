// matmul_int8: y[M, N] (+)= x · Wᵀ for interleaved Q8_0 / Q4_0 / Q4_K / Q6_K weights and int8
// activations (quantize_activations.cuh: blocks of 32 with an f32 scale, the interleaved order) on
// the int8 tensor cores (mma.m16n8k32; Q6_K m16n8k16), for 1 to kInt8MatmulMaxTokens token rows —
// the products of small-batch decode (2–16 sessions), where the dp4a kernels (decode_matmul.cuh)
// cost more with every row and the bf16 tensor-core product (matmul_wide.cuh) spends several
// instructions per weight turning it into bf16 (and three launches: permute, product, split sum).
// One mma k-step is one quantization block of both operands, and both interleaved layouts give a
// lane its fragments directly (kernel comment); each block's int32 sums are scaled by the two block
// scales in f32 (Q4_K: its sub-block scales, and its mins against the tokens' block sums from an
// mma of ones; Q6_K: its two sub-block scales per block, one k16 mma each); Q4_0 / Q4_K / Q6_K
// products, and Q8_0 ones of more than 8 rows, stream their weights through shared memory
// (cp.async; up to 72 KB per block). About 3e-3 relative error, as the dp4a products. A q|k|v
// product can do RoPE and the K/V write in its epilogue (Int8MatmulParams::rope_kv), one rope_kv
// launch fewer. Stream-ordered, allocation-free, capturable, launched with programmatic dependent
// launch (pdl.cuh). Who calls it: the CUDA forward's products of 2 (Q8_0, Q4_K, Q6_K) / 3 (Q4_0) to
// 16 rows (CudaForward::int8_matmul), the tests.
// Thread-safety: launches on a stream.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/kernels/rope_kv_output.h"
#include "backends/cuda/kernels/weight_layout.h"
#include "core/status.h"

namespace cellm::kernels {

// Up to 16 rows (two n-tiles of tokens): at 12 / 16 sessions of the Llama-3.1-8B geometry on the
// H200, 18% (q8_0) and 9% (q4_0) faster than the bf16 tensor-core product it replaces
// (docs/perf/decode.md, version 11; in version 8, with the weights in registers, two tiles lost
// 16% for q4_0).
inline constexpr int32_t kInt8MatmulMaxTokens = 16;

struct Int8MatmulParams {
  DeviceWeight w;                      // [N, K]: int8_matmul_supports(w)
  int32_t num_tokens = 0;              // M in [0, kInt8MatmulMaxTokens] (0 launches nothing)
  const int8_t* x_q8 = nullptr;        // [num_tokens, K] interleaved order, 16-byte aligned
  const float* x_q8_scales = nullptr;  // [num_tokens, K / 32], 16-byte aligned
  // x_q8's scales are alike within each 256 columns (QuantizeActivationsParams::per_256): Q4_K /
  // Q6_K products then sum a span's blocks in integers (others ignore it).
  bool x_q8_per_256 = false;
  const float* bias = nullptr;  // [N] added to every row, or null
  float* y = nullptr;           // [num_tokens, y_stride] f32; columns [0, N) written
  int64_t y_stride = 0;         // ≥ N
  bool accumulate = false;      // y += x · Wᵀ instead of y = x · Wᵀ
  // W = [q; k; v]: RoPE and the K/V write in the epilogue (rope_kv_output.h) — y takes the
  // rotated q rows only, k and v go to rope's caches; no accumulate. The bits of the plain
  // product followed by rope_kv.cuh on the same rows.
  bool rope_kv = false;
  RopeKvOutput rope;
};

// Interleaved Q8_0 / Q4_0 / Q4_K / Q6_K (rows of 256·n elements), 16-byte aligned.
bool int8_matmul_supports(const DeviceWeight& w);

// The fewest rows from which this product beats the fused dp4a layer (decode_matmul.cuh) for a
// weight of `type` (Q8_0, Q4_K, Q6_K: 2, Q4_0: 3; one row stays fused). Measured on the H200,
// Llama-3.1-8B geometry, decode tok/s at 1 / 2 / 3 / 4 sessions, fused → int8 tensor cores: q8_0
// 379 / 630 / 673 / 886 → 331 / 652 / 966 / 1,269; q4_0 540 / 791 / 816 / 1,073 → 382 / 741 /
// 1,100 / 1,441; q4_k at 2 / 3 sessions 573 / 567–571 → 687–712 / 1,020–1,038; q6_k at 2 / 3 / 4
// sessions 509–523 / 567–572 / 757–758 → 586–592 / 923 / 1,219–1,224
// (CELLM_CUDA_Q4K_MMA_FROM / CELLM_CUDA_Q6K_MMA_FROM override Q4_K's / Q6_K's, for measurements).
int32_t int8_matmul_min_tokens(TensorType type);

// Errors (invalid argument) name what is wrong with the params.
Status launch_int8_matmul(const Int8MatmulParams& params, cudaStream_t stream);

}  // namespace cellm::kernels
