// Quantization to Q8_0, Q4_0, F16 and BF16: hand-worked blocks against llama.cpp's reference
// quantizer definitions, error bounds of quantize -> dequantize on random data, and refusals.
#include "gguf/quantize.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/float16.h"
#include "gguf/dequantize.h"
#include "gguf/type_test_util.h"

namespace cellm {
namespace {

using testing::BlockBytes;
using testing::expect_floats_eq;

std::vector<uint8_t> quantize(TensorType type, const std::vector<float>& x) {
  std::vector<uint8_t> out(row_size_bytes(type, x.size()).value(), 0xee);
  const Status status = quantize_row(type, x, out);
  EXPECT_TRUE(status.ok()) << status.to_string();
  return out;
}

std::vector<float> dequantize(TensorType type, const std::vector<uint8_t>& bytes, size_t n) {
  std::vector<float> out(n);
  EXPECT_TRUE(dequantize_row(type, bytes, out).ok());
  return out;
}

TEST(QuantizeTest, Q8_0HandBlock) {
  // amax = 63.5, so d = 63.5 / 127 = 0.5 (f16 0x3800) and x / d = 2x, rounded half away from 0.
  std::vector<float> x(32, 0.0f);
  x[0] = 63.5f;   // 127
  x[1] = -63.5f;  // -127
  x[2] = 0.25f;   // 0.5 -> 1
  x[3] = -0.25f;  // -0.5 -> -1
  x[4] = 0.2f;    // 0.4 -> 0
  x[5] = 1.0f;    // 2
  x[6] = -10.0f;  // -20 = 0xec
  x[7] = 0.74f;   // 1.48 -> 1
  const auto expected = BlockBytes()
                            .f16(0x3800)
                            .u8({0x7f, 0x81, 0x01, 0xff, 0x00, 0x02, 0xec, 0x01})
                            .fill(24, 0x00)
                            .bytes();
  const auto bytes = quantize(TensorType::kQ8_0, x);
  EXPECT_EQ(bytes, expected);
  std::vector<float> back(32, 0.0f);
  const float nonzero[8] = {63.5f, -63.5f, 0.5f, -0.5f, 0.0f, 1.0f, -10.0f, 0.5f};
  std::copy(nonzero, nonzero + 8, back.begin());
  expect_floats_eq(dequantize(TensorType::kQ8_0, bytes, 32), back);
}

TEST(QuantizeTest, Q4_0HandBlocksWithEitherSignOfMax) {
  std::vector<float> x(64, 0.0f);  // zeros -> q = trunc(0 + 8.5) = 8
  // Block 0: max = -8 (largest magnitude), d = -8 / -8 = 1; q = min(15, trunc(x + 8.5)).
  x[0] = -8.0f;   // 0
  x[1] = 7.0f;    // 15
  x[2] = 7.9f;    // trunc(16.4) = 16 -> clipped to 15
  x[4] = 0.5f;    // 9 (halves round up)
  x[5] = -0.5f;   // 8
  x[6] = 2.4f;    // 10
  x[7] = -3.6f;   // 4
  x[16] = 3.0f;   // 11
  x[17] = -7.5f;  // 1
  // Block 1: max = +4, d = 4 / -8 = -0.5 (f16 0xb800), so x / d = -2x.
  x[32] = 4.0f;   // trunc(-8 + 8.5) = 0
  x[33] = -4.0f;  // trunc(16.5) = 16 -> 15
  x[34] = 1.0f;   // trunc(6.5) = 6
  x[48] = -1.0f;  // trunc(10.5) = 10
  const auto expected = BlockBytes()
                            .f16(0x3c00)
                            // qs[j] = q[j] | q[j + 16] << 4
                            .u8({0xb0, 0x1f, 0x8f, 0x88, 0x89, 0x88, 0x8a, 0x84})
                            .fill(8, 0x88)
                            .f16(0xb800)
                            .u8({0xa0, 0x8f, 0x86})
                            .fill(13, 0x88)
                            .bytes();
  const auto bytes = quantize(TensorType::kQ4_0, x);
  EXPECT_EQ(bytes, expected);
  std::vector<float> back(64, 0.0f);
  // (q - 8) * d
  back[0] = -8;
  back[1] = 7;
  back[2] = 7;
  back[4] = 1;
  back[6] = 2;
  back[7] = -4;
  back[16] = 3;
  back[17] = -7;
  back[32] = 4;
  back[33] = -3.5;
  back[34] = 1;
  back[48] = -1;
  expect_floats_eq(dequantize(TensorType::kQ4_0, bytes, 64), back);
}

TEST(QuantizeTest, ZeroBlocksHaveZeroScale) {
  const std::vector<float> x(32, 0.0f);
  EXPECT_EQ(quantize(TensorType::kQ8_0, x), BlockBytes().f16(0).fill(32, 0).bytes());
  // Q4_0: d = 0 / -8 = -0 (f16 0x8000, as llama.cpp stores it); q = trunc(0 + 8.5) = 8.
  EXPECT_EQ(quantize(TensorType::kQ4_0, x), BlockBytes().f16(0x8000).fill(16, 0x88).bytes());
}

TEST(QuantizeTest, SubnormalBlocksQuantizeToZerosWithoutOverflow) {
  // amax = 1e-39 (an f32 subnormal): d = amax / 127 and amax / -8 are far below the smallest
  // f16, so the stored scale is 0 and every value decodes to 0, even though 1 / d overflows.
  std::vector<float> x(32, 0.0f);
  x[0] = 1e-39f;
  x[1] = -1e-40f;
  for (TensorType type : {TensorType::kQ8_0, TensorType::kQ4_0}) {
    const auto bytes = quantize(type, x);
    EXPECT_EQ(bytes[0], 0x00);
    EXPECT_EQ(bytes[1] & 0x7f, 0x00);  // +0 or -0
    expect_floats_eq(dequantize(type, bytes, 32), std::vector<float>(32, 0.0f));
  }
}

TEST(QuantizeTest, HalfFormatsRoundToNearestEven) {
  // 1 + 2^-11 is halfway between f16 1 and 1 + 2^-10: ties to even gives 0x3c00.
  const std::vector<float> x = {1.0f, -2.0f, 1.0f + std::ldexp(1.0f, -11), 65504.0f,
                                std::numeric_limits<float>::infinity()};
  EXPECT_EQ(quantize(TensorType::kF16, x),
            BlockBytes().f16(0x3c00).f16(0xc000).f16(0x3c00).f16(0x7bff).f16(0x7c00).bytes());
  // 1 + 2^-8 is halfway between bf16 1 and 1 + 2^-7: ties to even gives 0x3f80; 1 + 3 * 2^-8
  // rounds up to 0x3f82.
  const std::vector<float> y = {1.0f, -3.0f, 1.0f + std::ldexp(1.0f, -8),
                                1.0f + 3 * std::ldexp(1.0f, -8)};
  EXPECT_EQ(quantize(TensorType::kBF16, y),
            BlockBytes().f16(0x3f80).f16(0xc040).f16(0x3f80).f16(0x3f82).bytes());
  const std::vector<float> z = {1.5f, -0.0f};
  EXPECT_EQ(quantize(TensorType::kF32, z), BlockBytes().u32(0x3fc00000).u32(0x80000000).bytes());
}

// Random rows that are never all zeros: normal data at several scales, uniform data, and
// blocks with an outlier.
std::vector<std::vector<float>> random_rows() {
  std::mt19937 rng(42);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<std::vector<float>> rows;
  for (float scale : {1e-3f, 1.0f, 300.0f}) {
    std::vector<float> row(4096);
    for (float& v : row) v = scale * normal(rng);
    rows.push_back(row);
  }
  std::vector<float> row(4096);
  for (float& v : row) v = uniform(rng);
  rows.push_back(row);
  for (size_t i = 0; i < row.size(); i += 32) row[i + i / 32 % 32] = (i % 64 ? 50.0f : -50.0f);
  rows.push_back(row);
  return rows;
}

// The scale of each block as the reference quantizer defines it, computed here independently.
float reference_scale(TensorType type, const float* x) {
  float amax = 0.0f;
  float max = 0.0f;
  for (int j = 0; j < 32; ++j) {
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  EXPECT_GT(amax, 0.0f) << "random block of zeros";
  return type == TensorType::kQ8_0 ? amax / 127.0f : max / -8.0f;
}

// Per element: |x' - x| <= |d|/2 (round to nearest), plus the stored scale's f16 rounding times
// the largest |q| (127 for Q8_0, 8 for Q4_0); for Q4_0 an element beyond 7.5 steps (the sign
// opposite to max) clips to 7 steps instead. RMS error about 1/sqrt(12) = 0.289 steps; Q4_0's
// clipping adds to it: on uniform data about 1/32 of the elements lie beyond 7.5 steps, which
// takes the RMS to about 0.315 (measured 0.311 here).
void expect_round_trip_within_bounds(TensorType type) {
  const size_t block_bytes = tensor_type_traits(type).block_bytes;
  const double max_q = type == TensorType::kQ8_0 ? 127.0 : 8.0;
  const double max_rms_steps = type == TensorType::kQ8_0 ? 0.30 : 0.33;
  for (const std::vector<float>& x : random_rows()) {
    const auto bytes = quantize(type, x);
    const auto back = dequantize(type, bytes, x.size());
    double sum_squared_steps = 0.0;
    for (size_t b = 0; b < x.size() / 32; ++b) {
      const float d32 = reference_scale(type, &x[32 * b]);
      uint16_t stored;
      std::memcpy(&stored, &bytes[b * block_bytes], 2);
      ASSERT_EQ(stored, f32_to_f16(d32)) << "block " << b;
      const double d = std::fabs(d32);
      const double scale_error = max_q * std::fabs(f16_to_f32(stored) - d32);
      for (size_t i = 32 * b; i < 32 * b + 32; ++i) {
        const double steps = static_cast<double>(x[i]) / d32;
        const double round_error = steps > 7.5 && type == TensorType::kQ4_0 ? steps - 7.0 : 0.5;
        const double error = std::fabs(static_cast<double>(back[i]) - x[i]);
        ASSERT_LE(error, d * (round_error + 1e-4) + scale_error)
            << "element " << i << " x=" << x[i] << " d=" << d32;
        sum_squared_steps += (error / d) * (error / d);
      }
    }
    EXPECT_LE(std::sqrt(sum_squared_steps / x.size()), max_rms_steps) << "row starting " << x[0];
  }
}

TEST(QuantizeTest, Q8_0RoundTripErrorIsHalfAStep) {
  expect_round_trip_within_bounds(TensorType::kQ8_0);
}

TEST(QuantizeTest, Q4_0RoundTripErrorIsHalfAStep) {
  expect_round_trip_within_bounds(TensorType::kQ4_0);
}

TEST(QuantizeTest, NonFiniteInputIsRefusedAndDstUntouched) {
  for (TensorType type : {TensorType::kQ8_0, TensorType::kQ4_0}) {
    for (float bad :
         {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::infinity()}) {
      std::vector<float> x(64, 1.0f);
      x[37] = bad;
      std::vector<uint8_t> out(row_size_bytes(type, 64).value(), 0xee);
      const Status status = quantize_row(type, x, out);
      EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
      EXPECT_NE(status.message().find("element 37"), std::string::npos) << status.message();
      EXPECT_EQ(out, std::vector<uint8_t>(out.size(), 0xee));
    }
  }
}

TEST(QuantizeTest, ScalesPastTheHalfRangeAreRefused) {
  std::vector<float> x(64, 0.0f);
  x[40] = 1e7f;  // Q8_0 d = 78740 > 65504; Q4_0 d = -1.25e6
  for (TensorType type : {TensorType::kQ8_0, TensorType::kQ4_0}) {
    std::vector<uint8_t> out(row_size_bytes(type, 64).value(), 0xee);
    const Status status = quantize_row(type, x, out);
    EXPECT_EQ(status.code(), StatusCode::kOutOfRange);
    EXPECT_NE(status.message().find("block 1"), std::string::npos) << status.message();
    EXPECT_EQ(out, std::vector<uint8_t>(out.size(), 0xee));
  }
  std::vector<float> fits(32, 0.0f);
  fits[0] = 65504.0f * 127.0f;  // d exactly the largest f16
  std::vector<uint8_t> fits_out(34);
  EXPECT_TRUE(quantize_row(TensorType::kQ8_0, fits, fits_out).ok());
}

TEST(QuantizeTest, FiniteValuesThatWouldBecomeInfiniteAreRefused) {
  std::vector<uint8_t> out(4);
  const std::vector<float> big_half = {1.0f, 70000.0f};
  Status status = quantize_row(TensorType::kF16, big_half, out);
  EXPECT_EQ(status.code(), StatusCode::kOutOfRange);
  EXPECT_NE(status.message().find("element 1"), std::string::npos) << status.message();
  const std::vector<float> big_bf16 = {std::numeric_limits<float>::max(), 1.0f};
  status = quantize_row(TensorType::kBF16, big_bf16, out);
  EXPECT_EQ(status.code(), StatusCode::kOutOfRange);
  const std::vector<float> nan = {std::numeric_limits<float>::quiet_NaN(), 1.0f};
  EXPECT_TRUE(quantize_row(TensorType::kF16, nan, out).ok());  // NaN stays NaN
}

TEST(QuantizeTest, SizesAndTypesAreChecked) {
  std::vector<uint8_t> out(34);
  EXPECT_EQ(quantize_row(TensorType::kQ8_0, std::vector<float>(33), out).code(),
            StatusCode::kInvalidArgument);
  std::vector<uint8_t> short_out(33);
  const Status short_dst = quantize_row(TensorType::kQ8_0, std::vector<float>(32), short_out);
  EXPECT_EQ(short_dst.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(short_dst.message().find("34 bytes"), std::string::npos) << short_dst.message();
  const Status k_quant = quantize_row(TensorType::kQ4_K, std::vector<float>(256), out);
  EXPECT_EQ(k_quant.code(), StatusCode::kUnimplemented);
  EXPECT_NE(k_quant.message().find("q4_K"), std::string::npos) << k_quant.message();
  EXPECT_TRUE(quantize_row(TensorType::kQ4_0, {}, {}).ok());
  EXPECT_TRUE(can_quantize(TensorType::kBF16));
  EXPECT_FALSE(can_quantize(TensorType::kQ6_K));
}

}  // namespace
}  // namespace cellm
