#include "core/float16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

namespace cellm {
namespace {

// Expected bit patterns from the IEEE 754 binary16 / bfloat16 definitions.
TEST(Float16Test, KnownHalfValuesDecodeExactly) {
  EXPECT_EQ(f16_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_f32(0xc000), -2.0f);
  EXPECT_EQ(f16_to_f32(0x7bff), 65504.0f);                  // largest normal
  EXPECT_EQ(f16_to_f32(0x0400), std::ldexp(1.0f, -14));     // smallest normal
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));     // smallest subnormal
  EXPECT_EQ(f16_to_f32(0x03ff), std::ldexp(1023.0f, -24));  // largest subnormal
  EXPECT_EQ(f16_to_f32(0x3555), 0.333251953125f);
  EXPECT_TRUE(std::isinf(f16_to_f32(0x7c00)));
  EXPECT_TRUE(std::isnan(f16_to_f32(0x7e00)));
  EXPECT_TRUE(std::signbit(f16_to_f32(0x8000)));
}

TEST(Float16Test, EncodingRoundsToNearestEven) {
  EXPECT_EQ(f32_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);  // halfway to the next step rounds up to infinity
  EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);      // tie, even stays
  EXPECT_EQ(f32_to_f16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);  // tie, odd rounds up
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -25)), 0x0000);  // exactly half the smallest: to even
  EXPECT_EQ(f32_to_f16(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(f32_to_f16(std::ldexp(3.0f, -24)), 0x0003);
  EXPECT_EQ(f32_to_f16(-0.0f), 0x8000);
  EXPECT_EQ(f32_to_f16(std::numeric_limits<float>::quiet_NaN()) & 0x7e00, 0x7e00);
}

TEST(Float16Test, EveryHalfRoundTripsThroughFloat) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const uint16_t half = static_cast<uint16_t>(h);
    if ((half & 0x7c00) == 0x7c00 && (half & 0x3ff) != 0) continue;  // NaN payloads
    ASSERT_EQ(f32_to_f16(f16_to_f32(half)), half) << "half 0x" << std::hex << h;
  }
}

TEST(Float16Test, RandomFloatsRoundToTheNearestHalf) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-70000.0f, 70000.0f);
  for (int i = 0; i < 100000; ++i) {
    const float x = dist(rng) * std::ldexp(1.0f, static_cast<int>(rng() % 30) - 20);
    const uint16_t h = f32_to_f16(x);
    const float y = f16_to_f32(h);
    if (std::isinf(y)) {
      ASSERT_GE(std::fabs(x), 65520.0f);
      continue;
    }
    // No other half is strictly closer.
    const float up = f16_to_f32(static_cast<uint16_t>(h + 1));
    const float down = f16_to_f32(static_cast<uint16_t>(h - 1));
    if ((h & 0x7fff) != 0 && (h & 0x7c00) != 0x7c00 && !std::isnan(up) && !std::isinf(up)) {
      ASSERT_LE(std::fabs(x - y), std::fabs(x - up)) << x;
    }
    if ((h & 0x7fff) != 0 && !std::isnan(down)) {
      ASSERT_LE(std::fabs(x - y), std::fabs(x - down)) << x;
    }
  }
}

TEST(Float16Test, Bfloat16KeepsTheTopSixteenBitsWithRounding) {
  EXPECT_EQ(bf16_to_f32(0x3f80), 1.0f);
  EXPECT_EQ(bf16_to_f32(0xc0a0), -5.0f);
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x3f808000u)), 0x3f80);  // tie, even stays
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x3f818000u)), 0x3f82);  // tie, odd rounds up
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x3f808001u)), 0x3f81);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
}

}  // namespace
}  // namespace cellm
