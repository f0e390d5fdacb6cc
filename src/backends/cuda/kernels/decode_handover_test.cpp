// decode_handover_test: one-token Q8_0 / Q4_0 products handing the next product its normed int8
// input (DecodeOutput::kAddHandover) and products taking it (x_q8_sum_squares). The producer must
// add its product of the int8 input into the residual (against the host in double) and write, per
// block of 32, exactly the int8 values and scale that quantize_activations' rounding gives the new
// residual times the next norm weight, and its sum of squares; the taker must give the product of
// the RMS-normed row (s from the sums, against the host in double) with bias, SwiGLU and store
// epilogues; bad params are refused. CELLM_CUDA_HANDOVER_SHAPE picks the producer's block shape (a,
// b or c; device-check runs each). GPU tests (label cuda).
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

// A random weight: its GGUF bytes' dequantization (the CPU's: the reference) and its device
// layout, uploaded.
struct Weight {
  Weight(TensorType type, int64_t rows, int64_t cols, uint32_t seed) : rows(rows), cols(cols) {
    const std::vector<uint8_t> gguf = testing::random_gguf_rows(type, rows, cols, seed);
    values = testing::dequantize_rows(type, rows, cols, gguf);
    upload = testing::upload_weight(type, rows, cols, gguf);
  }
  int64_t rows;
  int64_t cols;
  std::vector<float> values;  // [rows, cols]
  testing::UploadedWeight upload;
};

// One token's int8 input: random values (natural order e, stored at interleaved_q8_offset(e))
// and random block scales; `values` holds q · d per element.
struct Int8Input {
  Int8Input(int64_t k, uint32_t seed) {
    const std::vector<int32_t> q = testing::random_ints(static_cast<size_t>(k), seed, -127, 127);
    const std::vector<float> d = testing::random_floats(static_cast<size_t>(k / 32), seed + 1);
    std::vector<int8_t> stored(static_cast<size_t>(k));
    std::vector<float> scales(d.size());
    values.resize(static_cast<size_t>(k));
    for (size_t b = 0; b < d.size(); ++b) scales[b] = 0.02f + 0.01f * std::fabs(d[b]);
    for (int64_t e = 0; e < k; ++e) {
      stored[static_cast<size_t>(interleaved_q8_offset(e))] = static_cast<int8_t>(q[e]);
      values[static_cast<size_t>(e)] = static_cast<double>(q[e]) * scales[e / 32];
    }
    this->q = DeviceArray<int8_t>(stored);
    this->scales = DeviceArray<float>(scales);
  }
  std::vector<double> values;
  DeviceArray<int8_t> q;
  DeviceArray<float> scales;
};

// w · x per row, in double.
std::vector<double> products(const Weight& w, const std::vector<double>& x) {
  std::vector<double> out(static_cast<size_t>(w.rows));
  for (int64_t r = 0; r < w.rows; ++r) {
    double sum = 0.0;
    for (int64_t e = 0; e < w.cols; ++e) sum += w.values[r * w.cols + e] * x[e];
    out[static_cast<size_t>(r)] = sum;
  }
  return out;
}

// The handover buffers of an N-row product.
struct Handover {
  explicit Handover(int64_t n)
      : norm(testing::random_floats(static_cast<size_t>(n), 61, 1.5f)),
        q(static_cast<size_t>(n)),
        scales(static_cast<size_t>(n / 32)),
        sum_squares(static_cast<size_t>(n / 32)) {}
  DecodeHandover params() const { return {norm.get(), q.get(), scales.get(), sum_squares.get()}; }
  DeviceArray<float> norm;
  DeviceArray<int8_t> q;
  DeviceArray<float> scales;
  DeviceArray<double> sum_squares;
};

DecodeMatmulParams producer_params(const Weight& w, const Int8Input& in, float* y,
                                   const Handover& h) {
  DecodeMatmulParams p;
  p.w = w.upload.weight;
  p.num_tokens = 1;
  p.x_q8 = in.q.get();
  p.x_q8_scales = in.scales.get();
  p.output = DecodeOutput::kAddHandover;
  p.y = y;
  p.y_stride = w.rows;
  p.accumulate = true;
  p.handover = h.params();
  return p;
}

// Output and down shapes: one chunk per thread and row (K = 512), several (K = 14336, as an 8B
// model's down product), and fewer chunks than threads (K = 2816). N: whole 256-column spans of
// the next product's input.
TEST(DecodeHandoverTest, AddsIntoTheResidualAndHandsOverItsQuantizedNormedOutput) {
  CELLM_REQUIRE_DEVICE();
  for (const TensorType type : {TensorType::kQ8_0, TensorType::kQ4_0}) {
    for (const auto& [rows, cols] :
         {std::pair<int64_t, int64_t>{512, 512}, {256, 14336}, {256, 2816}}) {
      SCOPED_TRACE(std::string(tensor_type_name(type)) + " [" + std::to_string(rows) + ", " +
                   std::to_string(cols) + "]");
      const Weight w(type, rows, cols, 51);
      const Int8Input in(cols, 52);
      const std::vector<double> p = products(w, in.values);
      const std::vector<float> bias = testing::random_floats(static_cast<size_t>(rows), 53);
      const std::vector<float> y0 = testing::random_floats(static_cast<size_t>(rows), 54, 3.0f);
      std::vector<float> want(y0.size());
      for (size_t r = 0; r < want.size(); ++r)
        want[r] = static_cast<float>(y0[r] + (p[r] + bias[r]));
      DeviceArray<float> bias_dev(bias);
      DeviceArray<float> y(y0.size());
      Handover h(rows);
      DecodeMatmulParams params = producer_params(w, in, y.get(), h);
      params.bias = bias_dev.get();
      testing::expect_parity(
          "handover residual", y,
          [&] {
            y.upload(y0);
            h.q.poison();
            h.scales.poison();
            h.sum_squares.poison();
            const Status launched = launch_decode_matmul(params, nullptr);
            ASSERT_TRUE(launched.ok()) << launched.to_string();
          },
          want, 1e-5);
      ASSERT_FALSE(HasFatalFailure());

      // The handover from the residual the kernel wrote, as quantize_activations rounds.
      const std::vector<float> residual = y.download();
      const std::vector<float> norm = h.norm.download();
      const std::vector<int8_t> q = h.q.download();
      const std::vector<float> scales = h.scales.download();
      const std::vector<double> sum_squares = h.sum_squares.download();
      for (int64_t b = 0; b < rows / 32; ++b) {
        float amax = 0.0f;
        double squares = 0.0;
        for (int64_t e = 32 * b; e < 32 * b + 32; ++e) {
          amax = std::fmax(amax, std::fabs(residual[e] * norm[e]));
          squares += static_cast<double>(residual[e] * residual[e]);
        }
        const float scale = q8_block_scale(amax);
        ASSERT_EQ(scales[b], scale) << "block " << b;
        EXPECT_NEAR(sum_squares[b], squares, 1e-12 * squares) << "block " << b;
        for (int64_t e = 32 * b; e < 32 * b + 32; ++e) {
          ASSERT_EQ(q[interleaved_q8_offset(e)], q8_quantize(residual[e] * norm[e], scale))
              << "element " << e;
        }
      }
    }
  }
}

// The consumer: the int8 values of x ⊙ norm and the sums of squares of x per 32 (as a producer
// writes them), against the host's RMSNorm product in double.
TEST(DecodeHandoverTest, ATakerMultipliesItsProductsByTheRmsScaleOfTheHandedOverSums) {
  CELLM_REQUIRE_DEVICE();
  constexpr int64_t kCols = 1024;
  const std::vector<float> x = testing::random_floats(kCols, 71, 2.0f);
  const std::vector<float> norm = testing::random_floats(kCols, 72, 1.5f);
  std::vector<int8_t> stored(kCols);
  std::vector<float> scales(kCols / 32);
  std::vector<double> sum_squares(kCols / 32);
  std::vector<double> xn(kCols);  // the normed row the int8 values stand for
  double total = 0.0;
  for (int64_t b = 0; b < kCols / 32; ++b) {
    float amax = 0.0f;
    for (int64_t e = 32 * b; e < 32 * b + 32; ++e) {
      amax = std::fmax(amax, std::fabs(x[e] * norm[e]));
      sum_squares[b] += static_cast<double>(x[e] * x[e]);
    }
    total += sum_squares[b];
    scales[b] = q8_block_scale(amax);
  }
  const double s = 1.0 / std::sqrt(total / kCols + kEps);
  for (int64_t e = 0; e < kCols; ++e) {
    const int8_t q = q8_quantize(x[e] * norm[e], scales[e / 32]);
    stored[interleaved_q8_offset(e)] = q;
    xn[e] = s * static_cast<double>(q) * scales[e / 32];
  }
  const DeviceArray<int8_t> q_dev(stored);
  const DeviceArray<float> scales_dev(scales);
  const DeviceArray<double> sums_dev(sum_squares);
  for (const TensorType type : {TensorType::kQ8_0, TensorType::kQ4_0}) {
    for (const DecodeOutput output : {DecodeOutput::kStore, DecodeOutput::kSwiglu}) {
      const bool swiglu = output == DecodeOutput::kSwiglu;
      SCOPED_TRACE(std::string(tensor_type_name(type)) + (swiglu ? " SwiGLU" : " store"));
      const Weight w(type, 2 * 131, kCols, 73);  // 131 pairs: a partial last row group
      const std::vector<double> p = products(w, xn);
      const std::vector<float> bias = testing::random_floats(static_cast<size_t>(w.rows), 74);
      std::vector<float> want;
      if (swiglu) {
        for (int64_t j = 0; j < w.rows / 2; ++j) {
          const double gate = p[j];
          const double up = p[w.rows / 2 + j];
          want.push_back(static_cast<float>(gate / (1.0 + std::exp(-gate)) * up));
        }
      } else {
        for (int64_t r = 0; r < w.rows; ++r) want.push_back(static_cast<float>(p[r] + bias[r]));
      }
      DeviceArray<float> bias_dev(bias);
      DeviceArray<float> y(want.size());
      DecodeMatmulParams params;
      params.w = w.upload.weight;
      params.num_tokens = 1;
      params.x_q8 = q_dev.get();
      params.x_q8_scales = scales_dev.get();
      params.x_q8_sum_squares = sums_dev.get();
      params.norm_eps = kEps;
      params.bias = swiglu ? nullptr : bias_dev.get();
      params.output = output;
      params.y = y.get();
      params.y_stride = static_cast<int64_t>(want.size());
      testing::expect_parity(
          "handed-over normed input", y,
          [&] {
            const Status launched = launch_decode_matmul(params, nullptr);
            ASSERT_TRUE(launched.ok()) << launched.to_string();
          },
          want, 1e-5);
    }
  }
}

TEST(DecodeHandoverTest, RefusesWhatItCannotHandOver) {
  CELLM_REQUIRE_DEVICE();
  const Weight q4(TensorType::kQ4_0, 256, 256, 81);
  const Int8Input in(256, 82);
  DeviceArray<float> y(256);
  const Handover h(256);
  const auto refused = [](const DecodeMatmulParams& p) {
    return launch_decode_matmul(p, nullptr).code() == StatusCode::kInvalidArgument;
  };
  EXPECT_TRUE(launch_decode_matmul(producer_params(q4, in, y.get(), h), nullptr).ok());

  DecodeMatmulParams p = producer_params(q4, in, y.get(), h);
  p.num_tokens = 2;  // one token only
  EXPECT_TRUE(refused(p));
  p = producer_params(q4, in, y.get(), h);
  p.handover.norm_weight = nullptr;
  EXPECT_TRUE(refused(p));
  p = producer_params(q4, in, y.get(), h);
  p.handover.q = in.q.get();  // its own input
  EXPECT_TRUE(refused(p));
  const Weight partial(TensorType::kQ4_0, 96, 256, 83);  // not whole spans of 256
  EXPECT_TRUE(refused(producer_params(partial, in, y.get(), h)));
  const Weight q4_k(TensorType::kQ4_K, 256, 256, 84);
  EXPECT_TRUE(refused(producer_params(q4_k, in, y.get(), h)));

  // A taker: one token of per-32 int8 input on Q8_0 / Q4_0 weights.
  DeviceArray<double> sums(8);
  p = DecodeMatmulParams{};
  p.w = q4.upload.weight;
  p.num_tokens = 1;
  p.x_q8 = in.q.get();
  p.x_q8_scales = in.scales.get();
  p.x_q8_sum_squares = sums.get();
  p.y = y.get();
  p.y_stride = 256;
  EXPECT_TRUE(launch_decode_matmul(p, nullptr).ok());
  p.num_tokens = 2;
  EXPECT_TRUE(refused(p));
  p.num_tokens = 1;
  p.w = q4_k.upload.weight;
  EXPECT_TRUE(refused(p));
  CELLM_CUDA_OK(cudaDeviceSynchronize());
}

}  // namespace
}  // namespace cellm::kernels
