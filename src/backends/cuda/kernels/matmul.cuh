// matmul: y[M, N] (+)= x[M, K] · Wᵀ for a weight W [N, K] of any type in weight_layout.h, on the
// GPU. Two paths, picked by launch_matmul from M and the weight type:
//   small M (M ≤ small_m_max_tokens(type): 8 for F32, 4 for quantized W, 2 for F16 / BF16): one
//     pass over the weights, dequantizing in registers and dotting in f32 or, given int8
//     activations (x_q8), with dp4a (a warp's activation loads coalesced, 16-byte weight loads)
//     — the decode kernels of decode_matmul.cuh for every fast layout, older ones (gemv_launch.h)
//     for the rest; memory-bound at M = 1. Its cost grows with M (4-bit weights at M = 8 ran at a
//     fifth of their M = 1 bandwidth on an H200 with f32 activations, a quarter with int8 ones),
//     hence the lower bounds.
//   wide (larger M): tensor cores through cuBLAS. F32 weights: cublasSgemm in true
//     f32 (no TF32). F16 / BF16 weights: activations rounded to the weight's 16-bit type, then
//     cublasGemmEx with f32 accumulation and f32 output. Interleaved Q8_0 / Q4_0 weights up to
//     128 tokens (48 / 32 with a resident bf16 copy): a fused tensor-core kernel that dequantizes
//     in registers (matmul_wide.cuh). Other quantized weights, and Q8_0 / Q4_0 beyond that: the
//     caller's resident bf16 copy `w_bf16` when given, else dequantized to bf16 tile by tile —
//     64 Mi elements each — into `scratch`; then the bf16 GEMM. Rounding activations (and
//     dequantized weights) to 16 bits costs about 1e-3 relative error.
// Every launch is stream-ordered, allocates nothing and reads no device data on the host, so it
// can be captured into a CUDA graph; the wide path needs a cuBLAS handle whose workspace the
// caller set (cublasSetWorkspace; kCublasWorkspaceBytes suffices) — launches set its stream.
// Who calls it: the CUDA forward (projections, LM head on kept rows), the kernel tests and the
// kernel benchmark. Thread-safety: a handle is used by one thread at a time.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <optional>

#include "backends/cuda/kernels/weight_layout.h"
#include "backends/cuda/kernels/wide_act_order.cuh"
#include "core/status.h"

namespace cellm::kernels {

inline constexpr int32_t kSmallMMaxTokens = 8;
inline constexpr int32_t kSmallMMaxTokensQuantized = 4;
inline constexpr int32_t kSmallMMaxTokens16Bit = 2;
inline constexpr size_t kCublasWorkspaceBytes = size_t{32} << 20;

struct MatmulParams {
  DeviceWeight w;            // [N = w.num_rows, K = w.num_cols]
  const float* x = nullptr;  // [num_tokens, x_stride] f32; columns [0, K) are read
  int64_t x_stride = 0;      // ≥ K; a multiple of 4 (16-byte rows)
  int32_t num_tokens = 0;    // M ≥ 0 (0 launches nothing)
  float* y = nullptr;        // [num_tokens, y_stride] f32; columns [0, N) are written
  int64_t y_stride = 0;      // ≥ N
  bool accumulate = false;   // y += x·Wᵀ (a residual add) instead of y = x·Wᵀ
  // Optional int8 copy of x (launch_quantize_activations; 16-byte aligned): small-M products of
  // interleaved Q8_0 / Q4_0 weights then use dp4a — about half the instructions per weight, at
  // about 3e-3 relative error. Other types and the wide path keep using x (always required).
  const int8_t* x_q8 = nullptr;        // [num_tokens, K] interleaved order
  const float* x_q8_scales = nullptr;  // [num_tokens, K / 32]
  // Optional bf16 copy of x in the column order the product takes (x_wide_order, which must be
  // matmul_wide_input_order(); wide_act_order.cuh), [num_tokens, K] contiguous, 16-byte aligned —
  // written by the kernel before (RMSNorm, SwiGLU, the decode attention). The product then reads
  // it instead of x (which may be null) and needs no launch of its own to round (and permute) x.
  const uint16_t* x_wide = nullptr;
  WideOrder x_wide_order = WideOrder::kFused;

  // Wide path only.
  cublasHandle_t cublas = nullptr;
  const uint16_t* w_bf16 = nullptr;  // optional [N, K] bf16 copy of a quantized W
  void* scratch = nullptr;           // matmul_wide_scratch_bytes(...) bytes, 256-byte aligned
  size_t scratch_bytes = 0;
};

// Scratch the wide path needs for up to `max_tokens` rows of x with this weight (0 for F32).
size_t matmul_wide_scratch_bytes(const DeviceWeight& w, int32_t max_tokens);

// The most tokens launch_matmul sends down the small-M path for a weight of `type`: 4 for
// quantized weights, 2 for F16 / BF16, 8 for F32. Measured on the H200 (Llama-3.1-8B geometry,
// decode tok/s at 2 / 4 / 8 sessions): bf16 on the small-M kernels 353 / 512 / 549, through
// cuBLAS 334 / 672 / 1284; q8_0 (q4_0) with int8 activations on the small-M kernels 622 / 885
// (769 / 1056) at 2 / 4 sessions, on the fused tensor-core kernel 358 / 701 (384 / 750).
int32_t small_m_max_tokens(TensorType type);

// The order of the bf16 input (MatmulParams::x_wide) launch_matmul of `num_tokens` rows through
// `w` (with a resident bf16 copy or not) can take: kFused where it runs the fused wide product
// (matmul_wide.cuh), kNatural where it runs cuBLAS on bf16 operands (BF16 weights, and quantized
// ones dequantized to bf16); none on the small-M path and for F32 / F16 weights (f32 x).
std::optional<WideOrder> matmul_wide_input_order(const DeviceWeight& w, int32_t num_tokens,
                                                 bool has_bf16_copy);

// Picks the path by num_tokens and type (above). Errors (invalid argument) name what is
// wrong with the params.
Status launch_matmul(const MatmulParams& params, cudaStream_t stream);
Status launch_matmul_small_m(const MatmulParams& params, cudaStream_t stream);  // M ≤ 8
Status launch_matmul_wide(const MatmulParams& params, cudaStream_t stream);

}  // namespace cellm::kernels
