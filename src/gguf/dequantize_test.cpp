// Dequantization of the plain float types and the 32-element quant types, from blocks written
// out by hand with their expected values worked out from the GGML format definitions
// (ggml-common.h): every expected value below is a literal, computed in the comments.
#include "gguf/dequantize.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "gguf/type_test_util.h"

namespace cellm {
namespace {

using testing::BlockBytes;
using testing::expect_floats_eq;

std::vector<float> dequantize(TensorType type, const std::vector<uint8_t>& bytes, size_t n) {
  std::vector<float> out(n, -12345.0f);
  const Status status = dequantize_row(type, bytes, out);
  EXPECT_TRUE(status.ok()) << status.to_string();
  return out;
}

TEST(DequantizeTest, F32RowIsCopiedBitForBit) {
  // 0x3fc00000 = 1.5, 0xc0100000 = -2.25, 0x00000001 = smallest subnormal, 0x7f7fffff = max.
  const auto bytes =
      BlockBytes().u32(0x3fc00000).u32(0xc0100000).u32(0x00000001).u32(0x7f7fffff).bytes();
  const std::vector<float> expected = {1.5f, -2.25f, std::numeric_limits<float>::denorm_min(),
                                       std::numeric_limits<float>::max()};
  expect_floats_eq(dequantize(TensorType::kF32, bytes, 4), expected);
}

TEST(DequantizeTest, F16RowDecodesEveryKindOfHalf) {
  const auto bytes = BlockBytes()
                         .f16(0x3c00)  // 1
                         .f16(0xc000)  // -2
                         .f16(0x3555)  // 1.0101010101b * 2^-2 = 0.333251953125
                         .f16(0x0001)  // smallest subnormal 2^-24
                         .f16(0x7bff)  // largest normal 65504
                         .f16(0x8000)  // -0
                         .f16(0x7c00)  // +inf
                         .f16(0x7e00)  // NaN
                         .bytes();
  const std::vector<float> expected = {1.0f,
                                       -2.0f,
                                       0.333251953125f,
                                       5.9604644775390625e-08f,
                                       65504.0f,
                                       -0.0f,
                                       std::numeric_limits<float>::infinity(),
                                       std::numeric_limits<float>::quiet_NaN()};
  const auto actual = dequantize(TensorType::kF16, bytes, 8);
  expect_floats_eq(actual, expected);
  EXPECT_TRUE(std::signbit(actual[5]));
}

TEST(DequantizeTest, Bf16RowIsTheHighHalfOfAnF32) {
  const auto bytes = BlockBytes()
                         .f16(0x3f80)  // 1
                         .f16(0xc040)  // -(1 + 64/128) * 2^1 = -3
                         .f16(0x4049)  // (1 + 73/128) * 2 = 3.140625
                         .f16(0x0001)  // f32 bits 0x00010000 = 2^16 * 2^-149 = 2^-133
                         .f16(0xff80)  // -inf
                         .f16(0x7fc0)  // NaN
                         .bytes();
  const std::vector<float> expected = {1.0f,
                                       -3.0f,
                                       3.140625f,
                                       std::ldexp(1.0f, -133),
                                       -std::numeric_limits<float>::infinity(),
                                       std::numeric_limits<float>::quiet_NaN()};
  expect_floats_eq(dequantize(TensorType::kBF16, bytes, 6), expected);
}

TEST(DequantizeTest, Q8_0BlocksScaleSignedBytes) {
  // Block 0: d = 0x3a00 = 1.5 * 2^-1 = 0.75; x = q * 0.75.
  // Block 1: d = 0xbc00 = -1; every q = 2, so every x = -2 (a negative scale is allowed).
  // q: 0 1 -1 2 -2 3 -3 4, 127 -127 -128 64 -64 10 -10 100, 5..9 11 12 13, -5..-9 -11 -12 -13
  const auto bytes = BlockBytes()
                         .f16(0x3a00)
                         .u8({0x00, 0x01, 0xff, 0x02, 0xfe, 0x03, 0xfd, 0x04,  //
                              0x7f, 0x81, 0x80, 0x40, 0xc0, 0x0a, 0xf6, 0x64,  //
                              0x05, 0x06, 0x07, 0x08, 0x09, 0x0b, 0x0c, 0x0d,  //
                              0xfb, 0xfa, 0xf9, 0xf8, 0xf7, 0xf5, 0xf4, 0xf3})
                         .f16(0xbc00)
                         .fill(32, 0x02)
                         .bytes();
  std::vector<float> expected = {0,     0.75,   -0.75, 1.5, -1.5,  2.25,  -2.25, 3,
                                 95.25, -95.25, -96,   48,  -48,   7.5,   -7.5,  75,
                                 3.75,  4.5,    5.25,  6,   6.75,  8.25,  9,     9.75,
                                 -3.75, -4.5,   -5.25, -6,  -6.75, -8.25, -9,    -9.75};
  expected.insert(expected.end(), 32, -2.0f);
  expect_floats_eq(dequantize(TensorType::kQ8_0, bytes, 64), expected);
}

TEST(DequantizeTest, Q4_0LowNibblesComeFirstThenHighNibbles) {
  // d = 0x4000 = 2; qs[j] = j | (15 - j) << 4. Element j < 16 = (j - 8) * 2; element 16 + j =
  // (15 - j - 8) * 2.
  const auto bytes = BlockBytes()
                         .f16(0x4000)
                         .u8({0xf0, 0xe1, 0xd2, 0xc3, 0xb4, 0xa5, 0x96, 0x87, 0x78, 0x69, 0x5a,
                              0x4b, 0x3c, 0x2d, 0x1e, 0x0f})
                         .bytes();
  const std::vector<float> expected = {-16, -14, -12, -10, -8, -6, -4,  -2,  0,   2,  4,
                                       6,   8,   10,  12,  14, 14, 12,  10,  8,   6,  4,
                                       2,   0,   -2,  -4,  -6, -8, -10, -12, -14, -16};
  expect_floats_eq(dequantize(TensorType::kQ4_0, bytes, 32), expected);
}

TEST(DequantizeTest, Q4_1AddsTheBlockMinimum) {
  // d = 0x3800 = 0.5, m = 0xc200 = -1.5 * 2 = -3; x = q * 0.5 - 3.
  // Low nibbles (elements 0..15): 0 2 4 6 8 10 12 14 1 3 5 7 9 11 13 15;
  // high nibbles (elements 16..31): 1 3 5 7 9 11 13 15 0 2 4 6 8 10 12 14.
  const auto bytes = BlockBytes()
                         .f16(0x3800)
                         .f16(0xc200)
                         .u8({0x10, 0x32, 0x54, 0x76, 0x98, 0xba, 0xdc, 0xfe, 0x01, 0x23, 0x45,
                              0x67, 0x89, 0xab, 0xcd, 0xef})
                         .bytes();
  const std::vector<float> expected = {-3,  -2,  -1,  0,   1,   2,    3,    4,    -2.5, -1.5, -0.5,
                                       0.5, 1.5, 2.5, 3.5, 4.5, -2.5, -1.5, -0.5, 0.5,  1.5,  2.5,
                                       3.5, 4.5, -3,  -2,  -1,  0,    1,    2,    3,    4};
  expect_floats_eq(dequantize(TensorType::kQ4_1, bytes, 32), expected);
}

TEST(DequantizeTest, Q5_0FifthBitsComeFromTheLittleEndianWord) {
  // d = 0x3800 = 0.5; x = (q - 16) * 0.5. qh bytes 0f f0 55 aa = u32 0xaa55f00f: bit j is the
  // 5th bit of element j; set for elements 0-3, 12-15, 16 18 20 22, 25 27 29 31.
  // qs[j] = j | (15 - j) << 4 as in the Q4_0 test.
  const auto bytes = BlockBytes()
                         .f16(0x3800)
                         .u8({0x0f, 0xf0, 0x55, 0xaa})
                         .u8({0xf0, 0xe1, 0xd2, 0xc3, 0xb4, 0xa5, 0x96, 0x87, 0x78, 0x69, 0x5a,
                              0x4b, 0x3c, 0x2d, 0x1e, 0x0f})
                         .bytes();
  const std::vector<float> expected = {
      // elements 0..15: q = j + 16 * bit  ->  16 17 18 19 4 5 6 7 8 9 10 11 28 29 30 31
      0, 0.5, 1, 1.5, -6, -5.5, -5, -4.5, -4, -3.5, -3, -2.5, 6, 6.5, 7, 7.5,
      // elements 16..31: q = 15 - j + 16 * bit -> 31 14 29 12 27 10 25 8 7 22 5 20 3 18 1 16
      7.5, -1, 6.5, -2, 5.5, -3, 4.5, -4, -4.5, 3, -5.5, 2, -6.5, 1, -7.5, 0};
  expect_floats_eq(dequantize(TensorType::kQ5_0, bytes, 32), expected);
}

TEST(DequantizeTest, Q5_1FifthBitsAndMinimum) {
  // d = 0x3400 = 0.25, m = 0x3c00 = 1; x = q * 0.25 + 1. qh bytes 01 80 00 ff: 5th bits of
  // elements 0, 15 and 24..31. qs as in the Q4_1 test.
  const auto bytes = BlockBytes()
                         .f16(0x3400)
                         .f16(0x3c00)
                         .u8({0x01, 0x80, 0x00, 0xff})
                         .u8({0x10, 0x32, 0x54, 0x76, 0x98, 0xba, 0xdc, 0xfe, 0x01, 0x23, 0x45,
                              0x67, 0x89, 0xab, 0xcd, 0xef})
                         .bytes();
  const std::vector<float> expected = {
      // q: 16 2 4 6 8 10 12 14 1 3 5 7 9 11 13 31
      5, 1.5, 2, 2.5, 3, 3.5, 4, 4.5, 1.25, 1.75, 2.25, 2.75, 3.25, 3.75, 4.25, 8.75,
      // q: 1 3 5 7 9 11 13 15 16 18 20 22 24 26 28 30
      1.25, 1.75, 2.25, 2.75, 3.25, 3.75, 4.25, 4.75, 5, 5.5, 6, 6.5, 7, 7.5, 8, 8.5};
  expect_floats_eq(dequantize(TensorType::kQ5_1, bytes, 32), expected);
}

TEST(DequantizeTest, UnalignedSourceBytesDecodeTheSame) {
  // The Q4_0 block of the test above, one byte past an aligned start.
  auto bytes = BlockBytes()
                   .u8({0xaa})
                   .f16(0x4000)
                   .u8({0xf0, 0xe1, 0xd2, 0xc3, 0xb4, 0xa5, 0x96, 0x87, 0x78, 0x69, 0x5a, 0x4b,
                        0x3c, 0x2d, 0x1e, 0x0f})
                   .bytes();
  std::vector<float> out(32);
  ASSERT_TRUE(dequantize_row(TensorType::kQ4_0, std::span(bytes).subspan(1), out).ok());
  EXPECT_EQ(out[0], -16.0f);
  EXPECT_EQ(out[15], 14.0f);
  EXPECT_EQ(out[16], 14.0f);
  EXPECT_EQ(out[31], -16.0f);
}

TEST(DequantizeTest, CanDequantizeAgreesWithTheTypeTable) {
  int num_dequantizable = 0;
  for (uint32_t id = 0; id < 64; ++id) {
    const auto traits = tensor_type_traits(id);
    const bool can = can_dequantize(static_cast<TensorType>(id));
    EXPECT_EQ(can, traits.has_value() && traits->can_dequantize) << "type id " << id;
    num_dequantizable += can;
  }
  EXPECT_EQ(num_dequantizable, 13);  // F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K..Q6_K
}

TEST(DequantizeTest, RowThatIsNotWholeBlocksIsAnError) {
  const std::vector<uint8_t> bytes(36, 0);
  std::vector<float> out(33);
  const Status status = dequantize_row(TensorType::kQ4_0, bytes, out);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("33"), std::string::npos) << status.message();
  EXPECT_NE(status.message().find("q4_0"), std::string::npos) << status.message();
}

TEST(DequantizeTest, SourceOfTheWrongSizeIsAnError) {
  std::vector<float> out(64);
  for (size_t num_bytes : {35u, 37u, 0u}) {
    const std::vector<uint8_t> bytes(num_bytes, 0);
    const Status status = dequantize_row(TensorType::kQ4_0, bytes, out);
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << num_bytes;
    EXPECT_NE(status.message().find("36 bytes, got " + std::to_string(num_bytes)),
              std::string::npos)
        << status.message();
  }
  const std::vector<uint8_t> odd(7, 0);  // 3.5 halves
  std::vector<float> four(4);
  EXPECT_EQ(dequantize_row(TensorType::kF16, odd, four).code(), StatusCode::kInvalidArgument);
}

TEST(DequantizeTest, TypesWithoutKernelsAreUnimplemented) {
  std::vector<float> out(256);
  const std::vector<uint8_t> bytes(66, 0);  // one iq2_xxs block
  Status status = dequantize_row(TensorType::kIQ2_XXS, bytes, out);
  EXPECT_EQ(status.code(), StatusCode::kUnimplemented);
  EXPECT_NE(status.message().find("iq2_xxs"), std::string::npos) << status.message();

  status = dequantize_row(static_cast<TensorType>(99), bytes, out);
  EXPECT_EQ(status.code(), StatusCode::kUnimplemented);
  EXPECT_NE(status.message().find("99"), std::string::npos) << status.message();
}

TEST(DequantizeTest, EmptyRowIsFine) {
  EXPECT_TRUE(dequantize_row(TensorType::kQ6_K, {}, {}).ok());
  const auto values = dequantize_tensor(TensorType::kF16, {}, 0);
  ASSERT_TRUE(values.ok());
  EXPECT_TRUE(values->empty());
}

TEST(DequantizeTest, WholeTensorIsItsRowsInOrder) {
  // Two Q8_0 rows of one block each: d = 1 with q = 1..32, then d = -0.5 with q = 4.
  BlockBytes bytes;
  bytes.f16(0x3c00);
  for (uint8_t q = 1; q <= 32; ++q) bytes.u8({q});
  bytes.f16(0xb800).fill(32, 0x04);
  const auto values = dequantize_tensor(TensorType::kQ8_0, bytes.bytes(), 64);
  ASSERT_TRUE(values.ok()) << values.status().to_string();
  std::vector<float> expected;
  for (int q = 1; q <= 32; ++q) expected.push_back(static_cast<float>(q));
  expected.insert(expected.end(), 32, -2.0f);
  expect_floats_eq(*values, expected);

  const auto short_data = dequantize_tensor(TensorType::kQ8_0, bytes.bytes(), 96);
  EXPECT_EQ(short_data.status().code(), StatusCode::kInvalidArgument);
  const auto huge = dequantize_tensor(TensorType::kQ8_0, bytes.bytes(), UINT64_MAX - 31);
  EXPECT_FALSE(huge.ok());
}

}  // namespace
}  // namespace cellm
