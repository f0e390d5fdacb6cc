// Parity of the matrix products with cpu_matmul for every weight type: the small-M path (fast
// interleaved/aligned kernels and the generic GGUF-layout kernel) at M = 1..8, the wide path
// (cuBLAS: f32 exact; 16-bit operands, resident bf16 copies and tiled dequantization; the fused
// tensor-core product of interleaved Q8_0 / Q4_0 up to 128 tokens), the accumulate epilogue,
// strided inputs and outputs, and dequantization to bf16.
#include "backends/cuda/kernels/matmul.cuh"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "backends/cpu/cpu_ops.h"
#include "backends/cuda/kernels/dequantize.cuh"
#include "backends/cuda/kernels/kernel_test_support.h"
#include "backends/cuda/kernels/matmul_wide.cuh"
#include "backends/cuda/kernels/quantize_activations.cuh"
#include "core/float16.h"

namespace cellm::kernels {
namespace {

using testing::DeviceArray;
using testing::random_floats;

struct Shape {
  TensorType type;
  int64_t rows;  // N
  int64_t cols;  // K
};

std::string name(const Shape& s) {
  return std::string(tensor_type_name(s.type)) + " [" + std::to_string(s.rows) + ", " +
         std::to_string(s.cols) + "]";
}

class MatmulKernelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CELLM_REQUIRE_DEVICE();
    ASSERT_EQ(cublasCreate(&cublas_), CUBLAS_STATUS_SUCCESS);
    workspace_ = DeviceArray<uint8_t>(kCublasWorkspaceBytes);
    ASSERT_EQ(cublasSetWorkspace(cublas_, workspace_.get(), kCublasWorkspaceBytes),
              CUBLAS_STATUS_SUCCESS);
  }
  void TearDown() override {
    if (cublas_ != nullptr) cublasDestroy(cublas_);
  }

  // A resident bf16 copy of a quantized weight (MatmulParams::w_bf16), dequantized on the device.
  static DeviceArray<uint16_t> bf16_copy(const DeviceWeight& w) {
    DeviceArray<uint16_t> copy(static_cast<size_t>(w.num_rows * w.num_cols));
    DequantizeParams dq;
    dq.w = w;
    dq.num_rows = w.num_rows;
    dq.out = copy.get();
    EXPECT_TRUE(launch_dequantize_bf16(dq, nullptr).ok());
    return copy;
  }

  enum class Path { kSmall, kWide, kWideWithCopy, kDispatch };

  // y (+)= x·Wᵀ on the GPU against cpu_matmul, with strided x and y.
  void expect_matmul(const Shape& s, int32_t m, Path path, bool accumulate, double tolerance) {
    SCOPED_TRACE(name(s) + " M=" + std::to_string(m) +
                 (path == Path::kSmall          ? " small"
                  : path == Path::kWide         ? " wide"
                  : path == Path::kWideWithCopy ? " wide+copy"
                                                : " dispatch") +
                 (accumulate ? " accumulate" : ""));
    const std::vector<uint8_t> gguf = testing::random_gguf_rows(s.type, s.rows, s.cols, 61);
    const int64_t x_stride = s.cols + 4;
    const int64_t y_stride = s.rows + 3;
    const std::vector<float> x = random_floats(static_cast<size_t>(m * x_stride), 62);
    const std::vector<float> residual = random_floats(static_cast<size_t>(m * y_stride), 63);
    const std::vector<float> x_compact = testing::compact_rows(x, m, x_stride, s.cols);
    std::vector<float> product(static_cast<size_t>(m * s.rows));
    cpu_matmul(testing::weight_view(s.type, s.rows, s.cols, gguf), x_compact.data(), m,
               product.data(), nullptr);
    std::vector<float> ref(product);
    if (accumulate) {
      for (int32_t t = 0; t < m; ++t) {
        for (int64_t r = 0; r < s.rows; ++r) ref[t * s.rows + r] += residual[t * y_stride + r];
      }
    }

    const testing::UploadedWeight w = testing::upload_weight(s.type, s.rows, s.cols, gguf);
    DeviceArray<float> x_dev(x);
    DeviceArray<float> y(residual);  // the padding columns keep the residual's values
    MatmulParams p;
    p.w = w.weight;
    p.x = x_dev.get();
    p.x_stride = x_stride;
    p.num_tokens = m;
    p.y = y.get();
    p.y_stride = y_stride;
    p.accumulate = accumulate;
    p.cublas = cublas_;
    DeviceArray<uint16_t> copy;
    if (path == Path::kWideWithCopy) {
      copy = bf16_copy(p.w);
      p.w_bf16 = copy.get();
    }
    const size_t scratch_bytes = matmul_wide_scratch_bytes(p.w, m);
    DeviceArray<uint8_t> scratch(scratch_bytes);
    p.scratch = scratch.get();
    p.scratch_bytes = scratch_bytes;
    if (!accumulate) {
      // Poison the product columns only: unwritten outputs stay NaN.
      std::vector<float> poisoned(residual);
      for (int32_t t = 0; t < m; ++t) {
        for (int64_t r = 0; r < s.rows; ++r) poisoned[t * y_stride + r] = std::nanf("");
      }
      y.upload(poisoned);
    }
    const Status status = path == Path::kSmall      ? launch_matmul_small_m(p, nullptr)
                          : path == Path::kDispatch ? launch_matmul(p, nullptr)
                                                    : launch_matmul_wide(p, nullptr);
    ASSERT_TRUE(status.ok()) << status.to_string();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<float> out = y.download();
    for (int32_t t = 0; t < m; ++t) {
      for (int64_t r = s.rows; r < y_stride; ++r) {
        ASSERT_EQ(out[t * y_stride + r], residual[t * y_stride + r]) << "padding written";
      }
    }
    EXPECT_TRUE(testing::near_relative("matmul", testing::compact_rows(out, m, y_stride, s.rows),
                                       ref, tolerance));
  }

  cublasHandle_t cublas_ = nullptr;
  DeviceArray<uint8_t> workspace_;
};

// Fast layouts (K a multiple of 4 / 256) and the generic GGUF-layout kernel (other K).
const Shape kShapes[] = {
    {TensorType::kF32, 37, 68},     {TensorType::kF32, 33, 66},    {TensorType::kF16, 131, 260},
    {TensorType::kF16, 40, 130},    {TensorType::kBF16, 131, 260}, {TensorType::kBF16, 9, 2050},
    {TensorType::kQ8_0, 67, 512},   {TensorType::kQ8_0, 67, 96},   {TensorType::kQ4_0, 67, 1280},
    {TensorType::kQ4_0, 67, 160},   {TensorType::kQ4_K, 45, 768},  {TensorType::kQ6_K, 45, 1792},
    {TensorType::kQ4_0, 5, 14336},  {TensorType::kQ8_0, 3, 4096},  {TensorType::kQ4_0, 8200, 256},
    {TensorType::kQ8_0, 8200, 256},
};

TEST_F(MatmulKernelTest, SmallMPathMatchesTheCpuForEveryTypeAndTokenCount) {
  for (const Shape& s : kShapes) {
    for (const int32_t m : {1, 2, 3, 5, 8}) expect_matmul(s, m, Path::kSmall, false, 1e-5);
  }
}

TEST_F(MatmulKernelTest, SmallMPathAddsIntoTheResidual) {
  expect_matmul({TensorType::kQ4_0, 67, 1280}, 3, Path::kSmall, true, 1e-5);
  expect_matmul({TensorType::kBF16, 131, 260}, 1, Path::kSmall, true, 1e-5);
  expect_matmul({TensorType::kF32, 33, 66}, 2, Path::kSmall, true, 1e-5);
}

TEST_F(MatmulKernelTest, WidePathMatchesTheCpu) {
  for (const Shape& s : kShapes) {
    // f32 stays f32 (no TF32); 16-bit operands cost about 1e-3 relative.
    const double tolerance = s.type == TensorType::kF32 ? 1e-5 : 1e-2;
    for (const int32_t m : {9, 40}) expect_matmul(s, m, Path::kWide, false, tolerance);
  }
  expect_matmul({TensorType::kQ4_K, 45, 768}, 17, Path::kWide, true, 1e-2);
  expect_matmul({TensorType::kF32, 37, 68}, 64, Path::kWide, true, 1e-5);
}

TEST_F(MatmulKernelTest, WidePathUsesAResidentBf16Copy) {
  expect_matmul({TensorType::kQ4_0, 67, 1280}, 49, Path::kWideWithCopy, false, 1e-2);
  expect_matmul({TensorType::kQ8_0, 67, 1280}, 33, Path::kWideWithCopy, true, 1e-2);
  expect_matmul({TensorType::kQ6_K, 45, 1792}, 12, Path::kWideWithCopy, true, 1e-2);
}

TEST_F(MatmulKernelTest, DispatchKeepsTheExactPathUpToFourQuantizedTwo16BitAndEightF32Tokens) {
  // The small-M path is exact f32 (1e-5); beyond small_m_max_tokens the wide path rounds the
  // activations to bf16 (1e-2).
  EXPECT_EQ(small_m_max_tokens(TensorType::kQ4_0), 4);
  EXPECT_EQ(small_m_max_tokens(TensorType::kBF16), 2);
  EXPECT_EQ(small_m_max_tokens(TensorType::kF32), 8);
  expect_matmul({TensorType::kQ4_0, 67, 1280}, 4, Path::kDispatch, false, 1e-5);
  expect_matmul({TensorType::kQ8_0, 67, 96}, 5, Path::kDispatch, true, 1e-2);
  expect_matmul({TensorType::kBF16, 131, 260}, 2, Path::kDispatch, false, 1e-5);
  expect_matmul({TensorType::kF16, 131, 260}, 3, Path::kDispatch, false, 1e-2);
  expect_matmul({TensorType::kBF16, 131, 260}, 20, Path::kDispatch, false, 1e-2);
  expect_matmul({TensorType::kF32, 67, 96}, 8, Path::kDispatch, true, 1e-5);
}

TEST_F(MatmulKernelTest, WidePathDequantizesLargeWeightsTileByTile) {
  // 16384 columns: 4096-row tiles, so 4200 rows take two tiles (Q4_K: Q4_0 and Q8_0 up to 128
  // tokens take the fused product instead).
  expect_matmul({TensorType::kQ4_K, 4200, 16384}, 9, Path::kWide, false, 1e-2);
  expect_matmul({TensorType::kQ4_0, 300, 2048}, 257, Path::kWide, false, 1e-2);
  // Q8_0 / Q4_0 past the fused product's 128 tokens: tiles too (the dispatch picks them).
  expect_matmul({TensorType::kQ4_0, 300, 2048}, 129, Path::kDispatch, true, 1e-2);
  expect_matmul({TensorType::kQ8_0, 200, 4096}, 256, Path::kDispatch, false, 1e-2);
}

TEST_F(MatmulKernelTest, FusedQuantizedProductMatchesTheCpu) {
  // Interleaved Q4_0 / Q8_0 read directly by the tensor-core kernel: 16- and 32-token blocks
  // (partial and full), one and several 64-token blocks, rows that are no multiple of 8 or 128,
  // column splits (few row blocks) and one split (many), and the residual add.
  const Shape shapes[] = {{TensorType::kQ4_0, 300, 4096},
                          {TensorType::kQ8_0, 200, 2048},
                          {TensorType::kQ4_0, 2051, 512},
                          {TensorType::kQ8_0, 8200, 256}};
  for (const Shape& s : shapes) {
    ASSERT_EQ(device_weight_layout(s.type, s.cols), WeightLayout::kInterleaved);
    for (const int32_t m : {5, 16, 17, 32, 64, 120}) expect_matmul(s, m, Path::kWide, false, 1e-2);
    expect_matmul(s, 77, Path::kWide, true, 1e-2);
    expect_matmul(s, 7, Path::kWide, true, 1e-2);
  }
  expect_matmul({TensorType::kQ4_0, 160, 1024}, 128, Path::kWide, true, 1e-2);
  // Split counts whose slots do not divide evenly among a cluster's blocks (3, 5 and 7 spans).
  expect_matmul({TensorType::kQ4_0, 130, 768}, 40, Path::kWide, true, 1e-2);
  expect_matmul({TensorType::kQ8_0, 67, 1280}, 17, Path::kWide, false, 1e-2);
  expect_matmul({TensorType::kQ4_0, 45, 1792}, 9, Path::kWide, true, 1e-2);
}

TEST_F(MatmulKernelTest, WideProductsTakeABf16InputFromTheKernelBeforeToTheSameBits) {
  // x rounded to bf16 on the host and placed in the order the product takes
  // (testing::bf16_in_order: the fused wide product's, or as is for cuBLAS): the product with it
  // and the product that rounds (and permutes) x itself write the same bits.
  struct Case {
    Shape shape;
    int32_t m;
    bool with_copy;  // a resident bf16 copy of the quantized weight (cuBLAS)
    WideOrder order;
  };
  const Case cases[] = {
      {{TensorType::kQ4_0, 300, 4096}, 5, false, WideOrder::kFused},
      {{TensorType::kQ4_0, 300, 4096}, 64, false, WideOrder::kFused},
      {{TensorType::kQ8_0, 200, 2048}, 17, false, WideOrder::kFused},
      {{TensorType::kQ8_0, 200, 2048}, 120, false, WideOrder::kFused},
      {{TensorType::kBF16, 200, 520}, 3, false, WideOrder::kNatural},
      {{TensorType::kBF16, 200, 520}, 64, false, WideOrder::kNatural},
      {{TensorType::kQ4_0, 300, 2048}, 129, false, WideOrder::kNatural},  // dequantized tiles
      {{TensorType::kQ8_0, 200, 2048}, 200, false, WideOrder::kNatural},
      {{TensorType::kQ8_0, 200, 2048}, 20, true, WideOrder::kFused},  // a copy, but few tokens
      {{TensorType::kQ8_0, 200, 2048}, 40, true, WideOrder::kNatural},
  };
  for (const Case& c : cases) {
    const Shape& s = c.shape;
    SCOPED_TRACE(name(s) + " M=" + std::to_string(c.m) + (c.with_copy ? " with copy" : ""));
    const std::vector<uint8_t> gguf = testing::random_gguf_rows(s.type, s.rows, s.cols, 74);
    const testing::UploadedWeight w = testing::upload_weight(s.type, s.rows, s.cols, gguf);
    DeviceArray<uint16_t> copy;
    if (c.with_copy) copy = bf16_copy(w.weight);
    ASSERT_EQ(matmul_wide_input_order(w.weight, c.m, c.with_copy), c.order);
    const std::vector<float> x = random_floats(static_cast<size_t>(c.m * s.cols), 75);
    const std::vector<uint16_t> x_wide = testing::bf16_in_order(x, c.m, s.cols, s.cols, c.order);
    DeviceArray<float> x_dev(x);
    DeviceArray<uint16_t> x_wide_dev(x_wide);
    const std::vector<float> residual = random_floats(static_cast<size_t>(c.m * s.rows), 76);
    std::vector<float> outputs[2];
    for (const bool wide : {false, true}) {
      DeviceArray<float> y(residual);
      MatmulParams p;
      p.w = w.weight;
      p.x = wide ? nullptr : x_dev.get();
      p.x_stride = s.cols;
      p.x_wide = wide ? x_wide_dev.get() : nullptr;
      p.x_wide_order = c.order;
      p.num_tokens = c.m;
      p.y = y.get();
      p.y_stride = s.rows;
      p.accumulate = true;
      p.w_bf16 = c.with_copy ? copy.get() : nullptr;
      p.cublas = cublas_;
      const size_t scratch_bytes = matmul_wide_scratch_bytes(p.w, c.m);
      DeviceArray<uint8_t> scratch(scratch_bytes);
      p.scratch = scratch.get();
      p.scratch_bytes = scratch_bytes;
      const Status status = launch_matmul(p, nullptr);
      ASSERT_TRUE(status.ok()) << status.to_string();
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      outputs[wide ? 1 : 0] = y.download();
    }
    EXPECT_EQ(std::memcmp(outputs[0].data(), outputs[1].data(), outputs[0].size() * 4), 0);
    EXPECT_NE(outputs[1], residual) << "y not written";
  }
}

TEST_F(MatmulKernelTest, ABf16InputIsRefusedInAnOrderTheProductDoesNotTake) {
  const std::vector<uint8_t> gguf = testing::random_gguf_rows(TensorType::kQ4_0, 64, 512, 77);
  const testing::UploadedWeight q4 = testing::upload_weight(TensorType::kQ4_0, 64, 512, gguf);
  DeviceArray<uint16_t> x_wide(static_cast<size_t>(512 * 300));
  x_wide.poison();
  DeviceArray<float> y(static_cast<size_t>(64 * 300));
  MatmulParams p;
  p.w = q4.weight;
  p.x_stride = 512;
  p.x_wide = x_wide.get();
  p.y = y.get();
  p.y_stride = 64;
  p.cublas = cublas_;
  const size_t scratch_bytes = matmul_wide_scratch_bytes(p.w, 300);
  DeviceArray<uint8_t> scratch(scratch_bytes);
  p.scratch = scratch.get();
  p.scratch_bytes = scratch_bytes;
  // The small-M path (3 tokens) reads f32 x only.
  p.num_tokens = 3;
  EXPECT_EQ(matmul_wide_input_order(p.w, 3, false), std::nullopt);
  for (const WideOrder order : {WideOrder::kFused, WideOrder::kNatural}) {
    p.x_wide_order = order;
    EXPECT_EQ(launch_matmul(p, nullptr).code(), StatusCode::kInvalidArgument);
  }
  // The fused product (17 tokens; 128, and 48 with a resident copy) takes its own order; cuBLAS
  // (129 and 257 tokens: dequantized tiles; 49 with a resident copy) the natural one.
  const struct {
    int32_t m;
    bool with_copy;
    WideOrder order;
  } takes[] = {{17, false, WideOrder::kFused},    {128, false, WideOrder::kFused},
               {48, true, WideOrder::kFused},     {49, true, WideOrder::kNatural},
               {129, false, WideOrder::kNatural}, {257, false, WideOrder::kNatural}};
  for (const auto& t : takes) {
    EXPECT_EQ(matmul_wide_input_order(p.w, t.m, t.with_copy), t.order) << "M=" << t.m;
  }
  p.num_tokens = 129;
  p.x_wide_order = WideOrder::kFused;
  EXPECT_EQ(launch_matmul(p, nullptr).code(), StatusCode::kInvalidArgument);
  p.num_tokens = 17;
  p.x_wide_order = WideOrder::kNatural;
  EXPECT_EQ(launch_matmul(p, nullptr).code(), StatusCode::kInvalidArgument);
  p.x_wide_order = WideOrder::kFused;
  EXPECT_EQ(launch_matmul_small_m(p, nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(launch_matmul(p, nullptr).ok());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  // F16 and F32 weights round x themselves (to f16) or read it as f32.
  for (const TensorType type : {TensorType::kF16, TensorType::kF32}) {
    const std::vector<uint8_t> rows = testing::random_gguf_rows(type, 64, 512, 78);
    const testing::UploadedWeight w = testing::upload_weight(type, 64, 512, rows);
    EXPECT_EQ(matmul_wide_input_order(w.weight, 64, false), std::nullopt);
    p.w = w.weight;
    p.num_tokens = 64;
    p.x_wide_order = WideOrder::kNatural;
    EXPECT_EQ(launch_matmul(p, nullptr).code(), StatusCode::kInvalidArgument)
        << tensor_type_name(type);
  }
}

TEST_F(MatmulKernelTest, DequantizeToBf16RoundsTheCpuValues) {
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(name(s));
    const std::vector<uint8_t> gguf = testing::random_gguf_rows(s.type, s.rows, s.cols, 64);
    const std::vector<float> values = testing::dequantize_rows(s.type, s.rows, s.cols, gguf);
    const testing::UploadedWeight w = testing::upload_weight(s.type, s.rows, s.cols, gguf);
    const int64_t begin = s.rows / 3;
    const int64_t count = s.rows - begin;
    DeviceArray<uint16_t> out(static_cast<size_t>(count * s.cols));
    out.poison();
    DequantizeParams p;
    p.w = w.weight;
    p.row_begin = begin;
    p.num_rows = count;
    p.out = out.get();
    ASSERT_TRUE(launch_dequantize_bf16(p, nullptr).ok());
    const std::vector<uint16_t> got = out.download();
    for (int64_t i = 0; i < count * s.cols; ++i) {
      ASSERT_EQ(got[i], f32_to_bf16(values[begin * s.cols + i])) << "element " << i;
    }
  }
}

// int8 activations: the GPU quantization equals the host's byte for byte, and the dp4a product
// equals the product of the quantized activations (1e-5) and the f32 product within their
// rounding (2e-2), through the small-M path at 1 to 8 tokens.
void expect_int8_activation_product(const Shape& s, int32_t m) {
  SCOPED_TRACE(name(s) + " int8 activations M=" + std::to_string(m));
  const int64_t k = s.cols;
  const int64_t x_stride = k + 4;
  const std::vector<uint8_t> gguf = testing::random_gguf_rows(s.type, s.rows, k, 71);
  const std::vector<float> w = testing::dequantize_rows(s.type, s.rows, k, gguf);
  const std::vector<float> x = random_floats(static_cast<size_t>(m * x_stride), 72);
  const testing::HostQ8Rows xq = testing::quantize_rows_q8(x, m, k, x_stride);
  std::vector<float> exact(static_cast<size_t>(m * s.rows));
  std::vector<float> f32(exact.size());
  for (int32_t t = 0; t < m; ++t) {
    for (int64_t r = 0; r < s.rows; ++r) {
      double a = 0.0;
      double b = 0.0;
      for (int64_t e = 0; e < k; ++e) {
        a += static_cast<double>(w[r * k + e]) * xq.value(t, e);
        b += static_cast<double>(w[r * k + e]) * x[t * x_stride + e];
      }
      exact[t * s.rows + r] = static_cast<float>(a);
      f32[t * s.rows + r] = static_cast<float>(b);
    }
  }

  const testing::UploadedWeight w_dev = testing::upload_weight(s.type, s.rows, k, gguf);
  DeviceArray<float> x_dev(x);
  DeviceArray<int8_t> xq_dev(xq.q.size());
  DeviceArray<float> xs_dev(xq.scales.size());
  DeviceArray<float> y(static_cast<size_t>(m * s.rows));
  xq_dev.poison();
  xs_dev.poison();
  QuantizeActivationsParams qp;
  qp.num_tokens = m;
  qp.num_cols = k;
  qp.x = x_dev.get();
  qp.x_stride = x_stride;
  qp.q = xq_dev.get();
  qp.scales = xs_dev.get();
  ASSERT_TRUE(launch_quantize_activations(qp, nullptr).ok());
  EXPECT_EQ(xq_dev.download(), xq.q) << "int8 activations differ from the host's";
  EXPECT_EQ(xs_dev.download(), xq.scales) << "activation scales differ from the host's";

  MatmulParams p;
  p.w = w_dev.weight;
  p.x = x_dev.get();
  p.x_stride = x_stride;
  p.x_q8 = xq_dev.get();
  p.x_q8_scales = xs_dev.get();
  p.num_tokens = m;
  p.y = y.get();
  p.y_stride = s.rows;
  y.poison();
  const Status status = launch_matmul_small_m(p, nullptr);
  ASSERT_TRUE(status.ok()) << status.to_string();
  const std::vector<float> got = y.download();
  EXPECT_TRUE(testing::near_relative("vs quantized activations", got, exact, 1e-5));
  EXPECT_TRUE(testing::near_relative("vs f32 activations", got, f32, 2e-2));
}

TEST_F(MatmulKernelTest, Int8ActivationsGiveTheQuantizedProduct) {
  const Shape shapes[] = {{TensorType::kQ8_0, 67, 512},
                          {TensorType::kQ4_0, 67, 1280},
                          {TensorType::kQ4_0, 8200, 256},
                          {TensorType::kQ8_0, 5, 4096}};
  for (const Shape& s : shapes) {
    for (const int32_t m : {1, 3, 8}) expect_int8_activation_product(s, m);
  }
}

TEST_F(MatmulKernelTest, RefusesMismatchedShapesAndMissingScratch) {
  DeviceArray<uint8_t> w(device_row_bytes(TensorType::kQ4_0, 256) * 4);
  DeviceArray<float> x(64 * 256);
  DeviceArray<float> y(64 * 4);
  MatmulParams p;
  p.w = make_device_weight(w.get(), TensorType::kQ4_0, 4, 256);
  p.x = x.get();
  p.x_stride = 100;  // shorter than K
  p.num_tokens = 2;
  p.y = y.get();
  p.y_stride = 4;
  EXPECT_EQ(launch_matmul(p, nullptr).code(), StatusCode::kInvalidArgument);
  p.x_stride = 256;
  p.num_tokens = 9;  // wide, without scratch
  p.cublas = cublas_;
  EXPECT_EQ(launch_matmul(p, nullptr).code(), StatusCode::kInvalidArgument);
  p.w.type = TensorType::kQ5_K;
  EXPECT_EQ(launch_matmul(p, nullptr).code(), StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace cellm::kernels
