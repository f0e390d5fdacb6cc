// matmul_int8_test: the int8 tensor-core product (matmul_int8.cuh) against the CPU's dequantized
// Q8_0 / Q4_0 / Q4_K / Q6_K weights times int8 activations (as quantize_activations writes them),
// in double — for 1 to 16 token rows (one and two n-tiles of tokens, partial ones among them: the
// register and the staged kernels), row counts that leave a partial block of 16, spans split
// unevenly between the warps, with bias, store and accumulate; and its refusals.
// GPU tests (label cuda).
#include "backends/cuda/kernels/matmul_int8.cuh"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "backends/cuda/kernels/kernel_test_support.h"
#include "backends/cuda/kernels/rope_kv_test_case.h"
#include "backends/cuda/kernels/weight_layout.h"

namespace cellm::kernels {
namespace {

using testing::DeviceArray;

// Random rows x [m, k] quantized as quantize_activations quantizes them (testing::quantize_rows_q8,
// the host's bit-exact model of it), uploaded; host.value(t, e) is what element e of row t stands
// for.
struct QuantizedRows {
  QuantizedRows(int32_t m, int64_t k, uint32_t seed, bool per_256 = false)
      : host(testing::quantize_rows_q8(
            testing::random_floats(static_cast<size_t>(m * k), seed, 3.0f), m, k, k, per_256)),
        q(host.q),
        scales(host.scales) {}
  testing::HostQ8Rows host;
  DeviceArray<int8_t> q;
  DeviceArray<float> scales;
};

// The product of w by x's rows into y (stride y_stride), plus bias when given.
Int8MatmulParams product(const testing::UploadedWeight& w, const QuantizedRows& x, int32_t m,
                         const float* bias, float* y, int64_t y_stride) {
  Int8MatmulParams p;
  p.w = w.weight;
  p.num_tokens = m;
  p.x_q8 = x.q.get();
  p.x_q8_scales = x.scales.get();
  p.bias = bias;
  p.y = y;
  p.y_stride = y_stride;
  return p;
}

struct Case {
  TensorType type;
  int64_t rows;
  int64_t cols;
};

// K-quants on tokens quantized with one scale per 256 columns (x_q8_per_256: a span's blocks
// summed in integers), one and two n-tiles, against the CPU in double.
TEST(Int8MatmulTest, KQuantsOnTokensWithOneScalePer256ColumnsMatchTheDequantizedProduct) {
  CELLM_REQUIRE_DEVICE();
  const Case cases[] = {{TensorType::kQ4_K, 37, 1280},
                        {TensorType::kQ6_K, 37, 1280},
                        {TensorType::kQ4_K, 48, 14336},
                        {TensorType::kQ6_K, 48, 14336}};
  for (const Case& c : cases) {
    const std::vector<uint8_t> gguf = testing::random_gguf_rows(c.type, c.rows, c.cols, 65);
    const testing::UploadedWeight w = testing::upload_weight(c.type, c.rows, c.cols, gguf);
    const std::vector<float> values = testing::dequantize_rows(c.type, c.rows, c.cols, gguf);
    for (const int32_t m : {2, 7, 16}) {
      SCOPED_TRACE(std::string(tensor_type_name(c.type)) + " [" + std::to_string(c.rows) + ", " +
                   std::to_string(c.cols) + "] M=" + std::to_string(m));
      const QuantizedRows x(m, c.cols, 66 + static_cast<uint32_t>(m), true);
      std::vector<float> want(static_cast<size_t>(m * c.rows));
      for (int32_t t = 0; t < m; ++t) {
        for (int64_t r = 0; r < c.rows; ++r) {
          double sum = 0.0;
          for (int64_t e = 0; e < c.cols; ++e) {
            sum += static_cast<double>(values[r * c.cols + e]) * x.host.value(t, e);
          }
          want[t * c.rows + r] = static_cast<float>(sum);
        }
      }
      DeviceArray<float> y(want.size());
      Int8MatmulParams p = product(w, x, m, nullptr, y.get(), c.rows);
      p.x_q8_per_256 = true;
      testing::expect_parity(
          "per-256 tokens", y,
          [&] {
            const Status launched = launch_int8_matmul(p, nullptr);
            ASSERT_TRUE(launched.ok()) << launched.to_string();
          },
          want, 1e-5);
    }
  }
}

TEST(Int8MatmulTest, MatchesTheDequantizedProductForOneToThirtyTwoTokens) {
  CELLM_REQUIRE_DEVICE();
  // 37 rows: a partial block of 16; 1280 columns: 5 spans over 4 warps; 256 columns: one span,
  // three warps idle; 4096 / 14336 columns: 4 / 14 spans per warp, so Q4_0's ring of three
  // stages per warp is refilled once / eleven times; 8203 rows: many blocks, the last partial.
  const Case cases[] = {{TensorType::kQ8_0, 37, 1280},  {TensorType::kQ4_0, 37, 1280},
                        {TensorType::kQ8_0, 512, 4096}, {TensorType::kQ4_0, 512, 4096},
                        {TensorType::kQ4_0, 64, 256},   {TensorType::kQ4_0, 8203, 1280},
                        {TensorType::kQ4_0, 48, 14336}, {TensorType::kQ8_0, 48, 14336},
                        {TensorType::kQ4_K, 37, 1280},  {TensorType::kQ4_K, 512, 4096},
                        {TensorType::kQ4_K, 48, 14336}, {TensorType::kQ6_K, 37, 1280},
                        {TensorType::kQ6_K, 512, 4096}, {TensorType::kQ6_K, 48, 14336},
                        {TensorType::kQ6_K, 64, 256}};
  for (const Case& c : cases) {
    const std::vector<uint8_t> gguf = testing::random_gguf_rows(c.type, c.rows, c.cols, 61);
    const testing::UploadedWeight w = testing::upload_weight(c.type, c.rows, c.cols, gguf);
    ASSERT_TRUE(int8_matmul_supports(w.weight));
    const std::vector<float> values = testing::dequantize_rows(c.type, c.rows, c.cols, gguf);
    const std::vector<float> bias = testing::random_floats(static_cast<size_t>(c.rows), 62);
    const DeviceArray<float> bias_dev(bias);
    for (const int32_t m : {1, 3, 5, 8, 9, 12, 16}) {
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
        Int8MatmulParams p = product(w, x, m, bias_dev.get(), y.get(), stride);
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

// The RoPE epilogue against the plain product (tested above) of the same launch shape, rotated by
// the CPU's rope (normal style, llama3-like factors) and its k, v rows read back from the caches.
TEST(Int8MatmulTest, RopeKvOutputIsThePlainProductRotatedWithKAndVInTheTokensCells) {
  CELLM_REQUIRE_DEVICE();
  using Case = testing::RopeKvCase;
  const Case c({5, 0, 4095, 17, 300}, {7, 2, 11, 0, 5}, 81);
  const int64_t n = Case::kRows;  // 448 rows: 28 blocks of 16
  const int64_t k = 512;
  const int32_t m = c.num_tokens();
  const int32_t cache_rows = 13;
  const QuantizedRows x(m, k, 82);
  const std::vector<float> bias = testing::random_floats(static_cast<size_t>(n), 83);
  const DeviceArray<float> bias_dev(bias);
  for (const TensorType type : {TensorType::kQ8_0, TensorType::kQ4_0, TensorType::kQ4_K}) {
    const std::vector<uint8_t> gguf = testing::random_gguf_rows(type, n, k, 84);
    const testing::UploadedWeight w = testing::upload_weight(type, n, k, gguf);
    DeviceArray<float> y(static_cast<size_t>(m * n));
    Int8MatmulParams p = product(w, x, m, bias_dev.get(), y.get(), n);
    ASSERT_TRUE(launch_int8_matmul(p, nullptr).ok());
    const Case::Reference ref = c.reference(y.download());

    for (const KvDtype dtype : {KvDtype::kF32, KvDtype::kBF16}) {
      SCOPED_TRACE(std::string(tensor_type_name(type)) +
                   (dtype == KvDtype::kF32 ? ", f32 cache" : ", bf16 cache"));
      const size_t elem = dtype == KvDtype::kF32 ? 4 : 2;
      DeviceArray<uint8_t> k_cache(static_cast<size_t>(cache_rows) * Case::kKvWidth * elem);
      DeviceArray<uint8_t> v_cache(static_cast<size_t>(cache_rows) * Case::kVWidth * elem);
      k_cache.poison();
      v_cache.poison();
      y.poison();
      p.rope_kv = true;
      p.rope = c.output(k_cache.get(), v_cache.get(), dtype);
      const Status launched = launch_int8_matmul(p, nullptr);
      ASSERT_TRUE(launched.ok()) << launched.to_string();
      const std::vector<float> y_got = y.download();
      EXPECT_TRUE(testing::near_relative("q", testing::compact_rows(y_got, m, n, Case::kQWidth),
                                         ref.q, 1e-5));
      const std::vector<uint8_t> k_bytes = k_cache.download();
      const std::vector<uint8_t> v_bytes = v_cache.download();
      testing::expect_kv_cache_rows(k_bytes, v_bytes, dtype, Case::kKvWidth, Case::kVWidth, c.cells,
                                    ref.k, ref.v);
      // The k and v columns of y keep their poison.
      for (int32_t t = 0; t < m; ++t) {
        for (int64_t col = Case::kQWidth; col < n; ++col) {
          ASSERT_TRUE(std::isnan(y_got[t * n + col])) << "y row " << t << " column " << col;
        }
      }
      // The angles from a per-step table (launch_rope_table): the same bits.
      DeviceArray<float2> table(static_cast<size_t>(m) * Case::kRotaryDims / 2);
      ASSERT_TRUE(launch_rope_table(c.table_params(table.get()), nullptr).ok());
      p.rope.cos_sin = table.get();
      y.poison();
      k_cache.poison();
      v_cache.poison();
      ASSERT_TRUE(launch_int8_matmul(p, nullptr).ok());
      EXPECT_TRUE(testing::compact_rows(y.download(), m, n, Case::kQWidth) ==
                  testing::compact_rows(y_got, m, n, Case::kQWidth))
          << "q differs with the table";
      EXPECT_TRUE(k_cache.download() == k_bytes) << "k cache differs with the table";
      EXPECT_TRUE(v_cache.download() == v_bytes) << "v cache differs with the table";
      p.rope_kv = false;
    }
  }
}

TEST(Int8MatmulTest, RefusesWhatItDoesNotMultiply) {
  CELLM_REQUIRE_DEVICE();
  const std::vector<uint8_t> gguf = testing::random_gguf_rows(TensorType::kQ8_0, 16, 256, 71);
  const testing::UploadedWeight w = testing::upload_weight(TensorType::kQ8_0, 16, 256, gguf);
  const QuantizedRows x(9, 256, 72);
  DeviceArray<float> y(9 * 16);
  const Int8MatmulParams p = product(w, x, 8, nullptr, y.get(), 16);
  ASSERT_TRUE(launch_int8_matmul(p, nullptr).ok());
  const auto refused = [](const Int8MatmulParams& params) {
    return launch_int8_matmul(params, nullptr).code() == StatusCode::kInvalidArgument;
  };
  Int8MatmulParams bad = p;
  bad.num_tokens = kInt8MatmulMaxTokens + 1;
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
  bad = p;
  bad.rope_kv = true;  // q/k/v widths that do not add up to N, null caches
  bad.rope.q_width = 4;
  bad.rope.kv_width = 4;
  bad.rope.v_width = 4;
  bad.rope.head_dim = 4;
  EXPECT_TRUE(refused(bad));

  const std::vector<uint8_t> bf16 = testing::random_gguf_rows(TensorType::kBF16, 16, 256, 73);
  const testing::UploadedWeight unquantized =
      testing::upload_weight(TensorType::kBF16, 16, 256, bf16);
  EXPECT_FALSE(int8_matmul_supports(unquantized.weight));
  bad = p;
  bad.w = unquantized.weight;
  EXPECT_TRUE(refused(bad));
  // Rows of 96 elements keep the GGUF layout.
  const std::vector<uint8_t> short_rows = testing::random_gguf_rows(TensorType::kQ8_0, 16, 96, 74);
  const testing::UploadedWeight gguf_layout =
      testing::upload_weight(TensorType::kQ8_0, 16, 96, short_rows);
  EXPECT_FALSE(int8_matmul_supports(gguf_layout.weight));
}

}  // namespace
}  // namespace cellm::kernels
