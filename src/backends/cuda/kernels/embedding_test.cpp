// Parity of the embedding gather with the CPU oracle for every weight type and layout (bit for
// bit, scaled as Gemma scales it, a NaN row for a token past the table), and the random weight
// initializer `cellm bench` fills its programs with (bounded, non-zero, the same bytes for a seed).
#include "backends/cuda/kernels/embedding.cuh"

#include <gtest/gtest.h>

#include <cmath>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "backends/cpu/cpu_ops.h"
#include "backends/cuda/kernels/kernel_test_support.h"
#include "backends/cuda/kernels/random_fill.cuh"
#include "backends/cuda/kernels/weight_layout.h"
#include "gguf/dequantize.h"

namespace cellm::kernels {
namespace {

using testing::DeviceArray;

// The gather of every token in `tokens` (device) from `table` into rows of `out_stride` floats.
EmbeddingParams gather_params(const DeviceWeight& table, const DeviceArray<int32_t>& tokens,
                              const DeviceArray<float>& out, int64_t out_stride) {
  EmbeddingParams p;
  p.table = table;
  p.num_tokens = static_cast<int32_t>(tokens.size());
  p.tokens = tokens.get();
  p.out = out.get();
  p.out_stride = out_stride;
  return p;
}

TEST(EmbeddingKernelTest, GathersRowsOfEveryTypeBitForBit) {
  CELLM_REQUIRE_DEVICE();
  struct Shape {
    TensorType type;
    int64_t cols;
  };
  const Shape shapes[] = {
      {TensorType::kF32, 100},   {TensorType::kF16, 96},    {TensorType::kBF16, 4096},
      {TensorType::kQ8_0, 96},   {TensorType::kQ8_0, 4096}, {TensorType::kQ4_0, 160},
      {TensorType::kQ4_0, 4096}, {TensorType::kQ4_K, 768},  {TensorType::kQ6_K, 4096},
  };
  const int64_t vocab = 50;
  const std::vector<int32_t> tokens = {3, 49, 0, 3, 17, 25};
  for (const Shape& s : shapes) {
    SCOPED_TRACE(std::string(tensor_type_name(s.type)) + " x" + std::to_string(s.cols));
    const std::vector<uint8_t> gguf = testing::random_gguf_rows(s.type, vocab, s.cols, 49);
    const int64_t stride = s.cols + 4;
    std::vector<float> ref(tokens.size() * static_cast<size_t>(s.cols));
    cpu_embed(testing::weight_view(s.type, vocab, s.cols, gguf), tokens.data(),
              static_cast<int64_t>(tokens.size()), ref.data());
    const testing::UploadedWeight table = testing::upload_weight(s.type, vocab, s.cols, gguf);
    DeviceArray<int32_t> tokens_dev(tokens);
    DeviceArray<float> out(tokens.size() * static_cast<size_t>(stride));
    out.poison();
    CELLM_ASSERT_OK(
        launch_embedding(gather_params(table.weight, tokens_dev, out, stride), nullptr));
    const std::vector<float> got =
        testing::compact_rows(out.download(), std::ssize(tokens), stride, s.cols);
    EXPECT_TRUE(testing::near_relative("embedding", got, ref, 0.0));
  }
}

TEST(EmbeddingKernelTest, AScaledGatherIsTheRowTimesTheScaleBitForBit) {
  CELLM_REQUIRE_DEVICE();
  const float scale = std::sqrt(1152.0f);  // Gemma 3 1B's
  const int64_t vocab = 40;
  const std::vector<int32_t> tokens = {7, 0, 39, 7};
  for (const auto& [type, cols] :
       {std::pair{TensorType::kBF16, int64_t{96}}, std::pair{TensorType::kQ8_0, int64_t{4096}}}) {
    SCOPED_TRACE(tensor_type_name(type));
    const std::vector<uint8_t> gguf = testing::random_gguf_rows(type, vocab, cols, 50);
    std::vector<float> ref(tokens.size() * static_cast<size_t>(cols));
    cpu_embed(testing::weight_view(type, vocab, cols, gguf), tokens.data(),
              static_cast<int64_t>(tokens.size()), ref.data());
    for (float& x : ref) x *= scale;  // as CpuForward scales
    const testing::UploadedWeight table = testing::upload_weight(type, vocab, cols, gguf);
    DeviceArray<int32_t> tokens_dev(tokens);
    DeviceArray<float> out(tokens.size() * static_cast<size_t>(cols));
    EmbeddingParams p = gather_params(table.weight, tokens_dev, out, cols);
    p.scale = scale;
    out.poison();
    CELLM_ASSERT_OK(launch_embedding(p, nullptr));
    EXPECT_TRUE(testing::near_relative("scaled embedding", out.download(), ref, 0.0));
  }
}

TEST(EmbeddingKernelTest, AnOutOfRangeTokenGivesANanRow) {
  CELLM_REQUIRE_DEVICE();
  const std::vector<uint8_t> gguf = testing::random_gguf_rows(TensorType::kQ4_0, 4, 256, 50);
  const testing::UploadedWeight table = testing::upload_weight(TensorType::kQ4_0, 4, 256, gguf);
  DeviceArray<int32_t> tokens_dev(std::vector<int32_t>{4});
  DeviceArray<float> out(256);
  CELLM_ASSERT_OK(launch_embedding(gather_params(table.weight, tokens_dev, out, 256), nullptr));
  for (const float v : out.download()) ASSERT_TRUE(std::isnan(v));
}

TEST(RandomFillKernelTest, FillsEveryTypeWithBoundedNonZeroDeterministicValues) {
  CELLM_REQUIRE_DEVICE();
  struct Shape {
    TensorType type;
    int64_t cols;
    double bound;  // |value| ≤ bound · scale
  };
  const Shape shapes[] = {
      {TensorType::kF32, 4096, 1.0},    {TensorType::kF16, 4096, 1.001},
      {TensorType::kBF16, 4096, 1.004}, {TensorType::kQ8_0, 4096, 1.01},
      {TensorType::kQ8_0, 96, 1.01},    {TensorType::kQ4_0, 4096, 1.001},
      {TensorType::kQ4_0, 160, 1.001},  {TensorType::kQ4_K, 4096, 1.1},
      {TensorType::kQ6_K, 3584, 1.001},
  };
  const int64_t rows = 64;
  const float scale = 0.02f;
  for (const Shape& s : shapes) {
    SCOPED_TRACE(std::string(tensor_type_name(s.type)) + " x" + std::to_string(s.cols));
    const size_t bytes = device_row_bytes(s.type, s.cols) * static_cast<size_t>(rows);
    DeviceArray<uint8_t> a(bytes);
    DeviceArray<uint8_t> b(bytes);
    RandomFillParams p;
    p.data = a.get();
    p.type = s.type;
    p.num_rows = rows;
    p.num_cols = s.cols;
    p.seed = 1234;
    p.scale = scale;
    CELLM_ASSERT_OK(launch_random_fill(p, nullptr));
    p.data = b.get();
    CELLM_ASSERT_OK(launch_random_fill(p, nullptr));
    const std::vector<uint8_t> first = a.download();
    EXPECT_EQ(first, b.download()) << "same seed, different bytes";
    p.seed = 1235;
    CELLM_ASSERT_OK(launch_random_fill(p, nullptr));
    EXPECT_NE(first, b.download()) << "another seed, same bytes";

    const TensorTypeTraits& traits = tensor_type_traits(s.type);
    std::vector<uint8_t> gguf(static_cast<size_t>(s.cols) / traits.block_size * traits.block_bytes *
                              static_cast<size_t>(rows));
    ASSERT_TRUE(unpack_rows_from_device(s.type, s.cols, rows, first, gguf).ok());
    const std::vector<float> values = testing::dequantize_rows(s.type, rows, s.cols, gguf);
    size_t zeros = 0;
    double sum_abs = 0.0;
    for (const float v : values) {
      ASSERT_TRUE(std::isfinite(v));
      ASSERT_LE(std::fabs(v), s.bound * scale) << "value out of range";
      zeros += v == 0.0f;
      sum_abs += std::fabs(v);
    }
    EXPECT_LT(zeros, values.size() / 10) << "too many zeros";
    EXPECT_GT(sum_abs / static_cast<double>(values.size()), 0.05 * scale) << "values too small";
  }
}

}  // namespace
}  // namespace cellm::kernels
