// Dequantization of the K-quants (256-element super-blocks) from blocks written out by hand.
//
// Each block gives every sub-block a constant quant and its own scale (and min), so the expected
// row is one literal per sub-block, worked out in the comments from the GGML definitions
// (ggml-common.h); a few "marker" bytes then break the pattern at chosen elements to pin down
// the element order and the bit planes, with those elements' expected values worked out too.
// Every test also decodes a second copy of the block with its f16 super-scales negated, which
// must give the negated row (the block stride and the scales' roles).
#include <gtest/gtest.h>

#include <vector>

#include "gguf/dequantize.h"
#include "gguf/type_test_util.h"

namespace cellm {
namespace {

using testing::BlockBytes;
using testing::expect_floats_eq;
using testing::sub_block_values;

// Decodes `block` and a copy with the sign bit of each f16 at `half_offsets` flipped.
void expect_block_and_negated_copy(TensorType type, const std::vector<uint8_t>& block,
                                   std::initializer_list<size_t> half_offsets,
                                   const std::vector<float>& expected) {
  std::vector<uint8_t> row = block;
  row.insert(row.end(), block.begin(), block.end());
  for (size_t offset : half_offsets) row.at(block.size() + offset + 1) ^= 0x80;
  std::vector<float> out(512);
  const Status status = dequantize_row(type, row, out);
  ASSERT_TRUE(status.ok()) << status.to_string();
  std::vector<float> expected_row = expected;
  for (float value : expected) expected_row.push_back(-value);
  expect_floats_eq(out, expected_row);
}

// Layout: scales[16] (scale | min << 4), qs[64], d, dmin. x = d * scale * q - dmin * min.
// Element 128n + 32j + 16h + l is bits 2j of qs[32n + 16h + l], sub-block 8n + 2j + h.
TEST(DequantizeKTest, Q2_KHandBlock) {
  const auto block = BlockBytes()
                         // (scale, min) per sub-block: (1,0) (15,15) (0,7) (8,1) (3,2) (5,9)
                         // (12,4) (7,14) (2,3) (9,0) (4,12) (11,6) (6,5) (13,10) (10,8) (14,11)
                         .u8({0x01, 0xff, 0x70, 0x18, 0x23, 0x95, 0x4c, 0xe7, 0x32, 0x09, 0xc4,
                              0x6b, 0x56, 0xad, 0x8a, 0xbe})
                         // quants, bit pairs j = 0..3 of each range:
                         .fill(16, 0xb7)      // n0 h0: sub-blocks 0 2 4 6 get 3 1 3 2
                         .fill(16, 0xd2)      // n0 h1: sub-blocks 1 3 5 7 get 2 0 1 3
                         .fill(16, 0x1c)      // n1 h0: sub-blocks 8 10 12 14 get 0 3 1 0
                         .fill(16, 0xb9)      // n1 h1: sub-blocks 9 11 13 15 get 1 2 3 2
                         .f16(0x3800)         // d = 0.5
                         .f16(0x3400)         // dmin = 0.25
                         .set(16 + 4, 0x6c)   // qs[4]: elements 4 36 68 100 get q = 0 3 2 1
                         .set(16 + 63, 0x00)  // qs[63]: elements 159 191 223 255 get q = 0
                         .bytes();
  // 0.5*1*3 - 0 = 1.5; 0.5*15*2 - 0.25*15 = 11.25; 0*1 - 1.75; 4*0 - 0.25; 1.5*3 - 0.5 = 4;
  // 2.5*1 - 2.25 = 0.25; 6*2 - 1 = 11; 3.5*3 - 3.5 = 7; 1*0 - 0.75; 4.5*1 - 0 = 4.5;
  // 2*3 - 3 = 3; 5.5*2 - 1.5 = 9.5; 3*1 - 1.25 = 1.75; 6.5*3 - 2.5 = 17; 5*0 - 2; 7*2 - 2.75.
  const float base[16] = {1.5,   11.25, -1.75, -0.25, 4,    0.25, 11, 7,
                          -0.75, 4.5,   3,     9.5,   1.75, 17,   -2, 11.25};
  const auto expected = sub_block_values(base, 16,
                                         {{4, 0},       // sub-block 0: 0.5*1*0 - 0
                                          {36, -1.75},  // sub-block 2: scale 0
                                          {68, 2.5},    // sub-block 4: 1.5*2 - 0.5
                                          {100, 5},     // sub-block 6: 6*1 - 1
                                          {159, 0},     // q = 0: -0.25 * min
                                          {191, -1.5},
                                          {223, -2.5},
                                          {255, -2.75}});
  expect_block_and_negated_copy(TensorType::kQ2_K, block, {80, 82}, expected);
}

// Layout: hmask[32], qs[64], scales[12], d. x = d * (scale6 - 32) * (q2 - (hbit ? 0 : 4)).
// Element 128n + 32j + 16h + l: q2 = bits 2j of qs[32n + 16h + l], hbit = bit 4n + j of
// hmask[16h + l], sub-block 8n + 2j + h.
TEST(DequantizeKTest, Q3_KHandBlock) {
  const auto block =
      BlockBytes()
          .fill(16, 0xad)  // hmask h0, bits 0..7 = sub-blocks 0 2 4 6 8 10 12 14: 1 0 1 1 0 1 0 1
          .fill(16, 0x52)  // hmask h1, sub-blocks 1 3 5 7 9 11 13 15: 0 1 0 0 1 0 1 0
          .fill(16, 0x4f)  // qs n0 h0: q2 of sub-blocks 0 2 4 6 = 3 3 0 1
          .fill(16, 0x98)  // qs n0 h1: sub-blocks 1 3 5 7 = 0 2 1 2
          .fill(16, 0x68)  // qs n1 h0: sub-blocks 8 10 12 14 = 0 2 2 1
          .fill(16, 0x4f)  // qs n1 h1: sub-blocks 9 11 13 15 = 3 3 0 1
          // 6-bit scales 33 31 0 63 40 20 32 5 47 16 50 36 1 62 34 28: low nibbles of 0..7 in
          // bytes 0..7's low nibbles, of 8..15 in their high nibbles; the high 2 bits of
          // scale s in bits 2*(s/4) of byte 8 + s%4.
          .u8({0xf1, 0x0f, 0x20, 0x4f, 0x18, 0xe4, 0x20, 0xc5, 0x2a, 0xd5, 0xb8, 0x63})
          .f16(0x3400)         // d = 0.25
          .set(7, 0xff)        // hmask[7]: all high bits set at l = 7 of the h0 sub-blocks
          .set(31, 0x00)       // hmask[31]: all clear at l = 15 of the h1 sub-blocks
          .set(32 + 50, 0x00)  // qs[50]: q2 = 0 at elements 146 178 210 242
          .bytes();
  // scale - 32: 1 -1 -32 31 8 -12 0 -27 15 -16 18 4 -31 30 2 -4;
  // q: 3 -4 -1 2 0 -3 1 -2 -4 3 2 -1 -2 0 1 -3; x = 0.25 * (scale - 32) * q.
  const float base[16] = {0.75, 1, 8, 15.5, 0, 9, 0, 13.5, -15, -12, 9, -1, 15.5, 0, 0.5, 3};
  const auto expected = sub_block_values(base, 16,
                                         {{39, -24},     // sub-block 2, hbit now set: q = 3
                                          {135, 0},      // sub-block 8, q = 0
                                          {199, -15.5},  // sub-block 12, q = 2: 0.25*-31*2
                                          {63, -15.5},   // sub-block 3, hbit now clear: q = -2
                                          {159, 4},      // sub-block 9, q = -1: 0.25*-16*-1
                                          {223, -30},    // sub-block 13, q = -4: 0.25*30*-4
                                          {146, 0},      // sub-block 9, q2 = 0 with hbit: 0
                                          {178, -4},     // sub-block 11, q = -4: 0.25*4*-4
                                          {210, 0},      // sub-block 13, q = 0
                                          {242, 4}});    // sub-block 15, q = -4: 0.25*-4*-4
  expect_block_and_negated_copy(TensorType::kQ3_K, block, {108}, expected);
}

// The Q4_K / Q5_K packed scales used below: scales 1 2 63 10 17 34 51 5, mins 0 3 1 62 33 16
// 63 2. Bytes 0..3 = scale | (high 2 bits of scale j+4) << 6; bytes 4..7 = min | (high 2
// bits of min j+4) << 6; bytes 8..11 = (scale j+4 & 15) | (min j+4 & 15) << 4.
const std::initializer_list<uint8_t> kK4Scales = {0x41, 0x82, 0xff, 0x0a, 0x80, 0x43,
                                                  0xc1, 0x3e, 0x11, 0x02, 0xf3, 0x25};

// Layout: d, dmin, scales[12], qs[128]. x = d * scale * q - dmin * min. Element 64k + 32h + l
// is nibble h of qs[32k + l], sub-block 2k + h.
TEST(DequantizeKTest, Q4_KHandBlock) {
  const auto block = BlockBytes()
                         .f16(0x4000)  // d = 2
                         .f16(0x3800)  // dmin = 0.5
                         .u8(kK4Scales)
                         .fill(32, 0x0f)       // sub-blocks 0, 1: q = 15, 0
                         .fill(32, 0x17)       // sub-blocks 2, 3: q = 7, 1
                         .fill(32, 0x38)       // sub-blocks 4, 5: q = 8, 3
                         .fill(32, 0x9c)       // sub-blocks 6, 7: q = 12, 9
                         .set(16 + 5, 0x3a)    // qs[5]: element 5 q = 10, element 37 q = 3
                         .set(16 + 127, 0xf0)  // qs[127]: element 223 q = 0, element 255 q = 15
                         .bytes();
  // 2*1*15 - 0; 2*2*0 - 0.5*3; 2*63*7 - 0.5*1; 2*10*1 - 0.5*62; 2*17*8 - 0.5*33;
  // 2*34*3 - 0.5*16; 2*51*12 - 0.5*63; 2*5*9 - 0.5*2.
  const float base[8] = {30, -1.5, 881.5, -11, 255.5, 196, 1192.5, 89};
  const auto expected = sub_block_values(base, 32,
                                         {{5, 20},       // 2*1*10 - 0
                                          {37, 10.5},    // 2*2*3 - 1.5
                                          {223, -31.5},  // 2*51*0 - 31.5
                                          {255, 149}});  // 2*5*15 - 1
  expect_block_and_negated_copy(TensorType::kQ4_K, block, {0, 2}, expected);
}

// Layout: d, dmin, scales[12], qh[32], qs[128]. As Q4_K, plus 16 when bit 2k + h of qh[l] is
// set for element 64k + 32h + l.
TEST(DequantizeKTest, Q5_KHandBlock) {
  const auto block = BlockBytes()
                         .f16(0x3800)  // d = 0.5
                         .f16(0x4000)  // dmin = 2
                         .u8(kK4Scales)
                         .fill(32, 0xa5)  // 5th bits for sub-blocks 0 2 5 7
                         .fill(32, 0x0f)
                         .fill(32, 0x17)
                         .fill(32, 0x38)
                         .fill(32, 0x9c)
                         .set(16 + 5, 0x02)    // qh[5]: only sub-block 1 gets a 5th bit at l = 5
                         .set(16 + 31, 0xff)   // qh[31]: all sub-blocks get one at l = 31
                         .set(48 + 5, 0x3a)    // qs[5] as in the Q4_K block
                         .set(48 + 127, 0xf0)  // qs[127]
                         .bytes();
  // q = 31 0 23 1 8 19 12 25: 0.5*1*31 - 0; 0 - 2*3; 0.5*63*23 - 2; 0.5*10*1 - 124;
  // 0.5*17*8 - 66; 0.5*34*19 - 32; 0.5*51*12 - 126; 0.5*5*25 - 4.
  const float base[8] = {15.5, -6, 722.5, -119, 2, 291, 180, 58.5};
  const auto expected = sub_block_values(base, 32,
                                         {{5, 5},         // q = 10: 0.5*10
                                          {37, 13},       // q = 3 + 16: 1*19 - 6
                                          {69, 218.5},    // q = 7: 31.5*7 - 2
                                          {165, 19},      // q = 3: 17*3 - 32
                                          {229, 18.5},    // q = 9: 2.5*9 - 4
                                          {63, 10},       // q = 0 + 16: 1*16 - 6
                                          {127, -39},     // q = 1 + 16: 5*17 - 124
                                          {159, 138},     // q = 8 + 16: 8.5*24 - 66
                                          {223, 282},     // q = 0 + 16: 25.5*16 - 126
                                          {255, 73.5}});  // q = 15 + 16: 2.5*31 - 4
  expect_block_and_negated_copy(TensorType::kQ5_K, block, {0, 2}, expected);
}

// Layout: ql[128], qh[64], scales[16] (int8), d. x = d * scale * (q - 32). Element
// 128n + 32g + l: low 4 bits from ql[64n + 32(g%2) + l] (high nibble when g >= 2), high 2 bits
// from bits 2g of qh[32n + l]; sub-block 8n + 2g + l/16.
TEST(DequantizeKTest, Q6_KHandBlock) {
  const auto block =
      BlockBytes()
          // 6-bit quants per sub-block: 33 31 63 0 40 20 32 5 47 16 50 36 1 62 34 28
          .fill(16, 0x81)  // ql n0, l < 16:   low = sub-block 0 (1), high = sub-block 4 (8)
          .fill(16, 0x4f)  // ql n0, l >= 16:  sub-blocks 1 (15), 5 (4)
          .fill(16, 0x0f)  // ql n0 + 32:      sub-blocks 2 (15), 6 (0)
          .fill(16, 0x50)  // ql n0 + 32 + 16: sub-blocks 3 (0), 7 (5)
          .fill(16, 0x1f)  // n1: sub-blocks 8 (15), 12 (1)
          .fill(16, 0xe0)  // sub-blocks 9 (0), 13 (14)
          .fill(16, 0x22)  // sub-blocks 10 (2), 14 (2)
          .fill(16, 0xc4)  // sub-blocks 11 (4), 15 (12)
          .fill(16, 0xae)  // qh n0, l < 16: high bits of sub-blocks 0 2 4 6 = 2 3 2 2
          .fill(16, 0x11)  // qh n0, l >= 16: sub-blocks 1 3 5 7 = 1 0 1 0
          .fill(16, 0x8e)  // qh n1, l < 16: sub-blocks 8 10 12 14 = 2 3 0 2
          .fill(16, 0x79)  // qh n1, l >= 16: sub-blocks 9 11 13 15 = 1 2 3 1
          // scales 1 -1 2 -2 3 5 -8 127 -128 10 0 4 -3 7 9 -5
          .u8({0x01, 0xff, 0x02, 0xfe, 0x03, 0x05, 0xf8, 0x7f, 0x80, 0x0a, 0x00, 0x04, 0xfd, 0x07,
               0x09, 0xfb})
          .f16(0x3800)          // d = 0.5
          .set(3, 0x00)         // ql[3]: low 4 bits 0 at elements 3 and 67
          .set(128 + 40, 0x00)  // qh[40]: high bits 0 at elements 136 168 200 232
          .set(128 + 63, 0xff)  // qh[63]: high bits 3 at elements 159 191 223 255
          .bytes();
  // q - 32: 1 -1 31 -32 8 -12 0 -27 15 -16 18 4 -31 30 2 -4; x = 0.5 * scale * (q - 32).
  const float base[16] = {0.5, 0.5, 31, 32, 12, -30, 0, -1714.5, -960, -80, 0, 8, 46.5, 105, 9, 10};
  const auto expected = sub_block_values(base, 16,
                                         {{3, 0},        // q = 0 | 2 << 4 = 32
                                          {67, 0},       // q = 32
                                          {136, 1088},   // q = 15: -64 * -17
                                          {168, 0},      // scale 0
                                          {232, -135},   // q = 2: 4.5 * -30
                                          {159, 80},     // q = 0 | 48: 5 * 16
                                          {191, 40},     // q = 4 | 48: 2 * 20
                                          {255, -70}});  // q = 12 | 48: -2.5 * 28
  expect_block_and_negated_copy(TensorType::kQ6_K, block, {208}, expected);
}

}  // namespace
}  // namespace cellm
