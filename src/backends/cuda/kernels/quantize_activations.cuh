// quantize_activations: f32 activations → int8 with one f32 scale per block of 32 (like GGML's
// Q8_0 activations), on the GPU, in the interleaved element order of Q8_0 weights
// (weight_decode.cuh), for the dp4a small-M products of Q8_0 / Q4_0 weights (matmul.cuh,
// MatmulParams::x_q8; decode_matmul.cuh). Per block: d = max|x| / 127,
// q = round-to-nearest-even(x · (1/d)) (q = 0 when the block is all zeros). The rounding costs
// about 3e-3 relative error in a product. Optionally the rows are gathered (x_rows) and
// RMS-normalized first ((x · scale) · norm_weight, as rms_norm), so one launch replaces the norm
// before a product; or the rows are SwiGLU's halves (up), so it replaces the swiglu launch; or,
// for models with post norms (gemma3), a block's output normed by its post norm joins the residual
// first (add), so one launch replaces the post norm, the add and the next block's norm.
// Launched with programmatic dependent launch (pdl.cuh). Stream-ordered, capturable. Who calls it:
// the CUDA forward (once per distinct int8 matmul input), the tests, the benchmark. Thread-safety:
// launches on a stream.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "backends/cuda/kernels/kernel_common.cuh"
#include "backends/cuda/kernels/pdl.cuh"
#include "core/status.h"

namespace cellm::kernels {

struct QuantizeActivationsParams {
  int32_t num_tokens = 0;
  int64_t num_cols = 0;      // K, a multiple of 256
  const float* x = nullptr;  // [num_tokens, x_stride] f32
  int64_t x_stride = 0;
  int8_t* q = nullptr;      // [num_tokens, num_cols], interleaved order, 16-byte aligned
  float* scales = nullptr;  // [num_tokens, num_cols / 32] f32, 16-byte aligned
  // Optional: [num_tokens, num_cols / 32], each block's Σ q (natural block order) — what a Q4_K
  // product on per-256 input takes its minimums' terms from (DecodeMatmulParams::x_q8_sums).
  int32_t* sums = nullptr;
  const int32_t* x_rows = nullptr;     // [num_tokens] device: row t reads x row x_rows[t]; null: t
  const float* norm_weight = nullptr;  // [num_cols] f32: RMSNorm each row first, or null
  float norm_eps = 0.0f;
  // SwiGLU first, or null: x holds the gate halves and up the up halves ([num_tokens, x_stride]
  // like x), each element is silu(g) · u as the swiglu kernel rounds it. No gather or norm then.
  const float* up = nullptr;
  // A block's output joining the residual first, or null: row t of the residual becomes
  // x + RMSNorm(add row) · add_norm_weight (rounded as rms_norm, then the add, as the CPU rounds),
  // written to x_out row t, and that row is what the norm (if any) and the quantization take. Rows
  // of add are gathered by x_rows as x's are. x_out must not be x (every CTA of a row reads all of
  // x's row). No SwiGLU then.
  const float* add = nullptr;              // [*, add_stride] f32
  int64_t add_stride = 0;                  // ≥ num_cols
  const float* add_norm_weight = nullptr;  // [num_cols] f32
  float* x_out = nullptr;                  // [num_tokens, num_cols] f32
  // One scale per 256 columns (the largest magnitude of the 256), written to each of their eight
  // blocks: the K-quant products then sum a chunk's groups in integers (decode_matmul.cuh,
  // DecodeMatmulParams::x_q8_per_256), at about twice the rounding error.
  bool per_256 = false;
  PdlTrigger trigger = PdlTrigger::kAtStart;  // when the next kernel may launch (pdl.cuh)
};

Status launch_quantize_activations(const QuantizeActivationsParams& params, cudaStream_t stream);

// Where element e of a row lands in the interleaved int8 order (as for Q8_0 weights).
CELLM_HD_INLINE int64_t interleaved_q8_offset(int64_t e) {
  const int64_t within = e & 255;
  const int64_t chunk = 8 * (e >> 8) + ((within & 31) >> 2);
  return 32 * chunk + 4 * (within >> 5) + (within & 3);
}

// Where the scale of element e's block of 16 lands when a row has one scale per 16 (a
// kSwigluHandover product's, decode_matmul.cuh): 16 per 256 columns, the first halves' eight
// blocks of 32 in order, then the second halves'. A chunk of the interleaved order (32 elements,
// four from each block of 32 of a span) lies in one half of its eight blocks, so a product still
// loads its eight scales as two float4.
CELLM_HD_INLINE int64_t per16_scale_index(int64_t e) {
  return 16 * (e >> 8) + 8 * ((e >> 4) & 1) + ((e >> 5) & 7);
}

// The quantization of one value of a block whose largest magnitude is `amax`.
CELLM_HD_INLINE float q8_block_scale(float amax) { return amax / 127.0f; }
CELLM_HD_INLINE int8_t q8_quantize(float x, float scale) {
  if (scale == 0.0f) return 0;
  const float inverse = 1.0f / scale;
#ifdef __CUDA_ARCH__
  const int q = __float2int_rn(__fmul_rn(x, inverse));
#else
  const int q = static_cast<int>(std::nearbyint(x * inverse));
#endif
  return static_cast<int8_t>(q > 127 ? 127 : (q < -127 ? -127 : q));
}

}  // namespace cellm::kernels
