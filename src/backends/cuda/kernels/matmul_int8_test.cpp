// matmul_int8_test: the int8 tensor-core product (matmul_int8.cuh) against the CPU's dequantized
// Q8_0 / Q4_0 weights times int8 activations (as quantize_activations writes them), in double — for
// 1 to 8 token rows (a partial n-tile of tokens among them), row counts that leave a partial block
// of 16, spans split unevenly between the warps, with bias, store and accumulate; and its refusals.
// GPU tests (label cuda).
#include "backends/cuda/kernels/matmul_int8.cuh"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "backends/cuda/kernels/kernel_test_support.h"
#include "backends/cuda/kernels/weight_layout.h"

namespace cellm::kernels {
namespace {

using testing::DeviceArray;

// Random rows x [m, k] quantized as quantize_activations quantizes them (testing::quantize_rows_q8,
// the host's bit-exact model of it), uploaded; host.value(t, e) is what element e of row t stands
// for.
struct QuantizedRows {
  QuantizedRows(int32_t m, int64_t k, uint32_t seed)
      : host(testing::quantize_rows_q8(
            testing::random_floats(static_cast<size_t>(m * k), seed, 3.0f), m, k, k)),
        q(host.q),
        scales(host.scales) {}
  testing::HostQ8Rows host;
  DeviceArray<int8_t> q;
  DeviceArray<float> scales;
};

struct Case {
  TensorType type;
  int64_t rows;
  int64_t cols;
};

TEST(Int8MatmulTest, MatchesTheDequantizedProductForOneToThirtyTwoTokens) {
  CELLM_REQUIRE_DEVICE();
  // 37 rows: a partial block of 16; 1280 columns: 5 spans over 4 (Q4_0: 8) warps; 4096 × 512:
  // many blocks. Q4_0 takes 8 warps per block while the blocks fit two per SM, else 4: 8203 rows
  // are 513 blocks, more than two per SM on any GPU of up to 256 SMs.
  const Case cases[] = {{TensorType::kQ8_0, 37, 1280},  {TensorType::kQ4_0, 37, 1280},
                        {TensorType::kQ8_0, 512, 4096}, {TensorType::kQ4_0, 512, 4096},
                        {TensorType::kQ4_0, 64, 256},   {TensorType::kQ4_0, 8203, 1280}};
  for (const Case& c : cases) {
    const std::vector<uint8_t> gguf = testing::random_gguf_rows(c.type, c.rows, c.cols, 61);
    const testing::UploadedWeight w = testing::upload_weight(c.type, c.rows, c.cols, gguf);
    ASSERT_TRUE(int8_matmul_supports(w.weight));
    const std::vector<float> values = testing::dequantize_rows(c.type, c.rows, c.cols, gguf);
    const std::vector<float> bias = testing::random_floats(static_cast<size_t>(c.rows), 62);
    const DeviceArray<float> bias_dev(bias);
    for (const int32_t m : {1, 3, 5, 8}) {
      for (const bool accumulate : {false, true}) {
        const std::string name = std::string(tensor_type_name(c.type)) + " [" +
                                 std::to_string(c.rows) + ", " + std::to_string(c.cols) +
                                 "] M=" + std::to_string(m) + (accumulate ? " accumulate" : "");
        SCOPED_TRACE(name);
        const QuantizedRows x(m, c.cols, 63 + static_cast<uint32_t>(m));
        const int64_t stride = c.rows + 3;
        const std::vector<float> y0 = testing::random_floats(static_cast<size_t>(m * stride), 64);
        std::vector<float> want(y0);
        for (int32_t t = 0; t < m; ++t) {
          for (int64_t r = 0; r < c.rows; ++r) {
            double sum = 0.0;
            for (int64_t e = 0; e < c.cols; ++e) {
              sum += static_cast<double>(values[r * c.cols + e]) * x.host.value(t, e);
            }
            const double base = accumulate ? y0[t * stride + r] : 0.0;
            want[t * stride + r] = static_cast<float>(base + (sum + bias[r]));
          }
        }
        DeviceArray<float> y(y0.size());
        Int8MatmulParams p;
        p.w = w.weight;
        p.num_tokens = m;
        p.x_q8 = x.q.get();
        p.x_q8_scales = x.scales.get();
        p.bias = bias_dev.get();
        p.y = y.get();
        p.y_stride = stride;
        p.accumulate = accumulate;
        testing::expect_parity(
            name, y,
            [&] {
              y.upload(y0);  // the columns past N keep their values
              const Status launched = launch_int8_matmul(p, nullptr);
              ASSERT_TRUE(launched.ok()) << launched.to_string();
            },
            want, 1e-5);
      }
    }
  }
}

TEST(Int8MatmulTest, RefusesWhatItDoesNotMultiply) {
  CELLM_REQUIRE_DEVICE();
  const std::vector<uint8_t> gguf = testing::random_gguf_rows(TensorType::kQ8_0, 16, 256, 71);
  const testing::UploadedWeight w = testing::upload_weight(TensorType::kQ8_0, 16, 256, gguf);
  const QuantizedRows x(9, 256, 72);
  DeviceArray<float> y(9 * 16);
  Int8MatmulParams p;
  p.w = w.weight;
  p.num_tokens = 8;
  p.x_q8 = x.q.get();
  p.x_q8_scales = x.scales.get();
  p.y = y.get();
  p.y_stride = 16;
  ASSERT_TRUE(launch_int8_matmul(p, nullptr).ok());
  const auto refused = [](const Int8MatmulParams& params) {
    return launch_int8_matmul(params, nullptr).code() == StatusCode::kInvalidArgument;
  };
  Int8MatmulParams bad = p;
  bad.num_tokens = 9;
  EXPECT_TRUE(refused(bad));
  bad = p;
  bad.y_stride = 15;
  EXPECT_TRUE(refused(bad));
  bad = p;
  bad.x_q8_scales = nullptr;
  EXPECT_TRUE(refused(bad));
  bad = p;
  bad.x_q8 = x.q.get() + 1;  // unaligned
  EXPECT_TRUE(refused(bad));

  const std::vector<uint8_t> q4k = testing::random_gguf_rows(TensorType::kQ4_K, 16, 256, 73);
  const testing::UploadedWeight k_quant = testing::upload_weight(TensorType::kQ4_K, 16, 256, q4k);
  EXPECT_FALSE(int8_matmul_supports(k_quant.weight));
  bad = p;
  bad.w = k_quant.weight;
  EXPECT_TRUE(refused(bad));
  // Rows of 96 elements keep the GGUF layout.
  const std::vector<uint8_t> short_rows = testing::random_gguf_rows(TensorType::kQ8_0, 16, 96, 74);
  const testing::UploadedWeight gguf_layout =
      testing::upload_weight(TensorType::kQ8_0, 16, 96, short_rows);
  EXPECT_FALSE(int8_matmul_supports(gguf_layout.weight));
}

}  // namespace
}  // namespace cellm::kernels
