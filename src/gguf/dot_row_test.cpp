// dot_row (fused dequantize-and-dot) and dot_f32: the documented summation order, and agreement
// with dequantize_row followed by a dot product, on random rows of every type.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/float16.h"
#include "gguf/dequantize.h"

namespace cellm {
namespace {

TEST(DotRowTest, DotF32OfASmallRow) {
  const std::vector<float> a = {1, 2, 3};
  const std::vector<float> b = {4, 5, 6};
  EXPECT_EQ(dot_f32(a, b), 32.0f);  // 4 + 10 + 18
  EXPECT_EQ(dot_f32({}, {}), 0.0f);
}

TEST(DotRowTest, SumsInEightLanesThenAFixedTree) {
  // 2^24 + 1 is not an f32 (it rounds to 2^24, ties to even). With elements 0 and 12, 13 in
  // lanes 0, 4, 5: ((2^24 + 0) + (0 + 0)) + ((1 + 1) + (0 + 0)) = 2^24 + 2 exactly, whereas a
  // left-to-right sum would lose both ones: (2^24 + 1) + 1 = 2^24.
  std::vector<float> w(16, 0.0f);
  w[0] = 16777216.0f;
  w[12] = 1.0f;
  w[13] = 1.0f;
  const std::vector<float> x(16, 1.0f);
  EXPECT_EQ(dot_f32(w, x), 16777218.0f);

  std::vector<uint8_t> row(w.size() * sizeof(float));
  std::memcpy(row.data(), w.data(), row.size());
  EXPECT_EQ(dot_row(TensorType::kF32, row, x.data(), 16), 16777218.0f);
}

// Offsets of the f16 scale fields inside one block (block_formats.h / ggml-common.h), which the
// random rows below set to sane values instead of random bits (NaN, infinities).
struct RandomRowSpec {
  TensorType type;
  std::vector<size_t> half_offsets;
};

std::vector<uint8_t> random_row(const RandomRowSpec& spec, size_t n, std::mt19937& rng) {
  const TensorTypeTraits& traits = tensor_type_traits(spec.type);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> byte(0, 255);
  std::vector<uint8_t> row(n / traits.block_size * traits.block_bytes);
  if (spec.type == TensorType::kF32) {
    for (size_t i = 0; i < n; ++i) {
      const float value = normal(rng);
      std::memcpy(row.data() + 4 * i, &value, 4);
    }
    return row;
  }
  for (uint8_t& b : row) b = static_cast<uint8_t>(byte(rng));
  for (size_t block = 0; block < n / traits.block_size; ++block) {
    for (size_t offset : spec.half_offsets) {
      const float value = spec.type == TensorType::kF16 || spec.type == TensorType::kBF16
                              ? normal(rng)
                              : 0.01f * normal(rng);
      const uint16_t bits = spec.type == TensorType::kBF16 ? f32_to_bf16(value) : f32_to_f16(value);
      std::memcpy(row.data() + block * traits.block_bytes + offset, &bits, 2);
    }
  }
  return row;
}

TEST(DotRowTest, EqualsDequantizeThenDotForEveryType) {
  const std::vector<RandomRowSpec> specs = {
      {TensorType::kF32, {}},      {TensorType::kF16, {0}},     {TensorType::kBF16, {0}},
      {TensorType::kQ4_0, {0}},    {TensorType::kQ4_1, {0, 2}}, {TensorType::kQ5_0, {0}},
      {TensorType::kQ5_1, {0, 2}}, {TensorType::kQ8_0, {0}},    {TensorType::kQ2_K, {80, 82}},
      {TensorType::kQ3_K, {108}},  {TensorType::kQ4_K, {0, 2}}, {TensorType::kQ5_K, {0, 2}},
      {TensorType::kQ6_K, {208}},
  };
  std::mt19937 rng(1234);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (const RandomRowSpec& spec : specs) {
    const uint32_t block_size = tensor_type_traits(spec.type).block_size;
    // A multiple of 256, one that ends in a partial 256-element chunk, and for plain floats one
    // that ends between lanes.
    std::vector<size_t> lengths = {1024};
    if (block_size <= 32) lengths.push_back(32 * 37);
    if (block_size == 1) lengths.push_back(1003);
    for (size_t n : lengths) {
      SCOPED_TRACE(std::string(tensor_type_name(spec.type)) + " n=" + std::to_string(n));
      const std::vector<uint8_t> row = random_row(spec, n, rng);
      std::vector<float> x(n);
      for (float& v : x) v = normal(rng);
      std::vector<float> w(n);
      ASSERT_TRUE(dequantize_row(spec.type, row, w).ok());

      double exact = 0.0;
      double magnitude = 0.0;
      for (size_t i = 0; i < n; ++i) {
        exact += static_cast<double>(w[i]) * x[i];
        magnitude += std::fabs(static_cast<double>(w[i]) * x[i]);
      }
      ASSERT_GT(magnitude, 0.0);
      const float fused = dot_row(spec.type, row, x.data(), n);
      EXPECT_LE(std::fabs(fused - exact), 1e-5 * magnitude) << fused << " vs " << exact;
      EXPECT_EQ(fused, dot_f32(w, x));  // the same order, bit for bit
    }
  }
}

}  // namespace
}  // namespace cellm
