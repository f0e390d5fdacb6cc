// Parity of the fused decode product (decode_matmul.cuh) with the CPU ops it replaces: the
// RMSNorm and row-gather prologue (cpu_rms_norm then cpu_matmul) for every weight type and token
// count, bias and residual add, the SwiGLU / GeGLU epilogue (cpu_gated_mul), the RoPE + K/V cache
// epilogue (cpu_rope, cells of f32 and bf16 caches, untouched rows left alone; the angles computed
// or read from launch_rope_table's per-step table, the same bits), int8 activations quantized from
// normed, gathered rows (aligned or not), launches chained through a captured graph (programmatic
// dependent launch), and refused arguments. (The split argmax that ends a decode step is tested
// with the other argmax in elementwise_test.cpp.)
#include "backends/cuda/kernels/decode_matmul.cuh"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "backends/cpu/cpu_ops.h"
#include "backends/cuda/kernels/kernel_test_support.h"
#include "backends/cuda/kernels/quantize_activations.cuh"
#include "backends/cuda/kernels/rope_kv.cuh"
#include "backends/cuda/kernels/rope_kv_test_case.h"
#include "backends/cuda/kernels/swiglu.cuh"

namespace cellm::kernels {
namespace {

using testing::DeviceArray;
using testing::random_floats;

constexpr float kEps = 1e-5f;

// A random weight: GGUF bytes for the CPU, the device layout uploaded for the GPU.
struct Weight {
  TensorType type;
  int64_t rows;
  int64_t cols;
  std::vector<uint8_t> gguf;
  DeviceArray<uint8_t> bytes;
  DeviceWeight device;
};

Weight make_weight(TensorType type, int64_t rows, int64_t cols, uint32_t seed) {
  std::vector<uint8_t> gguf = testing::random_gguf_rows(type, rows, cols, seed);
  testing::UploadedWeight upload = testing::upload_weight(type, rows, cols, gguf);
  return Weight{type, rows, cols, std::move(gguf), std::move(upload.bytes), upload.weight};
}

std::string name(const Weight& w) {
  return std::string(tensor_type_name(w.type)) + " [" + std::to_string(w.rows) + ", " +
         std::to_string(w.cols) + "]";
}

// cpu_matmul of `m` compact rows of x.
std::vector<float> cpu_product(const Weight& w, const std::vector<float>& x, int32_t m) {
  std::vector<float> out(static_cast<size_t>(m * w.rows));
  cpu_matmul(testing::weight_view(w.type, w.rows, w.cols, w.gguf), x.data(), m, out.data(),
             nullptr);
  return out;
}

// Source rows and which of them each token reads: token t reads row (3t + 1) mod rows.
struct GatheredInput {
  int64_t stride = 0;
  std::vector<float> x;         // [num_src_rows, stride]
  std::vector<int32_t> rows;    // [m]
  std::vector<float> gathered;  // [m, K] compact, normed when a norm is given
  std::vector<float> norm;      // [K]
};

GatheredInput gathered_input(int64_t k, int32_t m, uint32_t seed, bool normed) {
  GatheredInput in;
  const int32_t num_src = m + 4;
  in.stride = k + 4;
  in.x = random_floats(static_cast<size_t>(num_src * in.stride), seed);
  in.norm = random_floats(static_cast<size_t>(k), seed + 1);
  for (int32_t t = 0; t < m; ++t) {
    const int32_t row = (3 * t + 1) % num_src;
    in.rows.push_back(row);
    in.gathered.insert(in.gathered.end(), in.x.begin() + row * in.stride,
                       in.x.begin() + row * in.stride + k);
  }
  if (normed) cpu_rms_norm(in.gathered.data(), in.norm.data(), m, k, kEps, in.gathered.data());
  return in;
}

// A GatheredInput on the device.
struct DeviceInput {
  explicit DeviceInput(const GatheredInput& in) : x(in.x), rows(in.rows), norm(in.norm) {}
  DeviceArray<float> x;
  DeviceArray<int32_t> rows;
  DeviceArray<float> norm;
};

// The product of `m` gathered rows of `in` (normed when `normed`) with w, into y (poisoned here).
DecodeMatmulParams gathered_product(const Weight& w, const GatheredInput& in,
                                    const DeviceInput& dev, int32_t m, bool normed,
                                    DeviceArray<float>& y, int64_t y_stride) {
  y.poison();
  DecodeMatmulParams p;
  p.w = w.device;
  p.num_tokens = m;
  p.x = dev.x.get();
  p.x_stride = in.stride;
  p.x_rows = dev.rows.get();
  p.norm_weight = normed ? dev.norm.get() : nullptr;
  p.norm_eps = kEps;
  p.y = y.get();
  p.y_stride = y_stride;
  return p;
}

TEST(DecodeMatmulTest, NormAndRowGatherMatchRmsNormThenTheProductForEveryType) {
  CELLM_REQUIRE_DEVICE();
  const struct {
    TensorType type;
    int64_t rows, cols;
  } shapes[] = {{TensorType::kF32, 37, 68},    {TensorType::kF16, 41, 264},
                {TensorType::kBF16, 131, 520}, {TensorType::kQ8_0, 67, 512},
                {TensorType::kQ4_0, 66, 1280}, {TensorType::kQ4_K, 45, 768},
                {TensorType::kQ6_K, 45, 1792}};
  for (const auto& s : shapes) {
    const Weight w = make_weight(s.type, s.rows, s.cols, 11);
    ASSERT_TRUE(decode_matmul_supports(w.device)) << name(w);
    for (const int32_t m : {1, 3, 8}) {
      SCOPED_TRACE(name(w) + " M=" + std::to_string(m));
      const GatheredInput in = gathered_input(s.cols, m, 12, true);
      const std::vector<float> ref = cpu_product(w, in.gathered, m);
      const DeviceInput dev(in);
      const int64_t y_stride = s.rows + 3;
      DeviceArray<float> y(static_cast<size_t>(m * y_stride));
      const DecodeMatmulParams p = gathered_product(w, in, dev, m, true, y, y_stride);
      CELLM_ASSERT_OK(launch_decode_matmul(p, nullptr));
      EXPECT_TRUE(testing::near_relative(
          "normed product", testing::compact_rows(y.download(), m, y_stride, s.rows), ref, 1e-5));
    }
  }
}

TEST(DecodeMatmulTest, StoreAddsTheBiasAndAccumulatesIntoTheResidual) {
  CELLM_REQUIRE_DEVICE();
  const Weight w = make_weight(TensorType::kBF16, 131, 520, 21);
  const int32_t m = 2;
  const std::vector<float> x = random_floats(static_cast<size_t>(m * w.cols), 22);
  const std::vector<float> bias = random_floats(static_cast<size_t>(w.rows), 23);
  const std::vector<float> residual = random_floats(static_cast<size_t>(m * w.rows), 24);
  std::vector<float> ref = cpu_product(w, x, m);
  for (int32_t t = 0; t < m; ++t) {
    for (int64_t r = 0; r < w.rows; ++r) {
      ref[t * w.rows + r] = residual[t * w.rows + r] + (ref[t * w.rows + r] + bias[r]);
    }
  }
  DeviceArray<float> x_dev(x);
  DeviceArray<float> bias_dev(bias);
  DeviceArray<float> y(residual);
  DecodeMatmulParams p;
  p.w = w.device;
  p.num_tokens = m;
  p.x = x_dev.get();
  p.x_stride = w.cols;
  p.bias = bias_dev.get();
  p.y = y.get();
  p.y_stride = w.rows;
  p.accumulate = true;
  CELLM_ASSERT_OK(launch_decode_matmul(p, nullptr));
  EXPECT_TRUE(testing::near_relative("bias + residual", y.download(), ref, 1e-5));
}

TEST(DecodeMatmulTest, SwigluOutputIsSiluOrGeluOfTheGateRowsTimesTheUpRows) {
  CELLM_REQUIRE_DEVICE();
  const struct {
    TensorType type;
    int64_t ffn, cols;
    bool normed;
  } cases[] = {{TensorType::kQ4_0, 97, 512, false},
               {TensorType::kBF16, 130, 264, true},
               {TensorType::kQ8_0, 33, 256, true}};
  for (const auto& c : cases) {
    const Weight w = make_weight(c.type, 2 * c.ffn, c.cols, 31);
    for (const auto& [m, gelu] :
         {std::pair{1, false}, std::pair{5, false}, std::pair{1, true}, std::pair{5, true}}) {
      SCOPED_TRACE(name(w) + " M=" + std::to_string(m) + (gelu ? " GeGLU" : " SwiGLU"));
      const GatheredInput in = gathered_input(c.cols, m, 32, c.normed);
      const std::vector<float> product = cpu_product(w, in.gathered, m);
      std::vector<float> ref(static_cast<size_t>(m * c.ffn));
      for (int32_t t = 0; t < m; ++t) {
        cpu_gated_mul(gelu ? FfnActivation::kGeluTanh : FfnActivation::kSilu,
                      product.data() + t * 2 * c.ffn, product.data() + t * 2 * c.ffn + c.ffn, c.ffn,
                      ref.data() + t * c.ffn);
      }
      const DeviceInput dev(in);
      const int64_t y_stride = c.ffn + 2;
      DeviceArray<float> y(static_cast<size_t>(m * y_stride));
      DecodeMatmulParams p = gathered_product(w, in, dev, m, c.normed, y, y_stride);
      p.output = DecodeOutput::kSwiglu;
      p.gelu_tanh = gelu;
      CELLM_ASSERT_OK(launch_decode_matmul(p, nullptr));
      EXPECT_TRUE(testing::near_relative(
          "swiglu", testing::compact_rows(y.download(), m, y_stride, c.ffn), ref, 1e-5));
    }
  }
}

TEST(DecodeMatmulTest, RopeKvOutputRotatesQAndWritesKAndVIntoTheTokensCells) {
  CELLM_REQUIRE_DEVICE();
  using Case = testing::RopeKvCase;
  const Case c({5, 0, 4095}, {7, 2, 11}, 41);
  const int64_t n = Case::kRows;
  const int64_t k = 256;
  const int32_t m = c.num_tokens();
  const int32_t cache_rows = 13;
  for (const TensorType type : {TensorType::kF32, TensorType::kQ8_0}) {
    for (const KvDtype dtype : {KvDtype::kF32, KvDtype::kBF16}) {
      const Weight w = make_weight(type, n, k, 42);
      SCOPED_TRACE(name(w) + (dtype == KvDtype::kF32 ? " f32 cache" : " bf16 cache"));
      const GatheredInput in = gathered_input(k, m, 43, true);
      const std::vector<float> bias = random_floats(static_cast<size_t>(n), 44);
      std::vector<float> product = cpu_product(w, in.gathered, m);
      for (int32_t t = 0; t < m; ++t) {
        for (int64_t r = 0; r < n; ++r) product[t * n + r] += bias[r];
      }
      const Case::Reference ref = c.reference(product);

      const DeviceInput dev(in);
      DeviceArray<float> bias_dev(bias);
      const size_t elem = dtype == KvDtype::kF32 ? 4 : 2;
      DeviceArray<uint8_t> k_cache(static_cast<size_t>(cache_rows) * Case::kKvWidth * elem);
      DeviceArray<uint8_t> v_cache(static_cast<size_t>(cache_rows) * Case::kVWidth * elem);
      k_cache.poison();
      v_cache.poison();
      const int64_t y_stride = n;  // the q|k|v buffer: only the q columns are written
      DeviceArray<float> y(static_cast<size_t>(m * y_stride));
      DecodeMatmulParams p = gathered_product(w, in, dev, m, true, y, y_stride);
      p.bias = bias_dev.get();
      p.output = DecodeOutput::kRopeKv;
      p.y = y.get();
      p.y_stride = y_stride;
      p.rope = c.output(k_cache.get(), v_cache.get(), dtype);
      CELLM_ASSERT_OK(launch_decode_matmul(p, nullptr));
      EXPECT_TRUE(testing::near_relative(
          "q", testing::compact_rows(y.download(), m, y_stride, Case::kQWidth), ref.q, 1e-5));
      const std::vector<uint8_t> k_bytes = k_cache.download();
      const std::vector<uint8_t> v_bytes = v_cache.download();
      testing::expect_kv_cache_rows(k_bytes, v_bytes, dtype, Case::kKvWidth, Case::kVWidth, c.cells,
                                    ref.k, ref.v);
      // The angles from a per-step table (launch_rope_table): the same bits everywhere.
      DeviceArray<float2> table(static_cast<size_t>(m) * Case::kRotaryDims / 2);
      CELLM_ASSERT_OK(launch_rope_table(c.table_params(table.get()), nullptr));
      const std::vector<float> y_computed = y.download();
      p.rope.cos_sin = table.get();
      y.poison();
      k_cache.poison();
      v_cache.poison();
      CELLM_ASSERT_OK(launch_decode_matmul(p, nullptr));
      EXPECT_TRUE(testing::compact_rows(y.download(), m, y_stride, Case::kQWidth) ==
                  testing::compact_rows(y_computed, m, y_stride, Case::kQWidth))
          << "q differs with the table";
      EXPECT_TRUE(k_cache.download() == k_bytes) << "k cache differs with the table";
      EXPECT_TRUE(v_cache.download() == v_bytes) << "v cache differs with the table";
    }
  }
}

TEST(DecodeMatmulTest, Int8InputQuantizedFromNormedGatheredRowsGivesTheQuantizedProduct) {
  CELLM_REQUIRE_DEVICE();
  for (const TensorType type :
       {TensorType::kQ4_0, TensorType::kQ8_0, TensorType::kQ4_K, TensorType::kQ6_K}) {
    const Weight w = make_weight(type, 67, 1280, 51);
    const int64_t k = w.cols;
    for (const auto& [m, per_256] : {std::pair{1, false}, std::pair{3, false}, std::pair{8, false},
                                     std::pair{1, true}, std::pair{3, true}}) {
      SCOPED_TRACE(name(w) + " M=" + std::to_string(m) + (per_256 ? " per 256" : ""));
      const GatheredInput in = gathered_input(k, m, 52, true);
      // Host quantization of the normed rows, and the products of its values and of the f32 ones.
      const testing::HostQ8Rows xq = testing::quantize_rows_q8(in.gathered, m, k, k, per_256);
      const std::vector<float> values = testing::dequantize_rows(w.type, w.rows, k, w.gguf);
      std::vector<float> exact(static_cast<size_t>(m * w.rows));
      for (int32_t t = 0; t < m; ++t) {
        for (int64_t r = 0; r < w.rows; ++r) {
          double sum = 0.0;
          for (int64_t e = 0; e < k; ++e)
            sum += static_cast<double>(values[r * k + e]) * xq.value(t, e);
          exact[t * w.rows + r] = static_cast<float>(sum);
        }
      }
      const std::vector<float> f32 = cpu_product(w, in.gathered, m);

      const DeviceInput dev(in);
      DeviceArray<int8_t> xq_dev(xq.q.size());
      DeviceArray<float> xs_dev(xq.scales.size());
      DeviceArray<int32_t> sums_dev(xq.sums.size());
      xq_dev.poison();
      xs_dev.poison();
      sums_dev.poison();
      QuantizeActivationsParams q;
      q.num_tokens = m;
      q.num_cols = k;
      q.x = dev.x.get();
      q.x_stride = in.stride;
      q.x_rows = dev.rows.get();
      q.norm_weight = dev.norm.get();
      q.norm_eps = kEps;
      q.q = xq_dev.get();
      q.scales = xs_dev.get();
      q.per_256 = per_256;
      q.sums = sums_dev.get();
      CELLM_ASSERT_OK(launch_quantize_activations(q, nullptr));
      EXPECT_EQ(xq_dev.download(), xq.q) << "int8 activations differ from the host's";
      EXPECT_EQ(xs_dev.download(), xq.scales) << "activation scales differ from the host's";
      EXPECT_EQ(sums_dev.download(), xq.sums) << "block sums differ from the host's";

      DeviceArray<float> y(static_cast<size_t>(m * w.rows));
      y.poison();
      DecodeMatmulParams p;
      p.w = w.device;
      p.num_tokens = m;
      p.x_q8 = xq_dev.get();
      p.x_q8_scales = xs_dev.get();
      p.x_q8_per_256 = per_256;
      p.y = y.get();
      p.y_stride = w.rows;
      if (per_256 && type == TensorType::kQ4_K) {
        EXPECT_FALSE(launch_decode_matmul(p, nullptr).ok()) << "Q4_K per 256 without block sums";
      }
      p.x_q8_sums = sums_dev.get();
      CELLM_ASSERT_OK(launch_decode_matmul(p, nullptr));
      const std::vector<float> got = y.download();
      EXPECT_TRUE(testing::near_relative("vs quantized activations", got, exact, 1e-5));
      EXPECT_TRUE(testing::near_relative("vs f32 activations", got, f32, 2e-2));
    }
  }
}

TEST(DecodeMatmulTest, QuantizeWithANormAlsoReadsRowsThatAreNotSixteenByteAligned) {
  CELLM_REQUIRE_DEVICE();
  // Rows of 257 floats: row 0 is 16-byte aligned (float4 loads), rows 1 and 2 are not.
  const int64_t k = 256;
  const int64_t stride = k + 1;
  const int32_t m = 3;
  const std::vector<float> x = random_floats(static_cast<size_t>(m * stride), 91);
  const std::vector<float> norm = random_floats(static_cast<size_t>(k), 92);
  std::vector<float> normed = testing::compact_rows(x, m, stride, k);
  cpu_rms_norm(normed.data(), norm.data(), m, k, kEps, normed.data());
  const testing::HostQ8Rows want = testing::quantize_rows_q8(normed, m, k, k);
  DeviceArray<float> x_dev(x);
  DeviceArray<float> norm_dev(norm);
  DeviceArray<int8_t> q(want.q.size());
  DeviceArray<float> scales(want.scales.size());
  q.poison();
  scales.poison();
  QuantizeActivationsParams p;
  p.num_tokens = m;
  p.num_cols = k;
  p.x = x_dev.get();
  p.x_stride = stride;
  p.norm_weight = norm_dev.get();
  p.norm_eps = kEps;
  p.q = q.get();
  p.scales = scales.get();
  CELLM_ASSERT_OK(launch_quantize_activations(p, nullptr));
  EXPECT_EQ(q.download(), want.q);
  EXPECT_EQ(scales.download(), want.scales);
}

// The SwiGLU input (gate and up halves of a gate|up product's rows): the values the swiglu kernel
// writes, quantized as the host quantizes them, bit for bit; a gather or norm with it is refused.
TEST(DecodeMatmulTest, QuantizeOfSwigluHalvesQuantizesWhatTheSwigluKernelWrites) {
  CELLM_REQUIRE_DEVICE();
  const int64_t ffn = 512;
  const int32_t m = 5;
  DeviceArray<float> gate_up(random_floats(static_cast<size_t>(m * 2 * ffn), 93, 4.0f));
  DeviceArray<float> act(static_cast<size_t>(m * ffn));
  CELLM_ASSERT_OK(launch_swiglu(swiglu_fused_params(gate_up.get(), m, ffn, act.get()), nullptr));
  const testing::HostQ8Rows want = testing::quantize_rows_q8(act.download(), m, ffn, ffn);
  DeviceArray<int8_t> q(want.q.size());
  DeviceArray<float> scales(want.scales.size());
  q.poison();
  scales.poison();
  QuantizeActivationsParams p;
  p.num_tokens = m;
  p.num_cols = ffn;
  p.x = gate_up.get();
  p.x_stride = 2 * ffn;
  p.up = gate_up.get() + ffn;
  p.q = q.get();
  p.scales = scales.get();
  CELLM_ASSERT_OK(launch_quantize_activations(p, nullptr));
  EXPECT_EQ(q.download(), want.q);
  EXPECT_EQ(scales.download(), want.scales);
  DeviceArray<float> norm(random_floats(static_cast<size_t>(ffn), 94));
  p.norm_weight = norm.get();
  EXPECT_EQ(launch_quantize_activations(p, nullptr).code(), StatusCode::kInvalidArgument);
}

TEST(DecodeMatmulTest, ChainedLaunchesInACapturedGraphSeeEachOthersResults) {
  CELLM_REQUIRE_DEVICE();
  // y1 = W1 · x; y2 = W2 · norm(y1) + residual, three times over (the graph replays), each
  // launch allowed to start before the previous one ends.
  const Weight w1 = make_weight(TensorType::kBF16, 256, 512, 61);
  const Weight w2 = make_weight(TensorType::kQ4_0, 96, 256, 62);
  const int32_t m = 2;
  const std::vector<float> x = random_floats(static_cast<size_t>(m * 512), 63);
  const std::vector<float> norm = random_floats(256, 64);
  const std::vector<float> residual = random_floats(static_cast<size_t>(m * 96), 65);
  std::vector<float> y1 = cpu_product(w1, x, m);
  cpu_rms_norm(y1.data(), norm.data(), m, 256, kEps, y1.data());
  const std::vector<float> product = cpu_product(w2, y1, m);
  std::vector<float> ref(residual);
  for (int rep = 0; rep < 3; ++rep) {
    for (size_t i = 0; i < ref.size(); ++i) ref[i] += product[i];
  }

  DeviceArray<float> x_dev(x);
  DeviceArray<float> norm_dev(norm);
  DeviceArray<float> y1_dev(static_cast<size_t>(m * 256));
  DeviceArray<float> y2_dev(residual);
  y1_dev.poison();
  DecodeMatmulParams first;
  first.w = w1.device;
  first.num_tokens = m;
  first.x = x_dev.get();
  first.x_stride = 512;
  first.y = y1_dev.get();
  first.y_stride = 256;
  DecodeMatmulParams second;
  second.w = w2.device;
  second.num_tokens = m;
  second.x = y1_dev.get();
  second.x_stride = 256;
  second.norm_weight = norm_dev.get();
  second.norm_eps = kEps;
  second.y = y2_dev.get();
  second.y_stride = 96;
  second.accumulate = true;
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  for (int rep = 0; rep < 3; ++rep) {
    CELLM_ASSERT_OK(launch_decode_matmul(first, stream));
    CELLM_ASSERT_OK(launch_decode_matmul(second, stream));
  }
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_TRUE(testing::near_relative("graph chain", y2_dev.download(), ref, 1e-5));
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

TEST(DecodeMatmulTest, RefusesInputsAndOutputsTheKernelsCannotRun) {
  CELLM_REQUIRE_DEVICE();
  const Weight bf16 = make_weight(TensorType::kBF16, 6, 256, 81);
  const Weight odd = make_weight(TensorType::kBF16, 6, 260, 82);  // K % 8 != 0
  DeviceArray<float> x(8 * 512);
  DeviceArray<float> y(8 * 512);
  DeviceArray<int8_t> xq(8 * 512);
  DeviceArray<float> xs(8 * 16);
  DecodeMatmulParams p;
  p.w = bf16.device;
  p.num_tokens = 1;
  p.x = x.get();
  p.x_stride = 256;
  p.y = y.get();
  p.y_stride = 6;
  CELLM_ASSERT_OK(launch_decode_matmul(p, nullptr));
  DecodeMatmulParams bad = p;
  bad.num_tokens = 9;
  EXPECT_EQ(launch_decode_matmul(bad, nullptr).code(), StatusCode::kInvalidArgument);
  bad = p;
  bad.x = nullptr;
  bad.x_q8 = xq.get();  // int8 activations with bf16 weights
  bad.x_q8_scales = xs.get();
  EXPECT_EQ(launch_decode_matmul(bad, nullptr).code(), StatusCode::kInvalidArgument);
  bad = p;
  bad.w = odd.device;
  bad.x_stride = 260;
  EXPECT_FALSE(decode_matmul_supports(odd.device));
  EXPECT_EQ(launch_decode_matmul(bad, nullptr).code(), StatusCode::kInvalidArgument);
  bad = p;
  bad.output = DecodeOutput::kSwiglu;
  bad.accumulate = true;
  EXPECT_EQ(launch_decode_matmul(bad, nullptr).code(), StatusCode::kInvalidArgument);
  bad = p;
  bad.gelu_tanh = true;  // GELU on a plain store
  EXPECT_EQ(launch_decode_matmul(bad, nullptr).code(), StatusCode::kInvalidArgument);
  bad = p;
  bad.output = DecodeOutput::kRopeKv;  // widths that do not add up to N, null caches
  bad.rope.q_width = 4;
  bad.rope.kv_width = 4;
  bad.rope.v_width = 4;
  bad.rope.head_dim = 4;
  EXPECT_EQ(launch_decode_matmul(bad, nullptr).code(), StatusCode::kInvalidArgument);
  bad = p;
  bad.x_stride = 254;
  EXPECT_EQ(launch_decode_matmul(bad, nullptr).code(), StatusCode::kInvalidArgument);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

}  // namespace
}  // namespace cellm::kernels
