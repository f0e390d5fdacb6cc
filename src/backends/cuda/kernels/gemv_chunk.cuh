// gemv_chunk: one thread's share of the small-M matrix product — the dot products of one chunk
// (weight_decode.cuh) of R weight rows with up to M activation rows. The GEMV kernel calls it for
// every chunk a thread owns; the CPU test calls it to emulate the kernel's indexing exactly.
// Per group of 4 elements: y += scale · Σ q_i x_i − min · Σ x_i, in f32 with fused multiply-adds
// (within 1e-6 relative of the CPU's dequantize-then-dot). Host-compatible.
// Thread-safety: pure functions.
#pragma once

#include "backends/cuda/kernels/weight_decode.cuh"

namespace cellm::kernels {

// acc[r][t] += Σ_i w_r,i · x_i over one group of 4 elements (v: the group of each row, decoded;
// xv: token t's 4 activations): scale · Σ q_i x_i − min · Σ x_i for scaled types, else plain
// fused multiply-adds in element order.
template <class Decoder, int R, int M>
CELLM_HD_INLINE void accumulate_group(const GroupValues (&v)[R], const float4& xv, int t,
                                      float (&acc)[R][M]) {
  if constexpr (Decoder::kScaled) {
    const float x_sum = Decoder::kHasMin ? (xv.x + xv.y) + (xv.z + xv.w) : 0.0f;
    CELLM_UNROLL
    for (int r = 0; r < R; ++r) {
      float dot = v[r].q[0] * xv.x;
      dot = fmaf(v[r].q[1], xv.y, dot);
      dot = fmaf(v[r].q[2], xv.z, dot);
      dot = fmaf(v[r].q[3], xv.w, dot);
      acc[r][t] = fmaf(v[r].scale, dot, acc[r][t]);
      if constexpr (Decoder::kHasMin) acc[r][t] = fmaf(-v[r].min, x_sum, acc[r][t]);
    }
  } else {
    CELLM_UNROLL
    for (int r = 0; r < R; ++r) {
      float a = acc[r][t];
      a = fmaf(v[r].q[0], xv.x, a);
      a = fmaf(v[r].q[1], xv.y, a);
      a = fmaf(v[r].q[2], xv.z, a);
      a = fmaf(v[r].q[3], xv.w, a);
      acc[r][t] = a;
    }
  }
}

// acc[r][t] += Σ over chunk c's elements of w_r · x_t, for t < num_tokens (≤ M); x_of(t, offset)
// gives token t's 4 activations of the group starting at element `offset`.
template <class Decoder, int R, int M, class XOf>
CELLM_HD_INLINE void accumulate_chunk_from(const typename Decoder::Chunk (&w)[R], int num_tokens,
                                           int64_t c, const XOf& x_of, float (&acc)[R][M]) {
  CELLM_UNROLL
  for (int g = 0; g < Decoder::kGroups; ++g) {
    GroupValues v[R];
    CELLM_UNROLL
    for (int r = 0; r < R; ++r) Decoder::group(w[r], g, c, &v[r]);
    const int64_t offset = Decoder::x_offset(c, g);
    CELLM_UNROLL
    for (int t = 0; t < M; ++t) {
      if (t < num_tokens) accumulate_group<Decoder, R, M>(v, x_of(t, offset), t, acc);
    }
  }
}

// The same over x: [num_tokens, x_stride] f32 activations.
template <class Decoder, int R, int M>
CELLM_HD_INLINE void accumulate_chunk(const typename Decoder::Chunk (&w)[R], const float* x,
                                      int64_t x_stride, int num_tokens, int64_t c,
                                      float (&acc)[R][M]) {
  accumulate_chunk_from<Decoder, R, M>(
      w, num_tokens, c,
      [x, x_stride](int t, int64_t offset) { return load_f4(x + t * x_stride + offset); }, acc);
}

// The same over int8 activations (quantize_activations.cuh) for Q8_0 / Q4_0 weights: per group,
// acc += (d_w · d_x) · Σ q_w q_x with the integer sum from one dp4a. xq: [num_tokens, num_cols]
// in the interleaved order (chunk c = 32 bytes at 32c, byte 4g + i); xq_scales: [num_tokens,
// num_cols / 32] per block, natural order.
template <class Decoder, int R, int M>
CELLM_HD_INLINE void accumulate_chunk_q8(const typename Decoder::Chunk (&w)[R], const int8_t* xq,
                                         const float* xq_scales, int64_t num_cols, int num_tokens,
                                         int64_t c, float (&acc)[R][M]) {
  uint32_t words[R][8];
  float scales[R][8];
  CELLM_UNROLL
  for (int r = 0; r < R; ++r) {
    CELLM_UNROLL
    for (int g = 0; g < 8; ++g) {
      words[r][g] = Decoder::group_s8(w[r], g);
      scales[r][g] = Decoder::group_scale(w[r], g);
    }
  }
  CELLM_UNROLL
  for (int t = 0; t < M; ++t) {
    if (t < num_tokens) {
      const int8_t* x = xq + t * num_cols + 32 * c;
      const uint4 lo = load_u4(x);
      const uint4 hi = load_u4(x + 16);
      const float* block_scales = xq_scales + t * (num_cols / 32) + 8 * (c >> 3);
      const float4 s_lo = load_f4(block_scales);
      const float4 s_hi = load_f4(block_scales + 4);
      const float dx[8] = {s_lo.x, s_lo.y, s_lo.z, s_lo.w, s_hi.x, s_hi.y, s_hi.z, s_hi.w};
      CELLM_UNROLL
      for (int g = 0; g < 8; ++g) {
        const uint32_t xw = word_of(g < 4 ? lo : hi, g & 3);
        CELLM_UNROLL
        for (int r = 0; r < R; ++r) {
          const int sum = dp4a(words[r][g], xw, 0);
          acc[r][t] = fmaf(scales[r][g] * dx[g], static_cast<float>(sum), acc[r][t]);
        }
      }
    }
  }
}

// What both K-quant int8 products below start with: each row's integer sub-block scales and
// mins of chunk c (Decoder::int8_quant_scales).
template <class Decoder, int R>
CELLM_HD_INLINE void int8_k_row_scales(const typename Decoder::Chunk (&w)[R], int64_t c,
                                       int (&scale)[R][8], int (&min)[R][8]) {
  CELLM_UNROLL
  for (int r = 0; r < R; ++r) Decoder::int8_quant_scales(w[r], c, scale[r], min[r]);
}

// The same for Q4_K / Q6_K weights (their int8_word, int8_quant_scales, int8_d, int8_dmin): per
// group g, with the weights' bytes u (value = d · s_g · (u + kInt8Offset) − dmin · m_g for the
// sub-block's integer scale s_g and min m_g) and a token's bytes q (value dx_g · q),
// Σ w · x = d · Σ_g dx_g · s_g · (Σ u q + offset · Σ q) − dmin · Σ_g m_g · dx_g · Σ q — the
// integer sums by dp4a, times s_g in integers (exact: |s_g · Σ u q| < 2^24), d and dmin applied
// once per chunk. x[t]: token t's int8 row (interleaved order, as above), x_scales[t] its per-32
// scales; any memory (global or the block's shared memory).
template <class Decoder, int R, int M>
CELLM_HD_INLINE void accumulate_chunk_int8_k(const typename Decoder::Chunk (&w)[R],
                                             const int8_t* const (&x)[M],
                                             const float* const (&x_scales)[M], int num_tokens,
                                             int64_t c, float (&acc)[R][M]) {
  int scale[R][8];
  int min[R][8];
  int8_k_row_scales<Decoder>(w, c, scale, min);
  CELLM_UNROLL
  for (int t = 0; t < M; ++t) {
    if (M == 1 || t < num_tokens) {  // M = 1: the one token is there
      const int8_t* xq = x[t] + 32 * c;
      const float* block_scales = x_scales[t] + 8 * (c >> 3);
      const uint4 lo = *reinterpret_cast<const uint4*>(xq);
      const uint4 hi = *reinterpret_cast<const uint4*>(xq + 16);
      const float4 s_lo = *reinterpret_cast<const float4*>(block_scales);
      const float4 s_hi = *reinterpret_cast<const float4*>(block_scales + 4);
      const float dx[8] = {s_lo.x, s_lo.y, s_lo.z, s_lo.w, s_hi.x, s_hi.y, s_hi.z, s_hi.w};
      float scaled[R];  // Σ_g dx_g · s_g · (Σ u q + offset · Σ q)
      float mins[R];    // Σ_g m_g · dx_g · Σ q
      CELLM_UNROLL
      for (int r = 0; r < R; ++r) scaled[r] = mins[r] = 0.0f;
      CELLM_UNROLL
      for (int g = 0; g < 8; ++g) {
        const uint32_t xw = word_of(g < 4 ? lo : hi, g & 3);
        const int x_sum = dp4a(0x01010101u, xw, 0);
        const float x_sum_scaled = dx[g] * static_cast<float>(x_sum);
        CELLM_UNROLL
        for (int r = 0; r < R; ++r) {
          const int dot = dp4a(Decoder::int8_word(w[r], g, c), xw, Decoder::kInt8Offset * x_sum);
          scaled[r] = fmaf(dx[g], static_cast<float>(dot * scale[r][g]), scaled[r]);
          if constexpr (Decoder::kHasMin) {
            mins[r] = fmaf(static_cast<float>(min[r][g]), x_sum_scaled, mins[r]);
          }
        }
      }
      CELLM_UNROLL
      for (int r = 0; r < R; ++r) {
        acc[r][t] = fmaf(Decoder::int8_d(w[r]), scaled[r], acc[r][t]);
        if constexpr (Decoder::kHasMin)
          acc[r][t] = fmaf(-Decoder::int8_dmin(w[r]), mins[r], acc[r][t]);
      }
    }
  }
}

// The same with activations quantized with one scale per 256 columns (all of a chunk's eight
// groups alike: QuantizeActivationsParams::per_256): the groups' sums meet their integer scales
// in integers — Σ w · x = dx · (d · Σ_g s_g · (Σ u q + offset · Σ q) − dmin · Σ_j m_j · S_j) —
// exact while |Σ_g s_g · (…)| < 2^24 (Q6_K: 8 · 128 · 4 · 32 · 127 < 2^24), one conversion and
// two multiply-adds per chunk and row. Spent per chunk and row:
// - the scales stay the bytes of two words (Decoder::int8_scale_words), and two groups' sums
//   meet theirs in one dp2a, packed as 16-bit halves (|Σ u q + offset · Σ q| ≤ 4 · 32 · 127):
//   four packs and four dp2a where eight byte extracts and eight multiply-adds were;
// - Q4_K's minimums' term is the super-block's, not the chunk's: S_j is the sum of all 32 of
//   sub-block j's int8 values (x_sums[t], one per block of 32 in natural order, so entry c is
//   sub-block c & 7 of super-block c >> 3), and chunk c adds only m_(c & 7) · S_c — the
//   super-block's eight chunks add all eight terms between them, one multiply-add each where a
//   term per group took eight and a dp4a per group for Σ q. x_sums may be null for Q6_K.
// (H200, Llama-3.1-8B geometry, batch-1 q4_k step: 2.00 ms → 1.92 with the sums → 1.82 with dp2a
// too; docs/perf/decode.md version 27.)
template <class Decoder, int R, int M>
CELLM_HD_INLINE void accumulate_chunk_int8_k256(const typename Decoder::Chunk (&w)[R],
                                                const int8_t* const (&x)[M],
                                                const float* const (&x_scales)[M],
                                                const int32_t* const (&x_sums)[M], int num_tokens,
                                                int64_t c, float (&acc)[R][M]) {
  uint32_t scale_words[R][2];  // scales of groups 0..3 and 4..7 as bytes
  int lane_min[R];             // Q4_K: m_(c & 7)
  CELLM_UNROLL
  for (int r = 0; r < R; ++r) {
    Decoder::int8_scale_words(w[r], c, &scale_words[r][0], &scale_words[r][1]);
    if constexpr (Decoder::kHasMin) {
      lane_min[r] = Decoder::int8_min_of(w[r], static_cast<int>(c & 7));
    }
  }
  CELLM_UNROLL
  for (int t = 0; t < M; ++t) {
    if (M == 1 || t < num_tokens) {  // M = 1: the one token is there
      const int8_t* xq = x[t] + 32 * c;
      const uint4 lo = *reinterpret_cast<const uint4*>(xq);
      const uint4 hi = *reinterpret_cast<const uint4*>(xq + 16);
      const float dx = x_scales[t][8 * (c >> 3)];  // the chunk's 256 columns' scale
      int scaled[R];                               // Σ_g s_g · (Σ u q + offset · Σ q)
      CELLM_UNROLL
      for (int r = 0; r < R; ++r) scaled[r] = 0;
      CELLM_UNROLL
      for (int pair = 0; pair < 4; ++pair) {  // groups 2 pair and 2 pair + 1
        const uint4& half = pair < 2 ? lo : hi;
        const uint32_t xw0 = word_of(half, (2 * pair) & 3);
        const uint32_t xw1 = word_of(half, (2 * pair + 1) & 3);
        const int offset0 = Decoder::kInt8Offset * dp4a(0x01010101u, xw0, 0);
        const int offset1 = Decoder::kInt8Offset * dp4a(0x01010101u, xw1, 0);
        CELLM_UNROLL
        for (int r = 0; r < R; ++r) {
          const int dot0 = dp4a(Decoder::int8_word(w[r], 2 * pair, c), xw0, offset0);
          const int dot1 = dp4a(Decoder::int8_word(w[r], 2 * pair + 1, c), xw1, offset1);
          const uint32_t dots = pack_low_halves(dot0, dot1);
          const uint32_t scales = scale_words[r][pair >> 1];
          scaled[r] = (pair & 1) != 0 ? dp2a<true>(dots, scales, scaled[r])
                                      : dp2a<false>(dots, scales, scaled[r]);
        }
      }
      CELLM_UNROLL
      for (int r = 0; r < R; ++r) {
        acc[r][t] = fmaf(Decoder::int8_d(w[r]) * dx, static_cast<float>(scaled[r]), acc[r][t]);
        if constexpr (Decoder::kHasMin) {
          const int mins = lane_min[r] * x_sums[t][c];  // m_j · S_j, j = c & 7
          acc[r][t] = fmaf(-Decoder::int8_dmin(w[r]) * dx, static_cast<float>(mins), acc[r][t]);
        }
      }
    }
  }
}

}  // namespace cellm::kernels
