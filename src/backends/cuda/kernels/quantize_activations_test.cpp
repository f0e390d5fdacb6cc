// Parity of quantize_activations' post-norm join (QuantizeActivationsParams::add: a block's output
// normed by its post norm joins the residual, then the joined row is normed and quantized) with the
// CPU ops it replaces: cpu_rms_norm of the block output, the add, cpu_rms_norm of the sum and the
// host's int8 quantization — the joined rows bit for bit, the int8 values, scales and block sums
// equal; with and without a gather, a norm, per-256 scales; rows whose shares the kernel holds in
// registers (up to 4,096 and 8,192 floats, 16-byte aligned) and rows it reads twice (longer, or
// strides that are not a multiple of four floats); and refused arguments. (Plain, normed
// and SwiGLU quantizations are tested with the products that take them, decode_matmul_test.cpp.)
#include "backends/cuda/kernels/quantize_activations.cuh"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backends/cpu/cpu_ops.h"
#include "backends/cuda/kernels/kernel_test_support.h"

namespace cellm::kernels {
namespace {

using testing::DeviceArray;
using testing::random_floats;

constexpr float kEps = 1e-6f;

// The residual rows, the block output rows and the norms of one case; token t reads source row
// x_rows[t] of both x and add when gathered, else row t.
struct JoinCase {
  int64_t cols = 0;
  int32_t num_tokens = 0;
  bool gathered = false;
  bool normed = false;
  bool per_256 = false;
  bool unaligned = false;
  int64_t x_stride = 0;
  int64_t add_stride = 0;
  std::vector<float> x;         // [num_src, x_stride]
  std::vector<float> add;       // [num_src, add_stride]
  std::vector<float> add_norm;  // [cols]
  std::vector<float> norm;      // [cols]
  std::vector<int32_t> rows;    // [num_tokens]
};

JoinCase make_case(int64_t cols, int32_t num_tokens, bool gathered, bool normed, bool per_256,
                   bool unaligned, uint32_t seed) {
  JoinCase c;
  c.cols = cols;
  c.num_tokens = num_tokens;
  c.gathered = gathered;
  c.normed = normed;
  c.per_256 = per_256;
  c.unaligned = unaligned;
  c.x_stride = cols + (unaligned ? 5 : 4);
  c.add_stride = cols + (unaligned ? 13 : 12);
  const int32_t num_src = num_tokens + 3;
  c.x = random_floats(static_cast<size_t>(num_src * c.x_stride), seed, 3.0f);
  // Block outputs far larger than the residual, as a product's rows are before their norm.
  c.add = random_floats(static_cast<size_t>(num_src * c.add_stride), seed + 1, 40.0f);
  c.add_norm = random_floats(static_cast<size_t>(cols), seed + 2, 2.0f);
  c.norm = random_floats(static_cast<size_t>(cols), seed + 3);
  for (int32_t t = 0; t < num_tokens; ++t) c.rows.push_back(gathered ? (2 * t + 3) % num_src : t);
  return c;
}

// The host's joined rows [num_tokens, cols]: x + cpu_rms_norm(add) · add_norm, as the CPU forward
// computes a post-normed block's add.
std::vector<float> host_joined(const JoinCase& c) {
  std::vector<float> joined;
  for (const int32_t row : c.rows) {
    std::vector<float> normed(c.add.begin() + row * c.add_stride,
                              c.add.begin() + row * c.add_stride + c.cols);
    cpu_rms_norm(normed.data(), c.add_norm.data(), 1, c.cols, kEps, normed.data());
    std::vector<float> x(c.x.begin() + row * c.x_stride, c.x.begin() + row * c.x_stride + c.cols);
    cpu_add(x.data(), normed.data(), c.cols);
    joined.insert(joined.end(), x.begin(), x.end());
  }
  return joined;
}

TEST(QuantizeActivationsTest, ABlockOutputJoinsTheResidualNormedAndTheSumIsQuantized) {
  CELLM_REQUIRE_DEVICE();
  const struct {
    int64_t cols;
    int32_t num_tokens;
    bool gathered, normed, per_256, unaligned;
  } shapes[] = {{2560, 1, false, true, false, false},  {2560, 3, true, true, false, false},
                {1280, 4, false, false, false, false}, {1280, 2, true, true, true, false},
                {256, 1, true, false, true, false},    {5376, 2, true, true, false, false},
                {4096, 1, false, true, false, false},  {8192, 1, false, true, true, false},
                {8448, 2, true, true, false, false},   {2560, 2, true, true, false, true},
                {3840, 1, false, false, false, true}};
  uint32_t seed = 300;
  for (const auto& s : shapes) {
    SCOPED_TRACE(std::to_string(s.num_tokens) + " x " + std::to_string(s.cols) +
                 (s.gathered ? " gathered" : "") + (s.normed ? " normed" : "") +
                 (s.per_256 ? " per 256" : "") + (s.unaligned ? " unaligned" : ""));
    const JoinCase c =
        make_case(s.cols, s.num_tokens, s.gathered, s.normed, s.per_256, s.unaligned, seed);
    seed += 10;
    const std::vector<float> joined = host_joined(c);
    std::vector<float> quantized = joined;
    if (c.normed) {
      cpu_rms_norm(quantized.data(), c.norm.data(), c.num_tokens, c.cols, kEps, quantized.data());
    }
    const testing::HostQ8Rows want =
        testing::quantize_rows_q8(quantized, c.num_tokens, c.cols, c.cols, c.per_256);

    DeviceArray<float> x(c.x);
    DeviceArray<float> add(c.add);
    DeviceArray<float> add_norm(c.add_norm);
    DeviceArray<float> norm(c.norm);
    DeviceArray<int32_t> rows(c.rows);
    DeviceArray<float> x_out(joined.size());
    DeviceArray<int8_t> q(want.q.size());
    DeviceArray<float> scales(want.scales.size());
    DeviceArray<int32_t> sums(want.sums.size());
    x_out.poison();
    q.poison();
    scales.poison();
    sums.poison();
    QuantizeActivationsParams p;
    p.num_tokens = c.num_tokens;
    p.num_cols = c.cols;
    p.x = x.get();
    p.x_stride = c.x_stride;
    p.x_rows = c.gathered ? rows.get() : nullptr;
    p.norm_weight = c.normed ? norm.get() : nullptr;
    p.norm_eps = kEps;
    p.add = add.get();
    p.add_stride = c.add_stride;
    p.add_norm_weight = add_norm.get();
    p.x_out = x_out.get();
    p.q = q.get();
    p.scales = scales.get();
    p.sums = sums.get();
    p.per_256 = c.per_256;
    ASSERT_TRUE(launch_quantize_activations(p, nullptr).ok());
    EXPECT_EQ(x_out.download(), joined) << "the joined residual differs from the host's";
    EXPECT_EQ(q.download(), want.q) << "int8 activations differ from the host's";
    EXPECT_EQ(scales.download(), want.scales) << "activation scales differ from the host's";
    EXPECT_EQ(sums.download(), want.sums) << "block sums differ from the host's";
    EXPECT_EQ(x.download(), c.x) << "the residual read must stay as it was";
  }
}

TEST(QuantizeActivationsTest, RefusesAJoinWithoutItsNormOrOutputOrWithSwiglu) {
  CELLM_REQUIRE_DEVICE();
  const int64_t cols = 256;
  DeviceArray<float> x(random_floats(2 * cols, 401));
  DeviceArray<float> add(random_floats(2 * cols, 402));
  DeviceArray<float> add_norm(random_floats(cols, 403));
  DeviceArray<float> x_out(2 * cols);
  DeviceArray<int8_t> q(2 * cols);
  DeviceArray<float> scales(2 * cols / 32);
  QuantizeActivationsParams p;
  p.num_tokens = 2;
  p.num_cols = cols;
  p.x = x.get();
  p.x_stride = cols;
  p.add = add.get();
  p.add_stride = cols;
  p.add_norm_weight = add_norm.get();
  p.x_out = x_out.get();
  p.q = q.get();
  p.scales = scales.get();
  EXPECT_TRUE(launch_quantize_activations(p, nullptr).ok());
  QuantizeActivationsParams bad = p;
  bad.add_norm_weight = nullptr;
  EXPECT_EQ(launch_quantize_activations(bad, nullptr).code(), StatusCode::kInvalidArgument);
  bad = p;
  bad.x_out = nullptr;
  EXPECT_EQ(launch_quantize_activations(bad, nullptr).code(), StatusCode::kInvalidArgument);
  bad = p;
  bad.x_out = x.get();  // in place: other CTAs of the row still read x
  EXPECT_EQ(launch_quantize_activations(bad, nullptr).code(), StatusCode::kInvalidArgument);
  bad = p;
  bad.add_stride = cols - 32;
  EXPECT_EQ(launch_quantize_activations(bad, nullptr).code(), StatusCode::kInvalidArgument);
  bad = p;
  bad.up = add.get();
  EXPECT_EQ(launch_quantize_activations(bad, nullptr).code(), StatusCode::kInvalidArgument);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

}  // namespace
}  // namespace cellm::kernels
