// weight_decode: turns weight bytes in their device layout (weight_layout.h) into values, on the
// GPU and, for tests, on the CPU (every function here also compiles as plain C++).
//
// Fast decoders (one per type) work on *chunks*, the unit one thread loads:
//   F32, F16, BF16: a chunk is 4 consecutive elements, elements [4c, 4c + 4) of the row;
//   interleaved Q8_0, Q4_0, Q4_K, Q6_K: a chunk is 32 elements, 4 in each of 8 groups: chunk c of
//   a row is lane l = c % 8 of span s = c / 8 (256 elements), and group g holds elements
//   256s + 32g + 4l + i (i < 4). Every element of group g shares one block scale (Q8_0, Q4_0:
//   block 8s + g; Q4_K: sub-block g of super-block s; Q6_K: sub-block 2g + l / 4).
// So 8 threads of a span read the activations of a group as one contiguous 128-byte line, and a
// warp's activation loads are fully coalesced. The byte order of each interleaved type:
//   Q4_0: qs plane [num_cols / 2] then d plane [num_cols / 32] f16 (natural block order). Span s,
//     lane l owns qs bytes [128s + 16l, +16): word w, byte i holds group 2w (low nibble) and
//     group 2w + 1 (high nibble) of element i.
//   Q8_0: qs plane [num_cols] then d plane [num_cols / 32] f16. Lane l of span s owns 32 bytes
//     at 256s + 32l: byte 4g + i is group g, element i.
//   Q4_K: 144-byte super-blocks as GGUF; bytes 0..15 (d, dmin, scales) unchanged; qs byte
//     16 + 16l + 4k + i holds group 2k (low nibble) and 2k + 1 (high) of lane l, element i.
//   Q6_K: ql plane [num_cols / 2], qh plane [num_cols / 4], scales plane [num_cols / 16] int8
//     (natural order), d plane [num_cols / 256] f16, row padded to 16 bytes. Super-block s, lane
//     l: ql word 2n + p at 128s + 16l + 4(2n + p) holds groups 4n + p (low nibble) and
//     4n + p + 2 (high nibble); qh word n at 64s + 8l + 4n holds 2 high bits of group 4n + gg at
//     bit 2gg of byte i.
// Generic decoders read one element of a GGUF-layout row (any type above), for rows whose
// length rules out the interleaved layout and for the embedding gather.
// Values equal the CPU reference dequantization (gguf/dequantize.h) bit for bit.
// Thread-safety: pure functions.
#pragma once

#include "backends/cuda/kernels/kernel_common.cuh"
#include "gguf/tensor_type.h"

namespace cellm::kernels {

// The 6-bit scale and min of sub-block j from Q4_K's 12 packed bytes (bytes 4..15 of `head`).
CELLM_HD_INLINE void q4_k_scale_min(const uint4& head, int j, int* scale, int* min) {
  const auto packed = [&head](int b) { return static_cast<int>(byte_of(head, 4 + b)); };
  if (j < 4) {
    *scale = packed(j) & 63;
    *min = packed(j + 4) & 63;
  } else {
    *scale = (packed(j + 4) & 0x0f) | ((packed(j - 4) >> 6) << 4);
    *min = (packed(j + 4) >> 4) | ((packed(j) >> 6) << 4);
  }
}

// One group's four quantized values (already offset: q - 8, q - 32, ...) and the affine map
// value = scale * q - min that the CPU applies (min is 0 except for Q4_K).
struct GroupValues {
  float q[4];
  float scale;
  float min;
};

// ---- float types: chunk = 4 consecutive elements ------------------------------------------

// The 16-bit float in the low (high = 0) or high half of `word`, bf16 or f16.
template <bool kBF16>
CELLM_HD_INLINE float half_value(uint32_t word, int high) {
  if constexpr (kBF16) {
    return bits_to_float(high ? (word & 0xffff0000u) : (word << 16));
  } else {
    return f16_bits_to_float(static_cast<uint16_t>(high ? word >> 16 : word));
  }
}

// What every unscaled float decoder shares (kChunkElems elements, kGroups groups of 4).
template <int kElems>
struct FloatDecoderBase {
  static constexpr int kChunkElems = kElems;
  static constexpr int kGroups = kElems / 4;
  static constexpr bool kScaled = false;
  static constexpr bool kHasMin = false;
  // Group g of chunk c: elements kElems · c + 4g .. + 3 of the row.
  CELLM_HD_INLINE static int64_t x_offset(int64_t c, int g) { return kElems * c + 4 * g; }
  CELLM_HD_INLINE static void unit_scale(GroupValues* out) {
    out->scale = 1.0f;
    out->min = 0.0f;
  }
};

struct DecodeF32 : FloatDecoderBase<4> {
  using Chunk = uint4;
  CELLM_HD_INLINE static Chunk load(const uint8_t* row, int64_t /*num_cols*/, int64_t c) {
    return load_stream_u4(row + 16 * c);
  }
  CELLM_HD_INLINE static void group(const Chunk& w, int /*g*/, int64_t /*c*/, GroupValues* out) {
    out->q[0] = bits_to_float(w.x);
    out->q[1] = bits_to_float(w.y);
    out->q[2] = bits_to_float(w.z);
    out->q[3] = bits_to_float(w.w);
    unit_scale(out);
  }
};

// BF16 (kBF16) or F16 with 8-byte chunks of 4 elements.
template <bool kBF16>
struct DecodeHalf4 : FloatDecoderBase<4> {
  using Chunk = uint2;
  CELLM_HD_INLINE static Chunk load(const uint8_t* row, int64_t /*num_cols*/, int64_t c) {
    return load_stream_u2(row + 8 * c);
  }
  CELLM_HD_INLINE static void group(const Chunk& w, int /*g*/, int64_t /*c*/, GroupValues* out) {
    out->q[0] = half_value<kBF16>(w.x, 0);
    out->q[1] = half_value<kBF16>(w.x, 1);
    out->q[2] = half_value<kBF16>(w.y, 0);
    out->q[3] = half_value<kBF16>(w.y, 1);
    unit_scale(out);
  }
};
using DecodeBF16 = DecodeHalf4<true>;
using DecodeF16 = DecodeHalf4<false>;

// ---- interleaved quantized types: chunk = 8 groups of 4 -----------------------------------

CELLM_HD_INLINE int64_t interleaved_x_offset(int64_t c, int g) {
  return 256 * (c >> 3) + 32 * g + 4 * (c & 7);
}

// What every interleaved decoder shares: 32-element chunks of 8 scaled groups.
struct InterleavedDecoderBase {
  static constexpr int kChunkElems = 32;
  static constexpr int kGroups = 8;
  static constexpr bool kScaled = true;
  CELLM_HD_INLINE static int64_t x_offset(int64_t c, int g) { return interleaved_x_offset(c, g); }
};

// Q4_0 / Q4_K: group g's four nibbles of a lane's 16 bytes (word g / 2, low nibbles for even g,
// high for odd), as unsigned bytes.
CELLM_HD_INLINE uint32_t interleaved_group_nibbles(const uint4& qs, int g) {
  return (word_of(qs, g >> 1) >> (4 * (g & 1))) & 0x0f0f0f0fu;
}

// Q8_0 / Q4_0: a span's 8 f16 block scales in one uint4, the block scale of group g.
CELLM_HD_INLINE float span_block_scale(const uint4& d, int g) {
  return f16_bits_to_float(half_of(d, g));
}

struct DecodeQ4_0 : InterleavedDecoderBase {
  static constexpr bool kHasMin = false;
  struct Chunk {
    uint4 qs;  // this lane's 32 nibbles
    uint4 d;   // the span's 8 block scales, f16
  };
  CELLM_HD_INLINE static Chunk load(const uint8_t* row, int64_t num_cols, int64_t c) {
    Chunk chunk;
    chunk.qs = load_stream_u4(row + 16 * c);
    chunk.d = load_stream_u4(row + num_cols / 2 + 16 * (c >> 3));
    return chunk;
  }
  CELLM_HD_INLINE static void group(const Chunk& w, int g, int64_t /*c*/, GroupValues* out) {
    const uint32_t nibbles = interleaved_group_nibbles(w.qs, g);
    CELLM_UNROLL
    for (int i = 0; i < 4; ++i) out->q[i] = magic_byte(nibbles, i) - (kMagic + 8.0f);
    out->scale = span_block_scale(w.d, g);
    out->min = 0.0f;
  }
  // Group g as four signed bytes q − 8 and its block scale, for int8 dot products (gemv_dp4a).
  CELLM_HD_INLINE static uint32_t group_s8(const Chunk& w, int g) {
    return nibbles_minus_8(interleaved_group_nibbles(w.qs, g));
  }
  CELLM_HD_INLINE static float group_scale(const Chunk& w, int g) {
    return span_block_scale(w.d, g);
  }
};

struct DecodeQ8_0 : InterleavedDecoderBase {
  static constexpr bool kHasMin = false;
  struct Chunk {
    uint4 qs_lo;  // groups 0..3
    uint4 qs_hi;  // groups 4..7
    uint4 d;      // the span's 8 block scales, f16
  };
  CELLM_HD_INLINE static Chunk load(const uint8_t* row, int64_t num_cols, int64_t c) {
    Chunk chunk;
    chunk.qs_lo = load_stream_u4(row + 32 * c);
    chunk.qs_hi = load_stream_u4(row + 32 * c + 16);
    chunk.d = load_stream_u4(row + num_cols + 16 * (c >> 3));
    return chunk;
  }
  CELLM_HD_INLINE static void group(const Chunk& w, int g, int64_t /*c*/, GroupValues* out) {
    // Signed bytes: flip the sign bit to read q + 128 as an unsigned byte.
    const uint32_t biased = word_of(g < 4 ? w.qs_lo : w.qs_hi, g & 3) ^ 0x80808080u;
    CELLM_UNROLL
    for (int i = 0; i < 4; ++i) out->q[i] = magic_byte(biased, i) - (kMagic + 128.0f);
    out->scale = span_block_scale(w.d, g);
    out->min = 0.0f;
  }
  CELLM_HD_INLINE static uint32_t group_s8(const Chunk& w, int g) {
    return word_of(g < 4 ? w.qs_lo : w.qs_hi, g & 3);
  }
  CELLM_HD_INLINE static float group_scale(const Chunk& w, int g) {
    return span_block_scale(w.d, g);
  }
};

struct DecodeQ4_K : InterleavedDecoderBase {
  static constexpr bool kHasMin = true;
  struct Chunk {
    uint4 head;  // d, dmin, 12 packed scale/min bytes
    uint4 qs;    // this lane's 32 nibbles
  };
  CELLM_HD_INLINE static Chunk load(const uint8_t* row, int64_t /*num_cols*/, int64_t c) {
    const uint8_t* super = row + 144 * (c >> 3);
    Chunk chunk;
    chunk.head = load_stream_u4(super);
    chunk.qs = load_stream_u4(super + 16 + 16 * (c & 7));
    return chunk;
  }
  CELLM_HD_INLINE static void group(const Chunk& w, int g, int64_t c, GroupValues* out) {
    const uint32_t nibbles = int8_word(w, g, c);
    CELLM_UNROLL
    for (int i = 0; i < 4; ++i) out->q[i] = magic_byte(nibbles, i) - kMagic;
    int8_scale_min(w, g, c, &out->scale, &out->min);
  }
  // For int8 activations: group g's values are scale · (u + kInt8Offset) − min for the unsigned
  // bytes u of int8_word (u < 128, so dp4a may read them as signed).
  static constexpr int kInt8Offset = 0;
  CELLM_HD_INLINE static uint32_t int8_word(const Chunk& w, int g, int64_t /*c*/) {
    return interleaved_group_nibbles(w.qs, g);
  }
  CELLM_HD_INLINE static void int8_scale_min(const Chunk& w, int g, int64_t /*c*/, float* scale,
                                             float* min) {
    int scale_q = 0;
    int min_q = 0;
    q4_k_scale_min(w.head, g, &scale_q, &min_q);
    *scale = mul_rn(f16_bits_to_float(half_of(w.head, 0)), static_cast<float>(scale_q));
    *min = mul_rn(f16_bits_to_float(half_of(w.head, 1)), static_cast<float>(min_q));
  }
  // The eight integer scales as bytes: scales 0..3 of *lo, 4..7 of *hi (int8_quant_scales' scales).
  CELLM_HD_INLINE static void int8_scale_words(const Chunk& w, int64_t /*c*/, uint32_t* lo,
                                               uint32_t* hi) {
    *lo = w.head.y & 0x3f3f3f3fu;
    *hi = (w.head.w & 0x0f0f0f0fu) | ((w.head.y >> 2) & 0x30303030u);
  }
  // All eight groups' 6-bit scales and mins (int8_scale_min's values are d · scale and
  // dmin · min), unpacked four at a time: bytes 4..15 hold scales 0..3, mins 0..3, then the low
  // nibbles of scales 4..7 and mins 4..7 (high nibbles), their top bits in bits 6..7 of the first
  // eight bytes.
  CELLM_HD_INLINE static void int8_quant_scales(const Chunk& w, int64_t c, int (&scale)[8],
                                                int (&min)[8]) {
    const uint32_t b = w.head.z;  // bytes 8..11
    const uint32_t m = w.head.w;  // bytes 12..15
    uint32_t scales_lo = 0;
    uint32_t scales_hi = 0;
    int8_scale_words(w, c, &scales_lo, &scales_hi);
    const uint32_t mins_lo = b & 0x3f3f3f3fu;
    const uint32_t mins_hi = ((m >> 4) & 0x0f0f0f0fu) | ((b >> 2) & 0x30303030u);
    CELLM_UNROLL
    for (int j = 0; j < 4; ++j) {
      scale[j] = static_cast<int>((scales_lo >> (8 * j)) & 0xffu);
      scale[j + 4] = static_cast<int>((scales_hi >> (8 * j)) & 0xffu);
      min[j] = static_cast<int>((mins_lo >> (8 * j)) & 0xffu);
      min[j + 4] = static_cast<int>((mins_hi >> (8 * j)) & 0xffu);
    }
  }
  // Sub-block j's integer min alone (j in 0..7, known only at run time): int8_quant_scales' min[j]
  // from whole words — no byte indexed by a run-time j, which would put the head in local memory.
  CELLM_HD_INLINE static int int8_min_of(const Chunk& w, int j) {
    const int shift = 8 * (j & 3);
    const uint32_t b = w.head.z >> shift;  // byte j & 3 of bytes 8..11, low
    const uint32_t m = w.head.w >> shift;  // byte j & 3 of bytes 12..15, low
    return static_cast<int>(j < 4 ? b & 0x3fu : ((m >> 4) & 0x0fu) | ((b >> 2) & 0x30u));
  }
  CELLM_HD_INLINE static float int8_d(const Chunk& w) {
    return f16_bits_to_float(half_of(w.head, 0));
  }
  CELLM_HD_INLINE static float int8_dmin(const Chunk& w) {
    return f16_bits_to_float(half_of(w.head, 1));
  }
};

struct DecodeQ6_K : InterleavedDecoderBase {
  static constexpr bool kHasMin = false;
  struct Chunk {
    uint4 ql;      // this lane's low nibbles (4 words)
    uint2 qh;      // this lane's high bit pairs (2 words)
    uint4 scales;  // the super-block's 16 int8 sub-block scales
    uint32_t d;    // the super-block's f16 scale (low 16 bits)
  };
  CELLM_HD_INLINE static Chunk load(const uint8_t* row, int64_t num_cols, int64_t c) {
    const int64_t s = c >> 3;
    const int64_t lane = c & 7;
    Chunk chunk;
    chunk.ql = load_stream_u4(row + 128 * s + 16 * lane);
    chunk.qh = load_stream_u2(row + num_cols / 2 + 64 * s + 8 * lane);
    chunk.scales = load_stream_u4(row + 3 * num_cols / 4 + 16 * s);
    chunk.d = load_u16(row + 3 * num_cols / 4 + num_cols / 16 + 2 * s);
    return chunk;
  }
  CELLM_HD_INLINE static void group(const Chunk& w, int g, int64_t c, GroupValues* out) {
    const uint32_t quants = int8_word(w, g, c);
    CELLM_UNROLL
    for (int i = 0; i < 4; ++i) out->q[i] = magic_byte(quants, i) - (kMagic + 32.0f);
    int8_scale_min(w, g, c, &out->scale, &out->min);
  }
  // For int8 activations (as DecodeQ4_K's): the six-bit values u, offset −32, no min.
  static constexpr int kInt8Offset = -32;
  CELLM_HD_INLINE static uint32_t int8_word(const Chunk& w, int g, int64_t /*c*/) {
    const int n = g >> 2;
    const int gg = g & 3;
    const uint32_t low = (word_of(w.ql, 2 * n + (gg & 1)) >> (4 * (gg >> 1))) & 0x0f0f0f0fu;
    const uint32_t high = (((n == 0 ? w.qh.x : w.qh.y) >> (2 * gg)) & 0x03030303u) << 4;
    return low | high;
  }
  CELLM_HD_INLINE static void int8_scale_min(const Chunk& w, int g, int64_t c, float* scale,
                                             float* min) {
    const int sub = 8 * (g >> 2) + 2 * (g & 3) + static_cast<int>((c & 7) >> 2);
    const auto scale_q = static_cast<int8_t>(static_cast<uint8_t>(byte_of(w.scales, sub)));
    *scale = mul_rn(f16_bits_to_float(static_cast<uint16_t>(w.d)), static_cast<float>(scale_q));
    *min = 0.0f;
  }
  // All eight groups' sub-block scales (int8_scale_min's value is d · scale): group g's is byte
  // 2 (g & 1) + h of scales word 2 (g >> 2) + ((g & 3) >> 1), h = 1 for lanes 4..7 of the span.
  CELLM_HD_INLINE static void int8_quant_scales(const Chunk& w, int64_t c, int (&scale)[8],
                                                int (&min)[8]) {
    const int shift = 8 * static_cast<int>((c & 7) >> 2);
    CELLM_UNROLL
    for (int g = 0; g < 8; ++g) {
      const uint32_t word = word_of(w.scales, 2 * (g >> 2) + ((g & 3) >> 1)) >> shift;
      scale[g] = static_cast<int8_t>(static_cast<uint8_t>(word >> (16 * (g & 1))));
      min[g] = 0;
    }
  }
  // The same eight scales as signed bytes: groups 0..3 of *lo, 4..7 of *hi (as DecodeQ4_K's).
  // Groups 2p and 2p + 1 are bytes h and 2 + h of scales word p: one byte permute per two words.
  CELLM_HD_INLINE static void int8_scale_words(const Chunk& w, int64_t c, uint32_t* lo,
                                               uint32_t* hi) {
    const uint32_t selector = ((c & 7) >> 2) != 0 ? 0x7531u : 0x6420u;
    *lo = byte_perm(w.scales.x, w.scales.y, selector);
    *hi = byte_perm(w.scales.z, w.scales.w, selector);
  }
  CELLM_HD_INLINE static float int8_d(const Chunk& w) {
    return f16_bits_to_float(static_cast<uint16_t>(w.d));
  }
  CELLM_HD_INLINE static float int8_dmin(const Chunk& /*w*/) { return 0.0f; }
};

// The value of element e of an interleaved row (chunk decode of one element), as the CPU
// dequantizes it: scale * q - min rounded as two separate operations.
template <class Decoder>
CELLM_HD_INLINE float interleaved_element(const uint8_t* row, int64_t num_cols, int64_t e) {
  const int64_t within = e & 255;
  const int64_t c = 8 * (e >> 8) + ((within & 31) >> 2);
  const int g = static_cast<int>(within >> 5);
  GroupValues v;
  Decoder::group(Decoder::load(row, num_cols, c), g, c, &v);
  const float q = v.q[within & 3];
  return Decoder::kHasMin ? sub_rn(mul_rn(v.scale, q), v.min) : mul_rn(q, v.scale);
}

// Element e of a GGUF-layout row of `type` (F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K), as the CPU
// dequantizes it. Byte loads only: rows need no alignment.
CELLM_HD_INLINE float gguf_element(TensorType type, const uint8_t* row, int64_t e) {
  const auto u8 = [row](int64_t offset) { return static_cast<uint32_t>(row[offset]); };
  const auto u16 = [row](int64_t offset) {
    return static_cast<uint16_t>(row[offset] | (row[offset + 1] << 8));
  };
  switch (type) {
    case TensorType::kF32: {
      const uint32_t bits =
          u8(4 * e) | (u8(4 * e + 1) << 8) | (u8(4 * e + 2) << 16) | (u8(4 * e + 3) << 24);
      return bits_to_float(bits);
    }
    case TensorType::kF16:
      return f16_bits_to_float(u16(2 * e));
    case TensorType::kBF16:
      return bf16_bits_to_float(u16(2 * e));
    case TensorType::kQ8_0: {
      const int64_t block = 34 * (e >> 5);
      const auto q = static_cast<int8_t>(static_cast<uint8_t>(u8(block + 2 + (e & 31))));
      return mul_rn(static_cast<float>(q), f16_bits_to_float(u16(block)));
    }
    case TensorType::kQ4_0: {
      const int64_t block = 18 * (e >> 5);
      const int j = static_cast<int>(e & 31);
      const uint32_t byte = u8(block + 2 + (j & 15));
      const int q = static_cast<int>(j < 16 ? (byte & 0x0f) : (byte >> 4)) - 8;
      return mul_rn(static_cast<float>(q), f16_bits_to_float(u16(block)));
    }
    case TensorType::kQ4_K: {
      const int64_t super = 144 * (e >> 8);
      const int within = static_cast<int>(e & 255);
      const int k = within >> 6;        // 64-element quarter
      const int h = (within >> 5) & 1;  // low or high nibble
      const int l = within & 31;
      uint4 head;
      head.x = u8(super) | (u8(super + 1) << 8) | (u8(super + 2) << 16) | (u8(super + 3) << 24);
      head.y = u8(super + 4) | (u8(super + 5) << 8) | (u8(super + 6) << 16) | (u8(super + 7) << 24);
      head.z =
          u8(super + 8) | (u8(super + 9) << 8) | (u8(super + 10) << 16) | (u8(super + 11) << 24);
      head.w =
          u8(super + 12) | (u8(super + 13) << 8) | (u8(super + 14) << 16) | (u8(super + 15) << 24);
      int scale_q = 0;
      int min_q = 0;
      q4_k_scale_min(head, 2 * k + h, &scale_q, &min_q);
      const float scale = mul_rn(f16_bits_to_float(half_of(head, 0)), static_cast<float>(scale_q));
      const float min = mul_rn(f16_bits_to_float(half_of(head, 1)), static_cast<float>(min_q));
      const uint32_t q = (u8(super + 16 + 32 * k + l) >> (4 * h)) & 0x0f;
      return sub_rn(mul_rn(scale, static_cast<float>(q)), min);
    }
    case TensorType::kQ6_K: {
      const int64_t super = 210 * (e >> 8);
      const int within = static_cast<int>(e & 255);
      const int n = within >> 7;
      const int g = (within >> 5) & 3;
      const int l = within & 31;
      const uint32_t low = (u8(super + 64 * n + 32 * (g % 2) + l) >> (4 * (g / 2))) & 0x0f;
      const uint32_t high = (u8(super + 128 + 32 * n + l) >> (2 * g)) & 3;
      const int q = static_cast<int>(low | (high << 4)) - 32;
      const auto scale_q =
          static_cast<int8_t>(static_cast<uint8_t>(u8(super + 192 + 8 * n + 2 * g + l / 16)));
      const float scale = mul_rn(f16_bits_to_float(u16(super + 208)), static_cast<float>(scale_q));
      return mul_rn(scale, static_cast<float>(q));
    }
    default:
      return bits_to_float(0x7fc00000u);  // NaN: check_device_weight refuses other types
  }
}

}  // namespace cellm::kernels
