// decode_int8_test: the fused decode product quantizing its own f32 input to int8
// (DecodeMatmulParams::int8_activations): on gathered, RMS-normed rows it must give the product
// of the int8 activations that quantize_activations writes (every Q8_0 / Q4_0 / Q4_K / Q6_K row
// group, also when a block runs several groups), with bias, accumulate and SwiGLU epilogues, and
// refuse what does not fit its shared memory. GPU tests (label cuda).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "backends/cuda/kernels/decode_matmul.cuh"
#include "backends/cuda/kernels/kernel_test_support.h"
#include "backends/cuda/kernels/quantize_activations.cuh"
#include "backends/cuda/kernels/weight_layout.h"

namespace cellm::kernels {
namespace {

using testing::DeviceArray;

constexpr float kEps = 1e-5f;
constexpr int64_t kSourceRows = 10;  // rows of x the tokens gather from

// A random weight: its GGUF bytes (the CPU's dequantization is the reference) and its device
// layout, uploaded.
class Weight {
 public:
  Weight(TensorType type, int64_t rows, int64_t cols, uint32_t seed)
      : type(type),
        rows(rows),
        cols(cols),
        gguf(testing::random_gguf_rows(type, rows, cols, seed)) {
    std::vector<uint8_t> layout(device_row_bytes(type, cols) * static_cast<size_t>(rows));
    const Status repacked = repack_rows_for_device(type, cols, rows, gguf, layout);
    CELLM_CHECK(repacked.ok()) << repacked.to_string();
    bytes_ = DeviceArray<uint8_t>(layout);
    device = make_device_weight(bytes_.get(), type, rows, cols);
  }

  TensorType type;
  int64_t rows;
  int64_t cols;
  std::vector<uint8_t> gguf;
  DeviceWeight device;

 private:
  DeviceArray<uint8_t> bytes_;
};

// The f32 input of a product: kSourceRows rows of x (stride K + 4), token t reading row rows[t],
// RMS-normed with `norm`.
struct Input {
  int64_t stride;
  DeviceArray<float> x;
  DeviceArray<int32_t> rows;
  DeviceArray<float> norm;
};

Input random_input(int64_t k, int32_t m, uint32_t seed) {
  const int64_t stride = k + 4;
  return Input{stride, DeviceArray<float>(testing::random_floats(kSourceRows * stride, seed, 2.0f)),
               DeviceArray<int32_t>(testing::random_ints(m, seed + 1, 0, kSourceRows - 1)),
               DeviceArray<float>(testing::random_floats(k, seed + 2, 1.5f))};
}

// What quantize_activations makes of the input, as host values: q · d per element, natural
// order ([m, k] doubles).
std::vector<double> quantized_input(const Input& in, int64_t k, int32_t m) {
  DeviceArray<int8_t> q(static_cast<size_t>(m * k));
  DeviceArray<float> scales(static_cast<size_t>(m * k / 32));
  QuantizeActivationsParams p;
  p.num_tokens = m;
  p.num_cols = k;
  p.x = in.x.get();
  p.x_stride = in.stride;
  p.x_rows = in.rows.get();
  p.norm_weight = in.norm.get();
  p.norm_eps = kEps;
  p.q = q.get();
  p.scales = scales.get();
  const Status launched = launch_quantize_activations(p, nullptr);
  CELLM_CHECK(launched.ok()) << launched.to_string();
  const std::vector<int8_t> qs = q.download();
  const std::vector<float> ds = scales.download();
  std::vector<double> out(static_cast<size_t>(m * k));
  for (int32_t t = 0; t < m; ++t) {
    for (int64_t e = 0; e < k; ++e) {
      out[t * k + e] = static_cast<double>(qs[t * k + interleaved_q8_offset(e)]) *
                       static_cast<double>(ds[t * (k / 32) + e / 32]);
    }
  }
  return out;
}

// [m, rows] products of the weight's rows with the quantized input, in double.
std::vector<double> reference_products(const Weight& w, const std::vector<double>& x, int32_t m) {
  const std::vector<float> values = testing::dequantize_rows(w.type, w.rows, w.cols, w.gguf);
  std::vector<double> out(static_cast<size_t>(m * w.rows));
  for (int32_t t = 0; t < m; ++t) {
    for (int64_t r = 0; r < w.rows; ++r) {
      double sum = 0.0;
      for (int64_t e = 0; e < w.cols; ++e) sum += values[r * w.cols + e] * x[t * w.cols + e];
      out[t * w.rows + r] = sum;
    }
  }
  return out;
}

DecodeMatmulParams folded_params(const Weight& w, const Input& in, int32_t m) {
  DecodeMatmulParams p;
  p.w = w.device;
  p.num_tokens = m;
  p.x = in.x.get();
  p.x_stride = in.stride;
  p.x_rows = in.rows.get();
  p.norm_weight = in.norm.get();
  p.norm_eps = kEps;
  p.int8_activations = true;
  return p;
}

std::string name(const Weight& w, int32_t m) {
  return std::string(tensor_type_name(w.type)) + " [" + std::to_string(w.rows) + ", " +
         std::to_string(w.cols) + "] M=" + std::to_string(m);
}

// 4099 rows: more row groups than one wave of blocks holds, so blocks run several groups.
TEST(DecodeInt8FoldTest, AccumulatesTheProductOfTheQuantizedNormedRowsPlusBias) {
  CELLM_REQUIRE_DEVICE();
  for (const TensorType type :
       {TensorType::kQ8_0, TensorType::kQ4_0, TensorType::kQ4_K, TensorType::kQ6_K}) {
    for (const int64_t rows : {int64_t{6}, int64_t{4099}}) {
      const Weight w(type, rows, 512, 71);
      for (const int32_t m : {1, 2, 3, 4, 8}) {
        SCOPED_TRACE(name(w, m));
        const Input in = random_input(w.cols, m, 72);
        const std::vector<double> products =
            reference_products(w, quantized_input(in, w.cols, m), m);
        const std::vector<float> bias = testing::random_floats(rows, 73);
        const std::vector<float> y0 = testing::random_floats(m * rows, 74);
        std::vector<float> want(y0.size());
        for (size_t i = 0; i < want.size(); ++i) {
          want[i] = static_cast<float>(y0[i] + (products[i] + bias[i % rows]));
        }
        DeviceArray<float> bias_dev(bias);
        DeviceArray<float> y(y0.size());
        DecodeMatmulParams p = folded_params(w, in, m);
        p.bias = bias_dev.get();
        p.y = y.get();
        p.y_stride = rows;
        p.accumulate = true;
        testing::expect_parity(
            "folded int8 product", y,
            [&] {
              y.upload(y0);
              const Status launched = launch_decode_matmul(p, nullptr);
              ASSERT_TRUE(launched.ok()) << launched.to_string();
            },
            want, 1e-5);
      }
    }
  }
}

TEST(DecodeInt8FoldTest, SwigluOfGateAndUpRowsOfTheQuantizedInput) {
  CELLM_REQUIRE_DEVICE();
  constexpr int64_t kFfn = 2051;  // pairs: more groups than a wave, and a partial last group
  for (const TensorType type :
       {TensorType::kQ8_0, TensorType::kQ4_0, TensorType::kQ4_K, TensorType::kQ6_K}) {
    const Weight w(type, 2 * kFfn, 256, 81);
    for (const int32_t m : {1, 4}) {
      SCOPED_TRACE(name(w, m));
      const Input in = random_input(w.cols, m, 82);
      const std::vector<double> products = reference_products(w, quantized_input(in, w.cols, m), m);
      std::vector<float> want(static_cast<size_t>(m * kFfn));
      for (int32_t t = 0; t < m; ++t) {
        for (int64_t j = 0; j < kFfn; ++j) {
          const double gate = products[t * w.rows + j];
          const double up = products[t * w.rows + kFfn + j];
          want[t * kFfn + j] = static_cast<float>(gate / (1.0 + std::exp(-gate)) * up);
        }
      }
      DeviceArray<float> y(want.size());
      DecodeMatmulParams p = folded_params(w, in, m);
      p.output = DecodeOutput::kSwiglu;
      p.y = y.get();
      p.y_stride = kFfn;
      testing::expect_parity(
          "folded int8 SwiGLU", y,
          [&] {
            const Status launched = launch_decode_matmul(p, nullptr);
            ASSERT_TRUE(launched.ok()) << launched.to_string();
          },
          want, 1e-5);
    }
  }
}

TEST(DecodeInt8FoldTest, RefusesRowsBeyondItsSharedMemoryAndOtherInputs) {
  CELLM_REQUIRE_DEVICE();
  // 4 rows of 14336 columns need 64 KB: over the 48 KB a block takes by default.
  const Weight wide(TensorType::kQ8_0, 2, 14336, 91);
  EXPECT_TRUE(decode_matmul_folds_int8(wide.device, 2));
  EXPECT_FALSE(decode_matmul_folds_int8(wide.device, 4));
  const Input in = random_input(wide.cols, 4, 92);
  DeviceArray<float> y(8);
  DecodeMatmulParams p = folded_params(wide, in, 4);
  p.y = y.get();
  p.y_stride = 2;
  EXPECT_EQ(launch_decode_matmul(p, nullptr).code(), StatusCode::kInvalidArgument);

  const Weight bf16(TensorType::kBF16, 2, 256, 93);
  EXPECT_FALSE(decode_matmul_folds_int8(bf16.device, 1));
  const Input small = random_input(256, 1, 94);
  p = folded_params(bf16, small, 1);
  p.y = y.get();
  p.y_stride = 2;
  EXPECT_EQ(launch_decode_matmul(p, nullptr).code(), StatusCode::kInvalidArgument);

  const Weight q4(TensorType::kQ4_0, 2, 256, 95);
  DeviceArray<int8_t> xq(256);
  DeviceArray<float> xs(8);
  p = folded_params(q4, small, 1);
  p.x = nullptr;
  p.x_rows = nullptr;
  p.norm_weight = nullptr;
  p.x_q8 = xq.get();  // given int8 activations and in-product quantization at once
  p.x_q8_scales = xs.get();
  p.y = y.get();
  p.y_stride = 2;
  EXPECT_EQ(launch_decode_matmul(p, nullptr).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace cellm::kernels
