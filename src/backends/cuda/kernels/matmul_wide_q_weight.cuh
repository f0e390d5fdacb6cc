// matmul_wide_q_weight: how a lane of the fused quantized tensor-core product (matmul_wide_q.cu)
// turns its weight bytes into mma B fragments, per type: where its bytes and block scales sit in
// an interleaved row (weight_decode.cuh's layout), the integer fragments of a k-step (one m-tile:
// up to 16 tokens) and its scaled fragments (32- and 64-token tiles: made on bf16 pairs, two or
// three instructions per pair of weights), and how many blocks an SM must hold.
// The element order: in span s (256 columns) lane l ∈ [0, 8) of a row owns elements 32b + 4l + i
// (i < 4) of every block b — for Q4_0 in qs bytes [128s + 16l, +16) (word w, byte i: block 2w low
// nibble, block 2w + 1 high nibble), for Q8_0 in bytes [256s + 32l, +32) (word b, byte i). A
// lane t of the kernel loads layout lanes 2t and 2t + 1. Device code; include only from
// matmul_wide_q.cu. Thread-safety: pure functions.
#pragma once

#include <cstdint>

#include "backends/cuda/kernels/kernel_common.cuh"
#include "backends/cuda/kernels/mma_common.cuh"
#include "gguf/tensor_type.h"

namespace cellm::kernels::wide_q {

// a − b on bf16 pairs (exact for the small integers here).
__device__ __forceinline__ uint32_t bf16x2_sub(uint32_t a, uint32_t b) {
  uint32_t d;
  asm("sub.rn.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}
constexpr uint32_t kBf16x2Of136 = 0x43084308u;  // (136, 136)

// a · b on bf16 pairs, rounded to nearest.
__device__ __forceinline__ uint32_t bf16x2_mul(uint32_t a, uint32_t b) {
  uint32_t d;
  asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}

template <TensorType kType>
struct FusedWeight;

template <>
struct FusedWeight<TensorType::kQ4_0> {
  static constexpr int kWords = 8;  // lanes 2t and 2t + 1 of a span: 32 contiguous bytes
  // Blocks an SM holds (the kernel's register bound), by m-tiles: with the next span's weights
  // in registers the 2- and 4-tile kernels hold two, not three (on the H200 faster than three
  // without them: docs/perf/prefill_and_batch.md, version 2).
  CELLM_HD_INLINE static constexpr int min_blocks(int m_tiles) { return m_tiles == 1 ? 3 : 2; }
  __device__ __forceinline__ static const uint8_t* quants(const uint8_t* row, int64_t span, int t) {
    return row + 128 * span + 32 * t;
  }
  __device__ __forceinline__ static const uint8_t* scales(const uint8_t* row, int64_t num_cols,
                                                          int64_t span) {
    return row + num_cols / 2 + 16 * span;  // 8 f16 block scales
  }
  // The word holding block b's elements of layout lane 2t + h in its low nibbles (the high
  // nibbles are another block's).
  __device__ __forceinline__ static uint32_t block_word(const uint32_t (&w)[kWords], int b, int h) {
    return w[4 * h + (b >> 1)] >> (4 * (b & 1));
  }
  // The B fragment of k-step (b, h): elements i = 0, 1 and 2, 3 of block b in layout lane 2t + h
  // as bf16 pairs of q − 8 (exact). The bytes [n, 0x43] are the bf16 128 + n; minus 136 is n − 8.
  __device__ __forceinline__ static void fragment(const uint32_t (&w)[kWords], int b, int h,
                                                  uint32_t (&frag)[2]) {
    const uint32_t word = block_word(w, b, h);
    frag[0] = bf16x2_sub(__byte_perm(word, 0x43434343u, 0x4140) & 0xff0fff0fu, kBf16x2Of136);
    frag[1] = bf16x2_sub(__byte_perm(word, 0x43434343u, 0x4342) & 0xff0fff0fu, kBf16x2Of136);
  }
  // The same elements times the block scale d (a bf16 pair (d, d)) on bf16 pairs: (q − 8) · d
  // rounded to bf16 — d itself rounded to bf16 first, so a value may differ from
  // bf16((q − 8) · d) by one rounding; two instructions per pair.
  __device__ __forceinline__ static void scaled_fragment(const uint32_t (&w)[kWords], int b, int h,
                                                         uint32_t d2, uint32_t (&frag)[2]) {
    fragment(w, b, h, frag);
    frag[0] = bf16x2_mul(frag[0], d2);
    frag[1] = bf16x2_mul(frag[1], d2);
  }
};

template <>
struct FusedWeight<TensorType::kQ8_0> {
  static constexpr int kWords = 16;  // lanes 2t and 2t + 1 of a span: 64 contiguous bytes
  // As FusedWeight<kQ4_0>'s: two at every m-tile count.
  CELLM_HD_INLINE static constexpr int min_blocks(int /*m_tiles*/) { return 2; }
  __device__ __forceinline__ static const uint8_t* quants(const uint8_t* row, int64_t span, int t) {
    return row + 256 * span + 64 * t;
  }
  __device__ __forceinline__ static const uint8_t* scales(const uint8_t* row, int64_t num_cols,
                                                          int64_t span) {
    return row + num_cols + 16 * span;
  }
  // The B fragment of k-step (b, h): elements i = 0, 1 and 2, 3 of block b in layout lane 2t + h
  // as bf16 pairs of q (exact: |q| ≤ 128). Flipping the sign bit makes each byte q + 128;
  // placed under the exponent of 2^23 it is the f32 2^23 + q + 128.
  __device__ __forceinline__ static void fragment(const uint32_t (&w)[kWords], int b, int h,
                                                  uint32_t (&frag)[2]) {
    const uint32_t word = w[8 * h + b] ^ 0x80808080u;
    float v[4];
    CELLM_UNROLL
    for (int i = 0; i < 4; ++i) {
      v[i] = bits_to_float(__byte_perm(word, 0x4b000000u, 0x7540 + i)) - (kMagic + 128.0f);
    }
    frag[0] = pack_pair<false>(v[0], v[1]);
    frag[1] = pack_pair<false>(v[2], v[3]);
  }
  // The same elements as bf16 pairs of q (exact) times the block scale d (a bf16 pair (d, d)), as
  // FusedWeight<kQ4_0>'s, for the wider tiles. The pairs are made on bf16 pairs: under the
  // exponent byte 0x43 the low 7 bits m of u = q + 128 give 128 + m, and the top bit of u (which
  // lands on the exponent's lowest bit, cleared) picks what to subtract — 128 when set (u = 128 +
  // m), else 256 (u = m): three bit operations and one subtraction per pair (the fragment above
  // measured 5–7% faster for the integer tiles, this one faster in the scaled ones).
  __device__ __forceinline__ static void scaled_fragment(const uint32_t (&w)[kWords], int b, int h,
                                                         uint32_t d2, uint32_t (&frag)[2]) {
    const uint32_t word = w[8 * h + b] ^ 0x80808080u;
    CELLM_UNROLL
    for (int p = 0; p < 2; ++p) {
      const uint32_t placed = __byte_perm(word, 0x43434343u, p == 0 ? 0x4140 : 0x4342);
      const uint32_t value = placed & 0xff7fff7fu;                   // 128 + m
      const uint32_t offset = (placed & 0x00800080u) ^ 0x43804380u;  // 128 or 256
      frag[p] = bf16x2_sub(value, offset);
    }
    frag[0] = bf16x2_mul(frag[0], d2);
    frag[1] = bf16x2_mul(frag[1], d2);
  }
};

}  // namespace cellm::kernels::wide_q
