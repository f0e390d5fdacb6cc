// decode_handover_test: one-token Q8_0 / Q4_0 products handing the next product its normed int8
// input (DecodeOutput::kAddHandover) and products taking it (x_q8_sum_squares). The producer must
// add its product of the int8 input into the residual (against the host in double) and write, per
// block of 32, exactly the int8 values and scale that quantize_activations' rounding gives the new
// residual times the next norm weight, and its sum of squares; the taker must give the product of
// the RMS-normed row (s from the sums, against the host in double) with bias, SwiGLU and store
// epilogues. A gate|up product handing its SwiGLU values over per 16 (kSwigluHandover) must write
// exactly the per-16 rounding of the values its kSwiglu twin stores, and the products taking them
// (x_q8_per_16) the host's products; bad params are refused. CELLM_CUDA_HANDOVER_SHAPE picks the
// add-handover producer's block shape (a, b or c; device-check runs each). GPU tests (label
// cuda).
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

// One token's int8 input with one scale per 16 (a kSwigluHandover product's): random values
// (natural order e, stored at interleaved_q8_offset(e)) and random scales (stored at
// per16_scale_index(e)); `values` holds q · d per element.
struct Per16Input {
  Per16Input(int64_t k, uint32_t seed) {
    const std::vector<int32_t> q = testing::random_ints(static_cast<size_t>(k), seed, -127, 127);
    const std::vector<float> d = testing::random_floats(static_cast<size_t>(k / 16), seed + 1);
    std::vector<int8_t> stored(static_cast<size_t>(k));
    std::vector<float> scales(d.size());
    values.resize(static_cast<size_t>(k));
    for (int64_t e = 0; e < k; ++e) {
      const float scale = 0.02f + 0.01f * std::fabs(d[e / 16]);
      stored[static_cast<size_t>(interleaved_q8_offset(e))] = static_cast<int8_t>(q[e]);
      scales[static_cast<size_t>(per16_scale_index(e))] = scale;
      values[static_cast<size_t>(e)] = static_cast<double>(q[e]) * scale;
    }
    this->q = DeviceArray<int8_t>(stored);
    this->scales = DeviceArray<float>(scales);
  }
  std::vector<double> values;
  DeviceArray<int8_t> q;
  DeviceArray<float> scales;
};

// A normed handed-over input of K columns (as an output product writes it): the int8 values of x ⊙
// norm per 32, their scales and Σ x² per 32; `values` the normed row they stand for.
struct NormedInput {
  NormedInput(int64_t k, uint32_t seed) {
    const std::vector<float> x = testing::random_floats(static_cast<size_t>(k), seed, 2.0f);
    const std::vector<float> norm = testing::random_floats(static_cast<size_t>(k), seed + 1, 1.5f);
    std::vector<int8_t> stored(static_cast<size_t>(k));
    std::vector<float> scales(static_cast<size_t>(k / 32));
    std::vector<double> sum_squares(static_cast<size_t>(k / 32));
    double total = 0.0;
    for (int64_t b = 0; b < k / 32; ++b) {
      float amax = 0.0f;
      for (int64_t e = 32 * b; e < 32 * b + 32; ++e) {
        amax = std::fmax(amax, std::fabs(x[e] * norm[e]));
        sum_squares[b] += static_cast<double>(x[e] * x[e]);
      }
      total += sum_squares[b];
      scales[b] = q8_block_scale(amax);
    }
    const double s = 1.0 / std::sqrt(total / static_cast<double>(k) + kEps);
    values.resize(static_cast<size_t>(k));
    for (int64_t e = 0; e < k; ++e) {
      const int8_t q = q8_quantize(x[e] * norm[e], scales[e / 32]);
      stored[interleaved_q8_offset(e)] = q;
      values[e] = s * static_cast<double>(q) * scales[e / 32];
    }
    this->q = DeviceArray<int8_t>(stored);
    this->scales = DeviceArray<float>(scales);
    this->sums = DeviceArray<double>(sum_squares);
  }
  std::vector<double> values;
  DeviceArray<int8_t> q;
  DeviceArray<float> scales;
  DeviceArray<double> sums;
};

// silu(gate) · up of a [gate; up] product's rows, in double.
std::vector<float> swiglu_of(const std::vector<double>& p) {
  const size_t f = p.size() / 2;
  std::vector<float> out(f);
  for (size_t j = 0; j < f; ++j)
    out[j] = static_cast<float>(p[j] / (1.0 + std::exp(-p[j])) * p[f + j]);
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
  const NormedInput in(kCols, 71);
  for (const TensorType type : {TensorType::kQ8_0, TensorType::kQ4_0}) {
    for (const DecodeOutput output : {DecodeOutput::kStore, DecodeOutput::kSwiglu}) {
      const bool swiglu = output == DecodeOutput::kSwiglu;
      SCOPED_TRACE(std::string(tensor_type_name(type)) + (swiglu ? " SwiGLU" : " store"));
      const Weight w(type, 2 * 131, kCols, 73);  // 131 pairs: a partial last row group
      const std::vector<double> p = products(w, in.values);
      const std::vector<float> bias = testing::random_floats(static_cast<size_t>(w.rows), 74);
      std::vector<float> want;
      if (swiglu) {
        want = swiglu_of(p);
      } else {
        for (int64_t r = 0; r < w.rows; ++r) want.push_back(static_cast<float>(p[r] + bias[r]));
      }
      DeviceArray<float> bias_dev(bias);
      DeviceArray<float> y(want.size());
      DecodeMatmulParams params;
      params.w = w.upload.weight;
      params.num_tokens = 1;
      params.x_q8 = in.q.get();
      params.x_q8_scales = in.scales.get();
      params.x_q8_sum_squares = in.sums.get();
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

// gate|up handing its SwiGLU values over per 16: the same sums as the kSwiglu product of the same
// input (which must equal the host's SwiGLU in double), quantized per block of 16 exactly as
// quantize_activations rounds, values in the interleaved order, scales at per16_scale_index. F
// shapes: one and several blocks of 256; K: one chunk per thread and row (512, 4096) and fewer
// chunks than threads (2816); input per 32 from a quantize launch or handed over normed.
TEST(DecodeHandoverTest, GateUpHandsOverItsSwigluValuesQuantizedPer16) {
  CELLM_REQUIRE_DEVICE();
  for (const TensorType type : {TensorType::kQ8_0, TensorType::kQ4_0}) {
    for (const auto& [f, k] : {std::pair<int64_t, int64_t>{256, 512}, {768, 4096}, {512, 2816}}) {
      for (const bool normed : {false, true}) {
        SCOPED_TRACE(std::string(tensor_type_name(type)) + " F " + std::to_string(f) + " K " +
                     std::to_string(k) + (normed ? " normed" : " per 32"));
        const Weight w(type, 2 * f, k, 93);
        const Int8Input plain(k, 94);
        const NormedInput handed(k, 91);
        DecodeMatmulParams params;
        params.w = w.upload.weight;
        params.num_tokens = 1;
        params.x_q8 = normed ? handed.q.get() : plain.q.get();
        params.x_q8_scales = normed ? handed.scales.get() : plain.scales.get();
        params.x_q8_sum_squares = normed ? handed.sums.get() : nullptr;
        params.norm_eps = kEps;

        // The SwiGLU product stored in f32, against the host.
        DeviceArray<float> y(static_cast<size_t>(f));
        DecodeMatmulParams stored = params;
        stored.output = DecodeOutput::kSwiglu;
        stored.y = y.get();
        stored.y_stride = f;
        testing::expect_parity(
            "SwiGLU product", y,
            [&] {
              const Status launched = launch_decode_matmul(stored, nullptr);
              ASSERT_TRUE(launched.ok()) << launched.to_string();
            },
            swiglu_of(products(w, normed ? handed.values : plain.values)), 1e-5);
        ASSERT_FALSE(HasFatalFailure());
        const std::vector<float> values = y.download();

        DeviceArray<int8_t> q(static_cast<size_t>(f));
        DeviceArray<float> scales(static_cast<size_t>(f / 16));
        q.poison();
        scales.poison();
        DecodeMatmulParams handing = params;
        handing.output = DecodeOutput::kSwigluHandover;
        handing.handover.q = q.get();
        handing.handover.scales = scales.get();
        const Status launched = launch_decode_matmul(handing, nullptr);
        ASSERT_TRUE(launched.ok()) << launched.to_string();
        const std::vector<int8_t> got_q = q.download();
        const std::vector<float> got_scales = scales.download();
        for (int64_t b = 0; b < f / 16; ++b) {
          float amax = 0.0f;
          for (int64_t e = 16 * b; e < 16 * b + 16; ++e)
            amax = std::fmax(amax, std::fabs(values[e]));
          const float scale = q8_block_scale(amax);
          ASSERT_EQ(got_scales[per16_scale_index(16 * b)], scale) << "block " << b;
          for (int64_t e = 16 * b; e < 16 * b + 16; ++e) {
            ASSERT_EQ(got_q[interleaved_q8_offset(e)], q8_quantize(values[e], scale))
                << "element " << e;
          }
        }
      }
    }
  }
}

// The takers of per-16 input: a stored product (the row-group kernel) and a product handing over
// in turn (the down product: the handover kernel, CELLM_CUDA_HANDOVER_SHAPE's shape), against the
// host in double.
TEST(DecodeHandoverTest, ProductsTakeSwigluValuesHandedOverPer16) {
  CELLM_REQUIRE_DEVICE();
  for (const TensorType type : {TensorType::kQ8_0, TensorType::kQ4_0}) {
    for (const int64_t k : {int64_t{512}, int64_t{2816}, int64_t{14336}}) {
      SCOPED_TRACE(std::string(tensor_type_name(type)) + " K " + std::to_string(k));
      constexpr int64_t kRows = 256;
      const Weight w(type, kRows, k, 95);
      const Per16Input in(k, 96);
      const std::vector<double> p = products(w, in.values);
      const std::vector<float> bias = testing::random_floats(static_cast<size_t>(kRows), 97);
      const std::vector<float> y0 = testing::random_floats(static_cast<size_t>(kRows), 98, 3.0f);
      DeviceArray<float> bias_dev(bias);
      DeviceArray<float> y(static_cast<size_t>(kRows));
      for (const bool handing : {false, true}) {
        SCOPED_TRACE(handing ? "handing over" : "stored");
        std::vector<float> want(static_cast<size_t>(kRows));
        for (int64_t r = 0; r < kRows; ++r) {
          want[r] = static_cast<float>((handing ? y0[r] : 0.0) + (p[r] + bias[r]));
        }
        Handover h(kRows);
        DecodeMatmulParams params;
        params.w = w.upload.weight;
        params.num_tokens = 1;
        params.x_q8 = in.q.get();
        params.x_q8_scales = in.scales.get();
        params.x_q8_per_16 = true;
        params.bias = bias_dev.get();
        params.y = y.get();
        params.y_stride = kRows;
        if (handing) {
          params.output = DecodeOutput::kAddHandover;
          params.accumulate = true;
          params.handover = h.params();
        }
        testing::expect_parity(
            "per-16 input", y,
            [&] {
              if (handing) y.upload(y0);
              const Status launched = launch_decode_matmul(params, nullptr);
              ASSERT_TRUE(launched.ok()) << launched.to_string();
            },
            want, 1e-5);
      }
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

  // A SwiGLU handover: one token, F a multiple of 256, Q8_0 / Q4_0, per-32 input, no bias.
  const Weight gate_up(TensorType::kQ4_0, 512, 256, 85);
  DeviceArray<int8_t> swiglu_q(256);
  DeviceArray<float> swiglu_scales(16);
  const auto swiglu = [&](const Weight& w) {
    DecodeMatmulParams s;
    s.w = w.upload.weight;
    s.num_tokens = 1;
    s.x_q8 = in.q.get();
    s.x_q8_scales = in.scales.get();
    s.output = DecodeOutput::kSwigluHandover;
    s.handover.q = swiglu_q.get();
    s.handover.scales = swiglu_scales.get();
    return s;
  };
  EXPECT_TRUE(launch_decode_matmul(swiglu(gate_up), nullptr).ok());
  p = swiglu(gate_up);
  p.num_tokens = 2;
  EXPECT_TRUE(refused(p));
  p = swiglu(gate_up);
  p.bias = y.get();
  EXPECT_TRUE(refused(p));
  p = swiglu(gate_up);
  p.handover.q = in.q.get();  // its own input
  EXPECT_TRUE(refused(p));
  p = swiglu(gate_up);
  p.handover.scales = nullptr;
  EXPECT_TRUE(refused(p));
  p = swiglu(gate_up);
  p.x_q8_per_16 = true;  // its input handed over per 16 in turn
  EXPECT_TRUE(refused(p));
  EXPECT_TRUE(refused(swiglu(Weight(TensorType::kQ4_0, 768, 256, 86))));  // F = 384
  EXPECT_TRUE(refused(swiglu(Weight(TensorType::kQ4_K, 512, 256, 87))));

  // A per-16 taker: one token, Q8_0 / Q4_0, not normed.
  const Per16Input per_16(256, 88);
  const auto taker = [&](const Weight& w) {
    DecodeMatmulParams t;
    t.w = w.upload.weight;
    t.num_tokens = 1;
    t.x_q8 = per_16.q.get();
    t.x_q8_scales = per_16.scales.get();
    t.x_q8_per_16 = true;
    t.y = y.get();
    t.y_stride = 256;
    return t;
  };
  EXPECT_TRUE(launch_decode_matmul(taker(q4), nullptr).ok());
  p = taker(q4);
  p.num_tokens = 2;
  EXPECT_TRUE(refused(p));
  p = taker(q4);
  p.x_q8_sum_squares = sums.get();
  EXPECT_TRUE(refused(p));
  p = taker(q4);
  p.x_q8 = nullptr;
  EXPECT_TRUE(refused(p));
  EXPECT_TRUE(refused(taker(q4_k)));
  CELLM_CUDA_OK(cudaDeviceSynchronize());
}

}  // namespace
}  // namespace cellm::kernels
