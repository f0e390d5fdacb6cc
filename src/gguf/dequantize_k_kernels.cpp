// K-quant kernels: 256-element super-blocks with packed sub-block scales (block_formats.h).
//
// Element i of a super-block belongs to sub-block i / 16 (Q2_K, Q3_K, Q6_K) or i / 32 (Q4_K,
// Q5_K). The float operations and their order follow the GGML reference dequantizers.

#include "core/float16.h"
#include "gguf/block_formats.h"
#include "gguf/dequantize_kernels.h"

namespace cellm::internal {
namespace {

using blocks::kQK_K;

// Q3_K's 16 6-bit scales in 12 bytes: the low 4 bits of scale s are the low (s < 8) or high
// (s >= 8) nibble of byte s % 8; its high 2 bits are bits 2*(s/4)..2*(s/4)+1 of byte 8 + s % 4.
void unpack_q3_k_scales(const uint8_t (&packed)[12], int (&scales)[16]) {
  for (int s = 0; s < 16; ++s) {
    const int low = s < 8 ? (packed[s] & 0x0f) : (packed[s - 8] >> 4);
    const int high = (packed[8 + s % 4] >> (2 * (s / 4))) & 3;
    scales[s] = low | (high << 4);
  }
}

// Q4_K / Q5_K: 8 6-bit scales and 8 6-bit mins in 12 bytes. Sub-blocks 0..3 keep theirs in
// the low 6 bits of bytes 0..3 (scales) and 4..7 (mins); sub-blocks 4..7 take their low 4
// bits from byte 8 + (j - 4) (scale in the low nibble, min in the high one) and their high 2
// bits from the top bits of bytes j - 4 (scale) and j (min).
void unpack_k4_scale_min(const uint8_t (&packed)[12], int j, int* scale, int* min) {
  if (j < 4) {
    *scale = packed[j] & 63;
    *min = packed[j + 4] & 63;
  } else {
    *scale = (packed[j + 4] & 0x0f) | ((packed[j - 4] >> 6) << 4);
    *min = (packed[j + 4] >> 4) | ((packed[j] >> 6) << 4);
  }
}

// Q4_K / Q5_K share their layout: element 64*k + 32*h + l (k < 4, h < 2, l < 32) is the low
// (h = 0) or high (h = 1) nibble of qs[32*k + l], in sub-block 2*k + h, scaled and shifted by
// that sub-block's 6-bit scale and min. `high_bit(block, k, h, l)` gives the quant's bits above
// the nibble (0 for Q4_K).
template <typename Block, typename HighBit>
void dequantize_k4(const uint8_t* src, size_t num_blocks, float* dst, HighBit high_bit) {
  for (size_t b = 0; b < num_blocks; ++b) {
    const auto block = load_block<Block>(src, b);
    const float d = f16_to_f32(block.d);
    const float dmin = f16_to_f32(block.dmin);
    for (size_t k = 0; k < 4; ++k) {
      const uint8_t* q = block.qs + 32 * k;
      for (size_t h = 0; h < 2; ++h) {
        int scale_q, min_q;
        unpack_k4_scale_min(block.scales, static_cast<int>(2 * k + h), &scale_q, &min_q);
        const float scale = d * static_cast<float>(scale_q);
        const float min = dmin * static_cast<float>(min_q);
        const size_t shift = 4 * h;
        for (size_t l = 0; l < 32; ++l) {
          const int value = ((q[l] >> shift) & 0x0f) | high_bit(block, k, h, l);
          *dst++ = scale * static_cast<float>(value) - min;
        }
      }
    }
  }
}

}  // namespace

// Element 128*n + 32*j + 16*h + l (n < 2, j < 4, h < 2, l < 16) is bits 2j..2j+1 of
// qs[32*n + 16*h + l]; its sub-block is 8*n + 2*j + h.
void dequantize_q2_k(const uint8_t* src, size_t num_blocks, float* dst) {
  for (size_t b = 0; b < num_blocks; ++b) {
    const auto block = load_block<blocks::BlockQ2_K>(src, b);
    const float d = f16_to_f32(block.d);
    const float dmin = f16_to_f32(block.dmin);
    int sub_block = 0;
    for (size_t n = 0; n < kQK_K / 128; ++n) {
      const uint8_t* q = block.qs + 32 * n;
      for (int shift = 0; shift < 8; shift += 2) {
        for (size_t h = 0; h < 2; ++h, ++sub_block) {
          const uint8_t packed = block.scales[sub_block];
          const float scale = d * static_cast<float>(packed & 0x0f);
          const float min = dmin * static_cast<float>(packed >> 4);
          for (size_t l = 0; l < 16; ++l) {
            *dst++ = scale * static_cast<float>((q[16 * h + l] >> shift) & 3) - min;
          }
        }
      }
    }
  }
}

// Positions as Q2_K; the 3rd bit of the quant is bit 4*n + j of hmask[16*h + l], and a clear
// bit subtracts 4 (quants run from -4 to 3).
void dequantize_q3_k(const uint8_t* src, size_t num_blocks, float* dst) {
  for (size_t b = 0; b < num_blocks; ++b) {
    const auto block = load_block<blocks::BlockQ3_K>(src, b);
    const float d = f16_to_f32(block.d);
    int scales[16];
    unpack_q3_k_scales(block.scales, scales);
    int sub_block = 0;
    unsigned high_bit = 1;
    for (size_t n = 0; n < kQK_K / 128; ++n) {
      const uint8_t* q = block.qs + 32 * n;
      for (int shift = 0; shift < 8; shift += 2, high_bit <<= 1) {
        for (size_t h = 0; h < 2; ++h, ++sub_block) {
          const float scale = d * static_cast<float>(scales[sub_block] - 32);
          for (size_t l = 0; l < 16; ++l) {
            const int low = (q[16 * h + l] >> shift) & 3;
            const int offset = (block.hmask[16 * h + l] & high_bit) ? 0 : 4;
            *dst++ = scale * static_cast<float>(low - offset);
          }
        }
      }
    }
  }
}

void dequantize_q4_k(const uint8_t* src, size_t num_blocks, float* dst) {
  dequantize_k4<blocks::BlockQ4_K>(
      src, num_blocks, dst, [](const blocks::BlockQ4_K&, size_t, size_t, size_t) { return 0; });
}

// The 5th bit of element 64*k + 32*h + l is bit 2*k + h of qh[l].
void dequantize_q5_k(const uint8_t* src, size_t num_blocks, float* dst) {
  dequantize_k4<blocks::BlockQ5_K>(
      src, num_blocks, dst, [](const blocks::BlockQ5_K& block, size_t k, size_t h, size_t l) {
        return ((block.qh[l] >> (2 * k + h)) & 1) << 4;
      });
}

// Element 128*n + 32*g + l (n < 2, g < 4, l < 32): low 4 bits from ql[64*n + 32*(g % 2) + l]
// (low nibble for g < 2, high for g >= 2), high 2 bits from bits 2g..2g+1 of qh[32*n + l];
// sub-block 8*n + 2*g + l / 16. Quants run from -32 to 31.
void dequantize_q6_k(const uint8_t* src, size_t num_blocks, float* dst) {
  for (size_t b = 0; b < num_blocks; ++b) {
    const auto block = load_block<blocks::BlockQ6_K>(src, b);
    const float d = f16_to_f32(block.d);
    for (size_t n = 0; n < kQK_K / 128; ++n) {
      const uint8_t* ql = block.ql + 64 * n;
      const uint8_t* qh = block.qh + 32 * n;
      const int8_t* scales = block.scales + 8 * n;
      for (size_t g = 0; g < 4; ++g) {
        const uint8_t* low_bytes = ql + 32 * (g % 2);
        const size_t low_shift = 4 * (g / 2);
        for (size_t half = 0; half < 2; ++half) {
          const float scale = d * static_cast<float>(scales[2 * g + half]);
          for (size_t l = 16 * half; l < 16 * half + 16; ++l) {
            const int value =
                ((low_bytes[l] >> low_shift) & 0x0f) | (((qh[l] >> (2 * g)) & 3) << 4);
            *dst++ = scale * static_cast<float>(value - 32);
          }
        }
      }
    }
  }
}

}  // namespace cellm::internal
