// The packed block structs of the GGML quantized tensor types, byte for byte as GGUF stores them.
//
// Each struct is one block: `block_size` elements in `block_bytes` bytes (tensor_type.h holds the
// same numbers; the static_asserts below tie the two together). Halves (`uint16_t d`, `dmin`, `m`)
// are IEEE f16 bit patterns, little-endian like everything in GGUF. These are layouts only: the
// element order and arithmetic of each type live in the dequantize kernels, which copy a block out
// of the byte stream (no aligned access assumed) before reading it. Who uses them: dequantize*.cpp,
// quantize.cpp and their tests. Thread-safety: types only.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

namespace cellm::blocks {

static_assert(std::endian::native == std::endian::little,
              "GGUF blocks are little-endian; cellm reads them in place on little-endian hosts");

inline constexpr size_t kQK = 32;     // elements of a Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 block
inline constexpr size_t kQK_K = 256;  // elements of a K-quant super-block

// Q4_0: x = (q - 8) * d; element j < 16 is the low nibble of qs[j], element j + 16 the high one.
struct BlockQ4_0 {
  uint16_t d;           // f16 scale
  uint8_t qs[kQK / 2];  // 4-bit quants
};

// Q4_1: x = q * d + m; nibble order as Q4_0.
struct BlockQ4_1 {
  uint16_t d;           // f16 scale
  uint16_t m;           // f16 minimum
  uint8_t qs[kQK / 2];  // 4-bit quants
};

// Q5_0: x = (q - 16) * d; q's 5th bit for element j is bit j of qh read as a little-endian u32.
struct BlockQ5_0 {
  uint16_t d;           // f16 scale
  uint8_t qh[4];        // 5th bits, one per element
  uint8_t qs[kQK / 2];  // low 4 bits, nibble order as Q4_0
};

// Q5_1: x = q * d + m; bits as Q5_0.
struct BlockQ5_1 {
  uint16_t d;           // f16 scale
  uint16_t m;           // f16 minimum
  uint8_t qh[4];        // 5th bits, one per element
  uint8_t qs[kQK / 2];  // low 4 bits
};

// Q8_0: x = q * d.
struct BlockQ8_0 {
  uint16_t d;      // f16 scale
  int8_t qs[kQK];  // 8-bit quants
};

// Q2_K: 16 sub-blocks of 16; x = d * (scales[s] & 15) * q - dmin * (scales[s] >> 4).
struct BlockQ2_K {
  uint8_t scales[kQK_K / 16];  // 4-bit scale (low nibble) and 4-bit min (high nibble) per sub-block
  uint8_t qs[kQK_K / 4];       // 2-bit quants, four per byte
  uint16_t d;                  // f16 super-scale of the scales
  uint16_t dmin;               // f16 super-scale of the mins
};

// Q3_K: 16 sub-blocks of 16; x = d * (scale6[s] - 32) * (q2 - (high bit set ? 0 : 4)).
struct BlockQ3_K {
  uint8_t hmask[kQK_K / 8];  // the high (3rd) bit of each quant
  uint8_t qs[kQK_K / 4];     // low 2 bits of each quant
  uint8_t scales[12];        // 16 6-bit scales, packed
  uint16_t d;                // f16 super-scale
};

// Q4_K: 8 sub-blocks of 32; x = d * scale6[s] * q - dmin * min6[s].
struct BlockQ4_K {
  uint16_t d;             // f16 super-scale of the scales
  uint16_t dmin;          // f16 super-scale of the mins
  uint8_t scales[12];     // 8 6-bit scales and 8 6-bit mins, packed
  uint8_t qs[kQK_K / 2];  // 4-bit quants
};

// Q5_K: as Q4_K, with a 5th bit per quant in qh.
struct BlockQ5_K {
  uint16_t d;             // f16 super-scale of the scales
  uint16_t dmin;          // f16 super-scale of the mins
  uint8_t scales[12];     // as Q4_K
  uint8_t qh[kQK_K / 8];  // 5th bits
  uint8_t qs[kQK_K / 2];  // low 4 bits
};

// Q6_K: 16 sub-blocks of 16; x = d * scales[s] * (q - 32).
struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];      // low 4 bits of each quant
  uint8_t qh[kQK_K / 4];      // high 2 bits of each quant
  int8_t scales[kQK_K / 16];  // 8-bit signed sub-block scales
  uint16_t d;                 // f16 super-scale
};

// cellm's q4_g32 / q4_g64 / q4_g128 (not GGML types; ids in tensor_type.h): one GPTQ group of
// `Group` elements, x = (q - zero) * d. Element j is the low nibble of qs[j / 2] when j is even,
// the high nibble when odd — GPTQ's own packing order along the input dimension. The zero is a
// whole byte so GPTQ v1's "stored zero + 1" (up to 16) fits; `reserved` is 0 and keeps every
// block a multiple of 4 bytes.
template <size_t Group>
struct BlockQ4G {
  uint16_t d;             // f16 scale
  uint8_t zero;           // the group's zero point, 0..255 (GPTQ 4-bit: 0..16)
  uint8_t reserved;       // 0
  uint8_t qs[Group / 2];  // 4-bit quants, two per byte, low nibble first
};
static_assert(sizeof(BlockQ4G<32>) == 20 && offsetof(BlockQ4G<32>, qs) == 4);
static_assert(sizeof(BlockQ4G<64>) == 36 && sizeof(BlockQ4G<128>) == 68);

// Sizes from the GGML definitions (ggml-common.h); tensor_type.cpp's table must agree.
static_assert(sizeof(BlockQ4_0) == 18 && offsetof(BlockQ4_0, qs) == 2);
static_assert(sizeof(BlockQ4_1) == 20 && offsetof(BlockQ4_1, qs) == 4);
static_assert(sizeof(BlockQ5_0) == 22 && offsetof(BlockQ5_0, qh) == 2 &&
              offsetof(BlockQ5_0, qs) == 6);
static_assert(sizeof(BlockQ5_1) == 24 && offsetof(BlockQ5_1, qh) == 4 &&
              offsetof(BlockQ5_1, qs) == 8);
static_assert(sizeof(BlockQ8_0) == 34 && offsetof(BlockQ8_0, qs) == 2);
static_assert(sizeof(BlockQ2_K) == 84 && offsetof(BlockQ2_K, qs) == 16 &&
              offsetof(BlockQ2_K, d) == 80 && offsetof(BlockQ2_K, dmin) == 82);
static_assert(sizeof(BlockQ3_K) == 110 && offsetof(BlockQ3_K, qs) == 32 &&
              offsetof(BlockQ3_K, scales) == 96 && offsetof(BlockQ3_K, d) == 108);
static_assert(sizeof(BlockQ4_K) == 144 && offsetof(BlockQ4_K, scales) == 4 &&
              offsetof(BlockQ4_K, qs) == 16);
static_assert(sizeof(BlockQ5_K) == 176 && offsetof(BlockQ5_K, qh) == 16 &&
              offsetof(BlockQ5_K, qs) == 48);
static_assert(sizeof(BlockQ6_K) == 210 && offsetof(BlockQ6_K, qh) == 128 &&
              offsetof(BlockQ6_K, scales) == 192 && offsetof(BlockQ6_K, d) == 208);

}  // namespace cellm::blocks
