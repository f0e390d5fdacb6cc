#include "backends/cpu/cpu_kv_storage.h"

#include <gtest/gtest.h>

#include <vector>

namespace cellm {
namespace {

CpuKvGeometry geometry(KvDtype dtype, int32_t max_cells) {
  CpuKvGeometry g;
  g.num_layers = 2;
  g.num_kv_heads = 2;
  g.head_dim = 2;
  g.value_head_dim = 3;
  g.dtype = dtype;
  g.max_cells = max_cells;
  return g;
}

float k_at(const CpuKvStorage& kv, int32_t layer, int64_t index) {
  return static_cast<const float*>(kv.k_view(layer).data)[index];
}

TEST(CpuKvStorageTest, RowsGrowGeometricallyUpToMaxCells) {
  CpuKvStorage kv(geometry(KvDtype::kF32, 100));
  EXPECT_EQ(kv.num_rows(), 0);
  ASSERT_TRUE(kv.reserve_rows(0).ok());
  EXPECT_EQ(kv.num_rows(), 0);
  ASSERT_TRUE(kv.reserve_rows(1).ok());
  EXPECT_EQ(kv.num_rows(), 16);
  ASSERT_TRUE(kv.reserve_rows(16).ok());
  EXPECT_EQ(kv.num_rows(), 16);
  ASSERT_TRUE(kv.reserve_rows(17).ok());
  EXPECT_EQ(kv.num_rows(), 32);
  ASSERT_TRUE(kv.reserve_rows(70).ok());
  EXPECT_EQ(kv.num_rows(), 70);
  ASSERT_TRUE(kv.reserve_rows(71).ok());
  EXPECT_EQ(kv.num_rows(), 100);
  // Two layers of K (2 x 2) and V (2 x 3) f32 per row.
  EXPECT_EQ(kv.num_bytes(), 100u * 2 * (4 + 6) * 4);
  const Status past = kv.reserve_rows(101);
  EXPECT_EQ(past.code(), StatusCode::kOutOfRange) << past.to_string();
  EXPECT_EQ(kv.num_rows(), 100);
}

TEST(CpuKvStorageTest, WritesLandInTheirLayerAndCellAndSurviveGrowth) {
  CpuKvStorage kv(geometry(KvDtype::kF32, 1000));
  ASSERT_TRUE(kv.reserve_rows(8).ok());
  const std::vector<float> k = {1, 2, 3, 4};
  const std::vector<float> v = {5, 6, 7, 8, 9, 10};
  kv.write(1, 5, k.data(), v.data());
  ASSERT_TRUE(kv.reserve_rows(500).ok());
  const KvCacheView k_view = kv.k_view(1);
  const KvCacheView v_view = kv.v_view(1);
  EXPECT_EQ(k_view.num_rows, 500);
  EXPECT_EQ(k_view.num_heads, 2);
  EXPECT_EQ(k_view.head_dim, 2);
  EXPECT_EQ(v_view.head_dim, 3);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(k_at(kv, 1, 5 * 4 + i), k[i]);
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(static_cast<const float*>(v_view.data)[5 * 6 + i], v[i]);
  }
  for (int i = 0; i < 4; ++i) EXPECT_EQ(k_at(kv, 0, 5 * 4 + i), 0.0f) << "layer 0 untouched";
  for (int i = 0; i < 4; ++i) EXPECT_EQ(k_at(kv, 1, 4 * 4 + i), 0.0f) << "cell 4 untouched";
}

TEST(CpuKvStorageTest, HalfPrecisionStorageRoundsToNearestEven) {
  // 1 + 2^-11 is halfway between f16's 1 and 1 + 2^-10: ties to the even 1 (0x3c00);
  // 1 + 3 * 2^-11 ties up to 1 + 2^-9 (0x3c02). bf16 likewise with 2^-8 steps.
  const std::vector<float> k = {1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, -2.0f, 0.0f};
  const std::vector<float> k_bf16 = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, -2.0f, 0.0f};
  const std::vector<float> v(6, 1.0f);
  CpuKvStorage f16(geometry(KvDtype::kF16, 16));
  ASSERT_TRUE(f16.reserve_rows(1).ok());
  f16.write(0, 0, k.data(), v.data());
  const uint16_t* f16_bits = static_cast<const uint16_t*>(f16.k_view(0).data);
  EXPECT_EQ(f16.k_view(0).dtype, KvDtype::kF16);
  EXPECT_EQ(f16_bits[0], 0x3c00);
  EXPECT_EQ(f16_bits[1], 0x3c02);
  EXPECT_EQ(f16_bits[2], 0xc000);
  EXPECT_EQ(f16_bits[3], 0x0000);
  EXPECT_EQ(static_cast<const uint16_t*>(f16.v_view(0).data)[0], 0x3c00);

  CpuKvStorage bf16(geometry(KvDtype::kBF16, 16));
  ASSERT_TRUE(bf16.reserve_rows(1).ok());
  bf16.write(0, 0, k_bf16.data(), v.data());
  const uint16_t* bf16_bits = static_cast<const uint16_t*>(bf16.k_view(0).data);
  EXPECT_EQ(bf16_bits[0], 0x3f80);
  EXPECT_EQ(bf16_bits[1], 0x3f82);
  EXPECT_EQ(bf16_bits[2], 0xc000);
  EXPECT_EQ(static_cast<const uint16_t*>(bf16.v_view(0).data)[0], 0x3f80);
  EXPECT_EQ(bf16.num_bytes(), 16u * 2 * (4 + 6) * 2);
}

}  // namespace
}  // namespace cellm
