// Parity of the row-wise kernels with the CPU oracle: RMSNorm (plain, fused residual add, in
// place, per head, and written as bf16 in the order the next product reads), SwiGLU (separate
// and fused gate|up, and in those orders), row gather, the logit soft cap (gemma2; in place,
// nothing past a row's columns), and argmax (one block per row, and split over blocks as a decode
// step ends). The embedding gather and the random weight initializer: embedding_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "backends/cpu/cpu_ops.h"
#include "backends/cuda/kernels/argmax.cuh"
#include "backends/cuda/kernels/kernel_test_support.h"
#include "backends/cuda/kernels/logit_softcap.cuh"
#include "backends/cuda/kernels/rms_norm.cuh"
#include "backends/cuda/kernels/row_gather.cuh"
#include "backends/cuda/kernels/swiglu.cuh"
#include "backends/cuda/kernels/weight_layout.h"
#include "core/float16.h"

namespace cellm::kernels {
namespace {

using testing::DeviceArray;
using testing::expect_parity;
using testing::random_floats;

TEST(RmsNormKernelTest, PlainFusedAndInPlaceNormsMatchTheCpu) {
  CELLM_REQUIRE_DEVICE();
  // Rows held in registers (up to 4096) and streamed.
  for (const int32_t dim : {64, 1000, 4096, 4097, 9000}) {
    SCOPED_TRACE("dim " + std::to_string(dim));
    const int64_t rows = 5;
    const int64_t stride = dim + 3;
    const float eps = 1e-5f;
    const std::vector<float> x = random_floats(static_cast<size_t>(rows * stride), 41, 3.0f);
    const std::vector<float> add = random_floats(static_cast<size_t>(rows * stride), 42);
    const std::vector<float> w = random_floats(static_cast<size_t>(dim), 43);
    std::vector<float> sum_ref(static_cast<size_t>(rows * dim));
    std::vector<float> plain_ref(sum_ref.size());
    std::vector<float> fused_ref(sum_ref.size());
    for (int64_t r = 0; r < rows; ++r) {
      std::copy_n(x.begin() + r * stride, dim, sum_ref.begin() + r * dim);
      cpu_rms_norm(x.data() + r * stride, w.data(), 1, dim, eps, plain_ref.data() + r * dim);
      cpu_add(sum_ref.data() + r * dim, add.data() + r * stride, dim);
      cpu_rms_norm(sum_ref.data() + r * dim, w.data(), 1, dim, eps, fused_ref.data() + r * dim);
    }
    DeviceArray<float> w_dev(w);
    DeviceArray<float> add_dev(add);
    DeviceArray<float> y(static_cast<size_t>(rows * dim));

    DeviceArray<float> x_dev(x);
    RmsNormParams p;
    p.num_rows = rows;
    p.dim = dim;
    p.eps = eps;
    p.weight = w_dev.get();
    p.x = x_dev.get();
    p.x_stride = stride;
    p.y = y.get();
    p.y_stride = dim;
    expect_parity(
        "plain", y, [&] { CELLM_ASSERT_OK(launch_rms_norm(p, nullptr)); }, plain_ref, 1e-6);
    EXPECT_EQ(x_dev.download(), x) << "a plain norm changed x";

    p.add = add_dev.get();
    p.add_stride = stride;
    expect_parity(
        "fused add", y, [&] { CELLM_ASSERT_OK(launch_rms_norm(p, nullptr)); }, fused_ref, 1e-6);
    EXPECT_TRUE(testing::near_relative(
        "x + add", testing::compact_rows(x_dev.download(), rows, stride, dim), sum_ref, 0.0));

    DeviceArray<float> inplace(x);
    p.add = nullptr;
    p.x = inplace.get();
    p.y = inplace.get();
    p.y_stride = stride;
    CELLM_ASSERT_OK(launch_rms_norm(p, nullptr));
    EXPECT_TRUE(testing::near_relative(
        "in place", testing::compact_rows(inplace.download(), rows, stride, dim), plain_ref, 1e-6));
  }
}

TEST(RmsNormKernelTest, ABf16OutputIsTheNormRoundedInTheOrderTheNextProductReads) {
  CELLM_REQUIRE_DEVICE();
  const int32_t dim = 4096;
  const int64_t rows = 6;
  const int64_t stride = dim + 8;
  const std::vector<float> x = random_floats(static_cast<size_t>(rows * stride), 47, 3.0f);
  const std::vector<float> add = random_floats(static_cast<size_t>(rows * stride), 48);
  const std::vector<float> w = random_floats(static_cast<size_t>(dim), 49);
  DeviceArray<float> w_dev(w);
  DeviceArray<float> add_dev(add);
  for (const bool with_add : {false, true}) {
    SCOPED_TRACE(with_add ? "fused add" : "plain");
    // The f32 norm first (itself checked against the CPU above), then the same in the wide order.
    DeviceArray<float> x_f32(x);
    DeviceArray<float> y(static_cast<size_t>(rows * dim));
    RmsNormParams p;
    p.num_rows = rows;
    p.dim = dim;
    p.eps = 1e-5f;
    p.weight = w_dev.get();
    p.x = x_f32.get();
    p.x_stride = stride;
    p.add = with_add ? add_dev.get() : nullptr;
    p.add_stride = stride;
    p.y = y.get();
    p.y_stride = dim;
    CELLM_ASSERT_OK(launch_rms_norm(p, nullptr));
    for (const WideOrder order : {WideOrder::kFused, WideOrder::kNatural}) {
      DeviceArray<float> x_wide_run(x);
      DeviceArray<uint16_t> wide(static_cast<size_t>(rows * dim));
      RmsNormParams q = p;
      q.x = x_wide_run.get();
      q.y = nullptr;
      q.y_wide = wide.get();
      q.y_wide_order = order;
      CELLM_ASSERT_OK(launch_rms_norm(q, nullptr));
      EXPECT_EQ(wide.download(), testing::bf16_in_order(y.download(), rows, dim, dim, order));
      EXPECT_EQ(x_wide_run.download(), x_f32.download()) << "the residual add differs";
    }
  }
  RmsNormParams bad;
  bad.num_rows = 1;
  bad.dim = 1000;  // no multiple of 32
  bad.weight = w_dev.get();
  bad.x = add_dev.get();
  bad.x_stride = stride;
  DeviceArray<uint16_t> wide(static_cast<size_t>(dim));
  bad.y_wide = wide.get();
  EXPECT_FALSE(launch_rms_norm(bad, nullptr).ok());
  bad.y_wide_order = WideOrder::kNatural;  // any dim
  CELLM_ASSERT_OK(launch_rms_norm(bad, nullptr));
  bad.y_wide_order = WideOrder::kFused;
  bad.dim = 64;
  DeviceArray<float> y(static_cast<size_t>(dim));
  bad.y = y.get();  // both outputs
  bad.y_stride = 64;
  EXPECT_FALSE(launch_rms_norm(bad, nullptr).ok());
  bad.y = nullptr;
  CELLM_ASSERT_OK(launch_rms_norm(bad, nullptr));
}

TEST(RmsNormKernelTest, PerHeadNormNormalizesEveryHeadInPlace) {
  CELLM_REQUIRE_DEVICE();
  const int32_t tokens = 3, heads = 5, hd = 128;
  const int64_t stride = heads * hd + 8;
  const std::vector<float> x = random_floats(static_cast<size_t>(tokens * stride), 44, 2.0f);
  const std::vector<float> w = random_floats(static_cast<size_t>(hd), 45);
  std::vector<float> ref;
  for (int32_t t = 0; t < tokens; ++t) {
    std::vector<float> row(x.begin() + t * stride, x.begin() + t * stride + heads * hd);
    cpu_rms_norm(row.data(), w.data(), heads, hd, 1e-6f, row.data());
    ref.insert(ref.end(), row.begin(), row.end());
  }
  DeviceArray<float> x_dev(x);
  DeviceArray<float> w_dev(w);
  HeadRmsNormParams p;
  p.num_tokens = tokens;
  p.num_heads = heads;
  p.head_dim = hd;
  p.eps = 1e-6f;
  p.weight = w_dev.get();
  p.x = x_dev.get();
  p.token_stride = stride;
  CELLM_ASSERT_OK(launch_head_rms_norm(p, nullptr));
  const std::vector<float> out = x_dev.download();
  for (int32_t t = 0; t < tokens; ++t) {
    for (int64_t i = heads * hd; i < stride; ++i) ASSERT_EQ(out[t * stride + i], x[t * stride + i]);
  }
  EXPECT_TRUE(testing::near_relative(
      "head norm", testing::compact_rows(out, tokens, stride, heads * hd), ref, 1e-6));
}

TEST(SwigluKernelTest, SeparateAndFusedGateUpMatchTheCpu) {
  CELLM_REQUIRE_DEVICE();
  const int64_t tokens = 7, ffn = 1000;
  const std::vector<float> gate_up = random_floats(static_cast<size_t>(tokens * 2 * ffn), 46, 6.0f);
  std::vector<float> ref(static_cast<size_t>(tokens * ffn));
  for (int64_t t = 0; t < tokens; ++t) {
    cpu_silu_mul(gate_up.data() + t * 2 * ffn, gate_up.data() + t * 2 * ffn + ffn, ffn,
                 ref.data() + t * ffn);
  }
  DeviceArray<float> in(gate_up);
  DeviceArray<float> out(static_cast<size_t>(tokens * ffn));
  const SwigluParams fused = swiglu_fused_params(in.get(), tokens, ffn, out.get());
  expect_parity(
      "fused", out, [&] { CELLM_ASSERT_OK(launch_swiglu(fused, nullptr)); }, ref, 1e-6);

  // Separate buffers with their own strides.
  const int64_t gate_stride = ffn + 4, up_stride = ffn + 12;
  std::vector<float> gate(static_cast<size_t>(tokens * gate_stride), 1.0f);
  std::vector<float> up(static_cast<size_t>(tokens * up_stride), 1.0f);
  for (int64_t t = 0; t < tokens; ++t) {
    std::copy_n(gate_up.begin() + t * 2 * ffn, ffn, gate.begin() + t * gate_stride);
    std::copy_n(gate_up.begin() + t * 2 * ffn + ffn, ffn, up.begin() + t * up_stride);
  }
  DeviceArray<float> gate_dev(gate);
  DeviceArray<float> up_dev(up);
  SwigluParams separate = fused;
  separate.gate = gate_dev.get();
  separate.gate_stride = gate_stride;
  separate.up = up_dev.get();
  separate.up_stride = up_stride;
  expect_parity(
      "separate", out, [&] { CELLM_ASSERT_OK(launch_swiglu(separate, nullptr)); }, ref, 1e-6);

  // Strides of whole float4s above; an odd one (a column at a time) and a misaligned start.
  const int64_t odd_stride = ffn + 1;
  std::vector<float> gate_odd(static_cast<size_t>(tokens * odd_stride + 1), 1.0f);
  for (int64_t t = 0; t < tokens; ++t) {
    std::copy_n(gate_up.begin() + t * 2 * ffn, ffn, gate_odd.begin() + 1 + t * odd_stride);
  }
  DeviceArray<float> gate_odd_dev(gate_odd);
  separate.gate = gate_odd_dev.get() + 1;
  separate.gate_stride = odd_stride;
  expect_parity(
      "odd stride", out, [&] { CELLM_ASSERT_OK(launch_swiglu(separate, nullptr)); }, ref, 1e-6);
}

TEST(SwigluKernelTest, GeluGatingMatchesTheCpu) {
  CELLM_REQUIRE_DEVICE();
  const int64_t tokens = 5, ffn = 1152;  // Gemma 3 1B's hidden size, as a width
  const std::vector<float> gate_up = random_floats(static_cast<size_t>(tokens * 2 * ffn), 47, 6.0f);
  std::vector<float> ref(static_cast<size_t>(tokens * ffn));
  std::vector<float> silu(static_cast<size_t>(tokens * ffn));
  for (int64_t t = 0; t < tokens; ++t) {
    const float* row = gate_up.data() + t * 2 * ffn;
    cpu_gelu_tanh_mul(row, row + ffn, ffn, ref.data() + t * ffn);
    cpu_silu_mul(row, row + ffn, ffn, silu.data() + t * ffn);
  }
  ASSERT_FALSE(testing::near_relative("gelu is not silu", silu, ref, 1e-3));
  DeviceArray<float> in(gate_up);
  DeviceArray<float> out(static_cast<size_t>(tokens * ffn));
  SwigluParams p = swiglu_fused_params(in.get(), tokens, ffn, out.get());
  p.gelu_tanh = true;
  expect_parity(
      "gelu fused", out, [&] { CELLM_ASSERT_OK(launch_swiglu(p, nullptr)); }, ref, 1e-6);
  // A column at a time (no float4s).
  std::vector<float> odd(static_cast<size_t>(tokens * 2 * ffn + 1));
  std::copy(gate_up.begin(), gate_up.end(), odd.begin() + 1);
  DeviceArray<float> odd_dev(odd);
  p.gate = odd_dev.get() + 1;
  p.up = odd_dev.get() + 1 + ffn;
  expect_parity(
      "gelu unaligned", out, [&] { CELLM_ASSERT_OK(launch_swiglu(p, nullptr)); }, ref, 1e-6);
}

TEST(SwigluKernelTest, ABf16OutputIsSwigluRoundedInTheOrderTheNextProductReads) {
  CELLM_REQUIRE_DEVICE();
  const int64_t tokens = 5, ffn = 1536;
  const std::vector<float> gate_up = random_floats(static_cast<size_t>(tokens * 2 * ffn), 50, 6.0f);
  DeviceArray<float> in(gate_up);
  DeviceArray<float> out(static_cast<size_t>(tokens * ffn));
  SwigluParams p = swiglu_fused_params(in.get(), tokens, ffn, out.get());
  CELLM_ASSERT_OK(launch_swiglu(p, nullptr));  // f32, checked against the CPU above
  DeviceArray<uint16_t> wide(static_cast<size_t>(tokens * ffn));
  p.out = nullptr;
  p.out_wide = wide.get();
  for (const WideOrder order : {WideOrder::kNatural, WideOrder::kFused}) {
    p.out_wide_order = order;
    CELLM_ASSERT_OK(launch_swiglu(p, nullptr));
    EXPECT_EQ(wide.download(), testing::bf16_in_order(out.download(), tokens, ffn, ffn, order));
  }
  EXPECT_EQ(in.download(), gate_up) << "the input changed";
  p.out = out.get();  // both outputs
  EXPECT_FALSE(launch_swiglu(p, nullptr).ok());
  p.out = nullptr;
  p.dim = 1000;  // no multiple of 32
  p.gate_stride = p.up_stride = 2 * 1000;
  EXPECT_FALSE(launch_swiglu(p, nullptr).ok());
  p.out_wide_order = WideOrder::kNatural;  // any dim, here as whole float4s of the input
  CELLM_ASSERT_OK(launch_swiglu(p, nullptr));
  // A dim of no whole float4s: a column at a time, to the same bits as the f32 output rounded.
  p.dim = 1002;
  p.gate_stride = p.up_stride = 2 * 1002;
  p.up = in.get() + 1002;
  CELLM_ASSERT_OK(launch_swiglu(p, nullptr));
  SwigluParams f32 = p;
  f32.out_wide = nullptr;
  f32.out = out.get();
  f32.out_stride = 1002;
  CELLM_ASSERT_OK(launch_swiglu(f32, nullptr));
  const std::vector<float> f32_out = out.download();
  const std::vector<uint16_t> wide_out = wide.download();
  EXPECT_EQ(
      std::vector<uint16_t>(wide_out.begin(), wide_out.begin() + tokens * 1002),
      testing::bf16_in_order(std::vector<float>(f32_out.begin(), f32_out.begin() + tokens * 1002),
                             tokens, 1002, 1002, WideOrder::kNatural));
}

TEST(RowGatherKernelTest, CopiesTheKeptRowsInOrder) {
  CELLM_REQUIRE_DEVICE();
  const int64_t rows = 10, dim = 300, stride = 304;
  const std::vector<float> src = random_floats(static_cast<size_t>(rows * stride), 47);
  const std::vector<int32_t> keep = {3, 0, 9, 3};
  std::vector<float> ref;
  for (const int32_t r : keep)
    ref.insert(ref.end(), src.begin() + r * stride, src.begin() + r * stride + dim);
  DeviceArray<float> src_dev(src);
  DeviceArray<int32_t> keep_dev(keep);
  DeviceArray<float> out(ref.size());
  RowGatherParams p;
  p.num_rows = static_cast<int32_t>(keep.size());
  p.dim = dim;
  p.rows = keep_dev.get();
  p.src = src_dev.get();
  p.src_stride = stride;
  p.num_src_rows = rows;
  p.dst = out.get();
  p.dst_stride = dim;
  expect_parity(
      "row gather", out, [&] { CELLM_ASSERT_OK(launch_row_gather(p, nullptr)); }, ref, 0.0);
}

TEST(LogitSoftcapKernelTest, CapsEveryLogitAsTheCpuDoesAndNothingPastTheColumns) {
  CELLM_REQUIRE_DEVICE();
  const float cap = 30.0f;
  const float pad = 1234.5f;  // the columns past num_cols: capped, it would be about 30
  struct Shape {
    int32_t rows;
    int64_t cols;
    int64_t stride;
  };
  // A row shorter than a warp, rows wider than a block, and gemma2's vocabulary (several columns
  // per thread).
  for (const Shape s : {Shape{1, 7, 8}, Shape{5, 1000, 1013}, Shape{3, 256000, 256004}}) {
    SCOPED_TRACE(std::to_string(s.rows) + " rows of " + std::to_string(s.cols));
    // Logits up to ±100 (past the cap's linear range), a few small and one far past the cap.
    std::vector<float> logits = random_floats(static_cast<size_t>(s.rows * s.stride), 53, 100.0f);
    const float planted[] = {0.0f, 1e-3f, -0.25f, -1e4f};
    for (size_t i = 0; i < std::size(planted) && static_cast<int64_t>(i) < s.cols; ++i) {
      logits[i] = planted[i];
    }
    std::vector<float> ref;
    for (int64_t r = 0; r < s.rows; ++r) {
      for (int64_t c = 0; c < s.stride; ++c) {
        float& logit = logits[static_cast<size_t>(r * s.stride + c)];
        if (c < s.cols) {
          ref.push_back(soft_cap(logit, cap));
        } else {
          logit = pad;
        }
      }
    }
    DeviceArray<float> logits_dev(logits);
    LogitSoftcapParams p;
    p.logits = logits_dev.get();
    p.num_rows = s.rows;
    p.num_cols = s.cols;
    p.stride = s.stride;
    p.cap = cap;
    CELLM_ASSERT_OK(launch_logit_softcap(p, nullptr));
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<float> out = logits_dev.download();
    const std::vector<float> capped = testing::compact_rows(out, s.rows, s.stride, s.cols);
    EXPECT_TRUE(testing::near_relative("logit soft cap", capped, ref, 1e-6));
    float largest = 0.0f;
    for (const float v : capped) largest = std::max(largest, std::fabs(v));
    EXPECT_LE(largest, cap);
    EXPECT_GT(largest, 0.99f * cap) << "the logits never reached the cap's saturation";
    size_t touched = 0;
    for (int64_t r = 0; r < s.rows; ++r) {
      for (int64_t c = s.cols; c < s.stride; ++c) touched += out[r * s.stride + c] != pad;
    }
    EXPECT_EQ(touched, 0u) << "columns past num_cols were written";
  }
}

TEST(LogitSoftcapKernelTest, RefusesBadArguments) {
  float logit = 2.0f;  // never written: every launch below is refused or has nothing to do
  LogitSoftcapParams p;
  p.logits = &logit;
  p.num_rows = 1;
  p.num_cols = 1;
  p.stride = 1;
  for (const float cap : {0.0f, -30.0f, std::numeric_limits<float>::quiet_NaN(),
                          std::numeric_limits<float>::infinity()}) {
    SCOPED_TRACE("cap " + std::to_string(cap));
    p.cap = cap;
    EXPECT_EQ(launch_logit_softcap(p, nullptr).code(), StatusCode::kInvalidArgument);
  }
  p.cap = 30.0f;
  p.stride = 0;  // shorter than a row
  EXPECT_EQ(launch_logit_softcap(p, nullptr).code(), StatusCode::kInvalidArgument);
  p.stride = 1;
  p.num_rows = -1;
  EXPECT_EQ(launch_logit_softcap(p, nullptr).code(), StatusCode::kInvalidArgument);
  p.num_rows = 1;
  p.logits = nullptr;
  EXPECT_EQ(launch_logit_softcap(p, nullptr).code(), StatusCode::kInvalidArgument);
  p.num_rows = 0;  // no rows: nothing to cap, null or not
  EXPECT_TRUE(launch_logit_softcap(p, nullptr).ok());
  EXPECT_EQ(logit, 2.0f);
}

// Argmax of `rows` rows of `vocab` logits into `out` (no scratch: one block per row).
ArgmaxParams argmax_params(const DeviceArray<float>& logits, int32_t rows, int64_t vocab,
                           const DeviceArray<int32_t>& out) {
  ArgmaxParams p;
  p.num_rows = rows;
  p.vocab = vocab;
  p.logits = logits.get();
  p.stride = vocab;
  p.out = out.get();
  return p;
}

TEST(ArgmaxKernelTest, PicksTheLowestIndexOfTheLargestFiniteLogit) {
  CELLM_REQUIRE_DEVICE();
  const int64_t vocab = 128256;
  const int32_t rows = 5;
  std::vector<float> logits = random_floats(static_cast<size_t>(rows * vocab), 48, 10.0f);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  // Row 1: a tie between 5000 and 100000 → 5000. Row 2: NaN and +inf are not candidates.
  logits[1 * vocab + 5000] = logits[1 * vocab + 100000] = 50.0f;
  logits[2 * vocab + 7] = nan;
  logits[2 * vocab + 8] = inf;
  logits[2 * vocab + 9] = 40.0f;
  // Row 3: nothing finite → -1. Row 4: the maximum is the last element.
  std::fill(logits.begin() + 3 * vocab, logits.begin() + 4 * vocab, nan);
  logits[3 * vocab + 11] = -inf;
  logits[5 * vocab - 1] = 99.0f;
  std::vector<int32_t> want(rows, -1);
  for (int32_t r = 0; r < rows; ++r) {
    float best = 0.0f;
    for (int64_t i = 0; i < vocab; ++i) {
      const float v = logits[r * vocab + i];
      if (std::isfinite(v) && (want[r] < 0 || v > best)) {
        best = v;
        want[r] = static_cast<int32_t>(i);
      }
    }
  }
  ASSERT_EQ(want[1], 5000);
  ASSERT_EQ(want[2], 9);
  ASSERT_EQ(want[3], -1);
  DeviceArray<float> logits_dev(logits);
  DeviceArray<int32_t> out(rows);
  out.poison();
  CELLM_ASSERT_OK(launch_argmax(argmax_params(logits_dev, rows, vocab, out), nullptr));
  EXPECT_EQ(out.download(), want);
}

// The split argmax that ends a decode step: several blocks per row, merged by the last to finish
// through the scratch, which must be left ready for the next launch.
TEST(ArgmaxKernelTest, SplitArgmaxFindsTheLowestIndexOfTheLargestFiniteLogitTwice) {
  CELLM_REQUIRE_DEVICE();
  const int64_t vocab = 128256;
  const int32_t rows = 4;
  std::vector<float> logits = random_floats(static_cast<size_t>(rows * vocab), 71, 10.0f);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  logits[0 * vocab + 100000] = logits[0 * vocab + 70000] = 60.0f;  // tie across splits → 70000
  logits[1 * vocab + 7] = inf;
  logits[1 * vocab + 8] = nan;
  logits[1 * vocab + vocab - 1] = 55.0f;
  std::fill(logits.begin() + 2 * vocab, logits.begin() + 3 * vocab, nan);  // none finite → -1
  logits[3 * vocab + 4000] = 70.0f;
  logits[3 * vocab + 4001] = 70.0f;
  const std::vector<int32_t> want = {70000, static_cast<int32_t>(vocab - 1), -1, 4000};
  DeviceArray<float> logits_dev(logits);
  DeviceArray<int32_t> out(rows);
  DeviceArray<uint8_t> scratch(argmax_scratch_bytes(rows));
  ASSERT_EQ(cudaMemset(scratch.get(), 0, scratch.size()), cudaSuccess);
  ArgmaxParams p = argmax_params(logits_dev, rows, vocab, out);
  p.scratch = scratch.get();
  p.scratch_bytes = scratch.size();
  for (int run = 0; run < 2; ++run) {  // the first run must leave the scratch ready
    out.poison();
    CELLM_ASSERT_OK(launch_argmax(p, nullptr));
    EXPECT_EQ(out.download(), want) << "run " << run;
  }
  p.scratch_bytes = 16;
  EXPECT_EQ(launch_argmax(p, nullptr).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace cellm::kernels
