// block_major_q4_0.cuh: one block-major Q4_0 block (16 bytes, byte i holding elements i in its
// low nibble and i + 16 in its high one; repack_q4_0_block_major's chunks) times 32 int8 inputs
// in natural order, in integers and without shifting a nibble down: 16 · Σ (q − 8) x, the low
// nibbles' sum times 16 by one multiply-add, the high nibbles taken in place (16 q, up to 240) by
// dp4a.u32.s32, from the block's offset −128 Σ x that every row of the block shares. Knows
// nothing of where the bytes come from or of scales. Host and device (the host tests run it as
// plain C++); benchmark only (the ring chain's consumers). Thread-safety: pure functions.
#pragma once

#include <cstdint>

#include "backends/cuda/kernels/kernel_common.cuh"

namespace cellm::kernels {

// −128 Σ x over a block's 32 inputs (lo: elements 0–15, hi: elements 16–31).
CELLM_HD_INLINE int block_major_q4_0_offset(const uint4& lo, const uint4& hi) {
  int offset = 0;
  for (int k = 0; k < 4; ++k) {
    offset = dp4a(0x80808080u, word_of(lo, k), offset);  // 0x80: the signed byte −128
    offset = dp4a(0x80808080u, word_of(hi, k), offset);
  }
  return offset;
}

// 16 · Σ (q − 8) x over the block `q` (16 bytes) and its inputs lo | hi, given the block's
// block_major_q4_0_offset. |result| ≤ 16 · 32 · 8 · 128 = 2^19: exact as a float.
CELLM_HD_INLINE int block_major_q4_0_dot16(const uint4& q, const uint4& lo, const uint4& hi,
                                           int offset) {
  int sum_low = 0;
  int sum_high16 = offset;
  for (int k = 0; k < 4; ++k) {
    sum_low = dp4a(word_of(q, k) & 0x0f0f0f0fu, word_of(lo, k), sum_low);
    sum_high16 = dp4a_unsigned_signed(word_of(q, k) & 0xf0f0f0f0u, word_of(hi, k), sum_high16);
  }
  return 16 * sum_low + sum_high16;
}

}  // namespace cellm::kernels
