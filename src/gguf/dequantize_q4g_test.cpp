// cellm's GPTQ group types q4_g32 / q4_g64 / q4_g128: block geometry, element order, zeros, and
// dot_row over them, against values worked out by hand from the layout in block_formats.h.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "core/float16.h"
#include "gguf/dequantize.h"
#include "gguf/tensor_type.h"

namespace cellm {
namespace {

// One block: scale `d` (exact in f16), `zero`, and quants q[j] for j < group.
std::vector<uint8_t> make_block(size_t group, float d, uint8_t zero,
                                const std::vector<int>& quants) {
  std::vector<uint8_t> block(4 + group / 2, 0);
  const uint16_t half = f32_to_f16(d);
  std::memcpy(block.data(), &half, 2);
  block[2] = zero;
  for (size_t j = 0; j < group; ++j) {
    block[4 + j / 2] |= static_cast<uint8_t>((quants[j] & 0xf) << (j % 2 == 0 ? 0 : 4));
  }
  return block;
}

TEST(DequantizeQ4GTest, TypeTableKnowsTheCellmIdsOutsideGgmlRange) {
  for (const auto& [type, group, bytes, name] :
       {std::tuple{TensorType::kQ4_G32, 32u, 20u, "q4_g32"},
        std::tuple{TensorType::kQ4_G64, 64u, 36u, "q4_g64"},
        std::tuple{TensorType::kQ4_G128, 128u, 68u, "q4_g128"}}) {
    const auto traits = tensor_type_traits(static_cast<uint32_t>(type));
    ASSERT_TRUE(traits.has_value());
    EXPECT_GE(static_cast<uint32_t>(type), 1024u);
    EXPECT_EQ(traits->block_size, group);
    EXPECT_EQ(traits->block_bytes, bytes);
    EXPECT_EQ(traits->name, name);
    EXPECT_TRUE(can_dequantize(type));
    EXPECT_EQ(tensor_type_from_name(name), type);
  }
}

TEST(DequantizeQ4GTest, ElementsAreLowNibbleFirstMinusTheZeroTimesTheScale) {
  for (size_t group : {32u, 64u, 128u}) {
    const TensorType type = group == 32   ? TensorType::kQ4_G32
                            : group == 64 ? TensorType::kQ4_G64
                                          : TensorType::kQ4_G128;
    std::vector<int> quants(group);
    for (size_t j = 0; j < group; ++j) quants[j] = static_cast<int>((j * 7 + 3) % 16);
    const std::vector<uint8_t> block = make_block(group, 0.25f, 5, quants);
    std::vector<float> out(group);
    ASSERT_TRUE(dequantize_row(type, block, out).ok());
    for (size_t j = 0; j < group; ++j) {
      EXPECT_EQ(out[j], 0.25f * static_cast<float>(quants[j] - 5))
          << "group " << group << " j " << j;
    }
  }
}

TEST(DequantizeQ4GTest, ZeroOf16AsGptqV1StoresItIsHeld) {
  std::vector<int> quants(32, 0);
  quants[1] = 15;
  const std::vector<uint8_t> block = make_block(32, 2.0f, 16, quants);
  std::vector<float> out(32);
  ASSERT_TRUE(dequantize_row(TensorType::kQ4_G32, block, out).ok());
  EXPECT_EQ(out[0], -32.0f);
  EXPECT_EQ(out[1], -2.0f);
}

TEST(DequantizeQ4GTest, DotRowEqualsDotOfTheDequantizedRow) {
  std::vector<int> quants(64);
  for (size_t j = 0; j < 64; ++j) quants[j] = static_cast<int>((j * 5) % 16);
  std::vector<uint8_t> row = make_block(64, 0.5f, 8, quants);
  const std::vector<uint8_t> second = make_block(64, -0.125f, 3, quants);
  row.insert(row.end(), second.begin(), second.end());  // a row of 128 elements, two blocks
  std::vector<float> x(128);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 9) - 4.0f;
  std::vector<float> w(128);
  ASSERT_TRUE(dequantize_row(TensorType::kQ4_G64, row, w).ok());
  EXPECT_EQ(dot_row(TensorType::kQ4_G64, row, x.data(), x.size()), dot_f32(w, x));
  EXPECT_EQ(w[64], -0.125f * static_cast<float>(quants[0] - 3));
}

TEST(DequantizeQ4GTest, RowOfPartialGroupsIsAnError) {
  const std::vector<uint8_t> bytes(68, 0);
  std::vector<float> out(64);
  const Status status = dequantize_row(TensorType::kQ4_G128, bytes, out);
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("q4_g128"), std::string::npos) << status.message();
}

}  // namespace
}  // namespace cellm
