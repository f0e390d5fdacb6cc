// decode_matmul: the small-M matrix product of the decode path (M ≤ 8 token rows) with the ops
// around it fused in, so a transformer layer runs in a few launches:
//   prologue: token t reads x row x_rows[t] (the LM head's kept rows) and RMS-normalizes it
//     (x · scale) · norm_weight exactly as rms_norm does, before the product — each block
//     recomputes the row's sum of squares (K floats, from L2);
//   epilogue: + bias, then one of: store or add into y (the residual stream); SwiGLU of a
//     [gate; up] product (silu(g) · u or gelu(g) · u, as the swiglu kernel); RoPE of a [q; k; v]
//     product with k and v written into the K/V cache rows of the tokens (as rope_kv, normal-style
//     pairs).
// Every f32 value is rounded as the separate kernels round it, so a fused layer equals the unfused
// one within the product's summation order (f32 weights and activations: 1e-5 of the CPU).
// Input is either f32 activations or, for Q8_0 / Q4_0 / Q4_K / Q6_K weights, int8 activations with
// per-32 scales (quantize_activations: one dp4a per 4 weights, about 3e-3 relative error) — given
// (x_q8; at one token also handed over by the product before: kAddHandover's normed values,
// kSwigluHandover's SwiGLU values per 16), or quantized from the f32 input inside the product
// (int8_activations: each block gathers, norms and quantizes the rows into shared memory exactly as
// quantize_activations would, then runs several row groups on them; decode_matmul_folds_int8 says
// where that fits). Weights must be in a fast layout (decode_matmul_supports): F32 with K % 4 == 0,
// F16 / BF16 with K % 8 == 0, interleaved Q8_0 / Q4_0 / Q4_K / Q6_K. A block of 128 threads owns 2
// or 4 output rows (all M tokens), splits K across its threads with 16-byte weight loads, and keeps
// several loads per thread in flight; its first loads are issued before pdl_wait() (pdl.cuh), so
// under programmatic dependent launch the weights stream while the previous kernel finishes.
// Stream-ordered, allocation-free, capturable; device arrays (positions, cells, x_rows) are data
// the caller validated. Who calls it: the CUDA forward (decode and short prefill slices), the
// small-M path of launch_matmul, tests, the kernel benchmark. Thread-safety: launches on a stream.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "backends/cuda/kernels/pdl.cuh"
#include "backends/cuda/kernels/rope_kv_output.h"
#include "backends/cuda/kernels/weight_layout.h"
#include "core/status.h"
#include "program/program_spec.h"

namespace cellm::kernels {

inline constexpr int32_t kDecodeMatmulMaxTokens = 8;

enum class DecodeOutput : int32_t {
  kStore,   // y[t, r] = p[t, r], or y[t, r] += p[t, r] with accumulate (N columns)
  kSwiglu,  // W = [gate; up] (N = 2F rows): y[t, j] = silu(p[t, j]) · p[t, F + j] (F columns),
            // or gelu(p[t, j]) · p[t, F + j] with gelu_tanh (GeGLU, gemma3)
  kRopeKv,  // W = [q; k; v]: q rows rotated into y (q_width columns); k rows rotated into
            // k_cache, v rows into v_cache, at row cells[t] of each
  // One token, N a multiple of 256, Q8_0 / Q4_0 weights, int8 input: y[r] += p[r] (the residual
  // stream), then the next product's input handed over (DecodeHandover): a block owns whole
  // blocks of 32 outputs, so it quantizes them itself and no quantize launch runs in between.
  kAddHandover,
  // One token, W = [gate; up] with F a multiple of 256, Q8_0 / Q4_0 weights, int8 input: the
  // SwiGLU values (as kSwiglu) handed to the next product as int8 with one scale per 16 (into
  // DecodeHandover's q and scales; the next product takes them with x_q8_per_16): a block owns
  // 16 values — their 16 gate and 16 up rows — and quantizes them itself, so no quantize launch
  // runs between gate|up and down. y is not written.
  kSwigluHandover,
};

// Where a kAddHandover product writes the next product's normed int8 input, per block of 32 of
// its outputs y (after the add): the int8 values of y ⊙ norm_weight and their scale, rounded as
// quantize_activations rounds (interleaved order), and Σ y² (squares rounded to f32, summed in
// double). The RMS scale is one positive number per row, so the int8 values of the normed row
// (y · s) ⊙ w are those of y ⊙ w with the scale times s: the consumer (x_q8_sum_squares) sums
// the N / 32 partials and multiplies its products by s. One token; q and scales must not alias
// the product's own input. A kSwigluHandover product writes only q ([F]) and scales ([F / 16], at
// per16_scale_index); its norm_weight and sum_squares stay null.
struct DecodeHandover {
  const float* norm_weight = nullptr;  // [N] f32, the next product's RMSNorm weight
  int8_t* q = nullptr;                 // [N] interleaved order, 16-byte aligned
  float* scales = nullptr;             // [N / 32]
  double* sum_squares = nullptr;       // [N / 32]
};

struct DecodeMatmulParams {
  DeviceWeight w;          // [N = w.num_rows, K = w.num_cols]; decode_matmul_supports(w)
  int32_t num_tokens = 0;  // M in [0, kDecodeMatmulMaxTokens] (0 launches nothing)

  // f32 input (x), or int8 input (x_q8; then x, x_rows and norm_weight must be null).
  const float* x = nullptr;         // [*, x_stride] f32, 16-byte aligned; columns [0, K) read
  int64_t x_stride = 0;             // ≥ K, a multiple of 4
  const int32_t* x_rows = nullptr;  // [num_tokens] device: token t reads x row x_rows[t]; null: t
  const float* norm_weight = nullptr;  // [K] f32, 16-byte aligned: RMSNorm x rows first, or null
  float norm_eps = 0.0f;
  const int8_t* x_q8 = nullptr;        // [num_tokens, K] interleaved order, 16-byte aligned
  const float* x_q8_scales = nullptr;  // [num_tokens, K / 32], 16-byte aligned
  // x_q8's scales are alike within each 256 columns (QuantizeActivationsParams::per_256): Q4_K /
  // Q6_K products then sum a chunk's groups in integers.
  bool x_q8_per_256 = false;
  // [num_tokens, K / 32] Σ of each block of 32 of x_q8 (natural block order;
  // QuantizeActivationsParams::sums): required by Q4_K on per-256 input, whose minimums' terms
  // then cost each chunk one multiply-add (one sub-block's) instead of one per group.
  const int32_t* x_q8_sums = nullptr;
  // With f32 x: quantize it to int8 inside the product (decode_matmul_folds_int8(w, num_tokens)).
  bool int8_activations = false;
  // [K / 32] with x_q8 of one token (Q8_0 / Q4_0 weights, per-32 scales, K ≤ 8192): x_q8 holds the
  // int8 values of x ⊙ norm weight (a kAddHandover product's), and the product is the RMSNorm's, (x
  // · s) ⊙ norm weight, with s = 1 / sqrt(Σ x² / K + norm_eps) from these partial sums.
  const double* x_q8_sum_squares = nullptr;
  // One token of x_q8 with one scale per 16 columns ([K / 16], at per16_scale_index: a
  // kSwigluHandover product's), Q8_0 / Q4_0 weights, K a multiple of 256; not normed.
  bool x_q8_per_16 = false;

  const float* bias = nullptr;  // [N] f32 added to every token's product, or null
  DecodeOutput output = DecodeOutput::kStore;
  bool gelu_tanh = false;  // kSwiglu only: GELU's tanh form instead of silu (as the swiglu kernel)
  float* y = nullptr;      // [num_tokens, y_stride] f32 (columns per DecodeOutput)
  int64_t y_stride = 0;
  bool accumulate = false;                    // kStore only
  RopeKvOutput rope;                          // kRopeKv only
  DecodeHandover handover;                    // kAddHandover only
  PdlTrigger trigger = PdlTrigger::kAtStart;  // when the next kernel may launch (pdl.cuh)
};

// Whether the weight is in a layout these kernels run (see the header comment).
bool decode_matmul_supports(const DeviceWeight& w);
// Whether the weight can take int8 activations (interleaved Q8_0 / Q4_0 / Q4_K / Q6_K).
bool decode_matmul_takes_int8(const DeviceWeight& w);

// Whether a one-token product over w can hand the next product its input (kAddHandover:
// interleaved Q8_0 / Q4_0, N a multiple of 256), and whether one can take a handed-over normed
// input (x_q8_sum_squares: interleaved Q8_0 / Q4_0, K ≤ 8192).
bool decode_matmul_hands_over(const DeviceWeight& w);
bool decode_matmul_takes_handover(const DeviceWeight& w);
// Whether a one-token [gate; up] product over w can hand its SwiGLU values over
// (kSwigluHandover: interleaved Q8_0 / Q4_0, F = N / 2 a multiple of 256), and whether a product
// can take them (x_q8_per_16: interleaved Q8_0 / Q4_0).
bool decode_matmul_hands_over_swiglu(const DeviceWeight& w);
bool decode_matmul_takes_per_16(const DeviceWeight& w);

// Shared memory per block of a product quantizing `num_tokens` rows of K f32 activations itself
// (rows rounded up to the kernel's 1, 2, 4 or 8): per row K int8 values and K / 32 f32 scales.
size_t decode_int8_fold_smem_bytes(int64_t num_cols, int32_t num_tokens);
// Whether the product can quantize its f32 input itself (int8_activations): the weight takes int8
// activations and the rows fit the default 48 KB of shared memory per block.
bool decode_matmul_folds_int8(const DeviceWeight& w, int32_t num_tokens);

// Errors (invalid argument) name what is wrong with the params.
Status launch_decode_matmul(const DecodeMatmulParams& params, cudaStream_t stream);

}  // namespace cellm::kernels
