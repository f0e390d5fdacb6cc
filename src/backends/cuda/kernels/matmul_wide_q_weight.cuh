// matmul_wide_q_weight: how a lane of the fused quantized tensor-core product (matmul_wide_q.cu)
// turns its weight bytes into mma B fragments, per type: where its bytes and block scales sit in
// an interleaved row (weight_decode.cuh's layout), the scaled values of a k-step (64-token tiles)
// and the integer fragments of a k-step (up to 32 tokens), and how many blocks an SM must hold.
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

template <TensorType kType>
struct FusedWeight;

template <>
struct FusedWeight<TensorType::kQ4_0> {
  static constexpr int kWords = 8;  // lanes 2t and 2t + 1 of a span: 32 contiguous bytes
  static constexpr int kMinBlocks = 3;
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
  // Elements i = 0..3 of block b in layout lane 2t + h, as q − 8 (exact).
  __device__ __forceinline__ static void values(const uint32_t (&w)[kWords], int b, int h,
                                                float (&v)[4]) {
    const uint32_t word = block_word(w, b, h);
    CELLM_UNROLL
    for (int i = 0; i < 4; ++i) {
      v[i] = bits_to_float(0x4b000000u | ((word >> (8 * i)) & 0xfu)) - (kMagic + 8.0f);
    }
  }
  // The B fragment of k-step (b, h): elements i = 0, 1 and 2, 3 of block b in layout lane 2t + h
  // as bf16 pairs of q − 8 (exact). The bytes [n, 0x43] are the bf16 128 + n; minus 136 is n − 8.
  __device__ __forceinline__ static void fragment(const uint32_t (&w)[kWords], int b, int h,
                                                  uint32_t (&frag)[2]) {
    const uint32_t word = block_word(w, b, h);
    frag[0] = bf16x2_sub(__byte_perm(word, 0x43434343u, 0x4140) & 0xff0fff0fu, kBf16x2Of136);
    frag[1] = bf16x2_sub(__byte_perm(word, 0x43434343u, 0x4342) & 0xff0fff0fu, kBf16x2Of136);
  }
};

template <>
struct FusedWeight<TensorType::kQ8_0> {
  static constexpr int kWords = 16;  // lanes 2t and 2t + 1 of a span: 64 contiguous bytes
  static constexpr int kMinBlocks = 2;
  __device__ __forceinline__ static const uint8_t* quants(const uint8_t* row, int64_t span, int t) {
    return row + 256 * span + 64 * t;
  }
  __device__ __forceinline__ static const uint8_t* scales(const uint8_t* row, int64_t num_cols,
                                                          int64_t span) {
    return row + num_cols + 16 * span;
  }
  // Elements i = 0..3 of block b in layout lane 2t + h, as signed values (exact): flipping the
  // sign bit maps the byte to value + 128.
  __device__ __forceinline__ static void values(const uint32_t (&w)[kWords], int b, int h,
                                                float (&v)[4]) {
    const uint32_t word = w[8 * h + b] ^ 0x80808080u;
    CELLM_UNROLL
    for (int i = 0; i < 4; ++i) {
      v[i] = bits_to_float(0x4b000000u | ((word >> (8 * i)) & 0xffu)) - (kMagic + 128.0f);
    }
  }
  // The B fragment of k-step (b, h): elements i = 0, 1 and 2, 3 of block b in layout lane 2t + h
  // as bf16 pairs of q (exact: |q| ≤ 128). Flipping the sign bit makes each byte q + 128; placed
  // under the exponent of 2^23 it is the f32 2^23 + q + 128.
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
};

}  // namespace cellm::kernels::wide_q
