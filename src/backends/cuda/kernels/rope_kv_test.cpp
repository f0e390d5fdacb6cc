// Parity of the fused RoPE + K/V cell write kernel with cpu_rope (and cpu_rms_norm for qwen3's
// q/k norms): normal and neox pairs, partial rotary dims, linear scaling, llama3 factors, phi3's
// LongRoPE (factors and an attention factor scaling cos and sin), cache
// dtypes f32/f16/bf16, q-only and kv-only launches, strided inputs, scattered cells.
#include "backends/cuda/kernels/rope_kv.cuh"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/cpu_ops.h"
#include "backends/cuda/kernels/kernel_test_support.h"

namespace cellm::kernels {
namespace {

using testing::DeviceArray;
using testing::random_floats;

struct RopeCase {
  std::string name;
  RopeStyle style = RopeStyle::kNormal;
  int32_t head_dim = 64;
  int32_t num_rotary_dims = 64;
  int32_t value_head_dim = 64;
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;
  bool factors = false;
  bool qk_norm = false;
  KvDtype dtype = KvDtype::kF32;
  bool with_q = true;
  bool with_kv = true;
  bool from_table = false;  // the angles from launch_rope_table (RopeKvParams::cos_sin)
  float attn_factor = 1.0f;
};

// phi3 LongRoPE as Phi-3.5-mini has it: neox, short factors, cos and sin scaled by
// sqrt(1 + ln 32 / ln 4096); a partial rotary head like Phi-4-mini's (3/4 of 128).
RopeCase long_rope_case(KvDtype dtype) {
  RopeCase c{"phi3 LongRoPE", RopeStyle::kNeox, 128, 96, 128, 10000.0f, 1.0f, true, false, dtype};
  c.attn_factor = 1.1902381f;
  return c;
}

// Runs case c and checks it against the CPU; `written` (if given) receives the bytes of q and
// both caches after the launch.
void expect_rope_parity(const RopeCase& c, std::vector<uint8_t>* written = nullptr) {
  SCOPED_TRACE(c.name + (c.from_table ? " (angles from the table)" : ""));
  const int32_t num_tokens = 5;
  const int32_t num_heads = 8;
  const int32_t num_kv_heads = 2;
  const int32_t num_rows = 23;  // cache rows; tokens write to scattered ones
  const int32_t hd = c.head_dim;
  const int32_t vd = c.value_head_dim;
  const float eps = 1e-6f;
  const std::vector<int32_t> positions = {0, 1, 17, 4095, 131071};
  const std::vector<int32_t> cells = {22, 3, 9, 0, 15};
  const int64_t q_stride = num_heads * hd + 12;
  const int64_t k_stride = num_kv_heads * hd + 4;
  const int64_t v_stride = num_kv_heads * vd + 8;
  const std::vector<float> q = random_floats(static_cast<size_t>(num_tokens * q_stride), 31);
  const std::vector<float> k = random_floats(static_cast<size_t>(num_tokens * k_stride), 32);
  const std::vector<float> v = random_floats(static_cast<size_t>(num_tokens * v_stride), 33);
  std::vector<float> factors = random_floats(static_cast<size_t>(c.num_rotary_dims / 2), 34, 8.0f);
  for (float& f : factors) f = 1.0f + std::fabs(f);
  const std::vector<float> q_norm = random_floats(static_cast<size_t>(hd), 35);
  const std::vector<float> k_norm = random_floats(static_cast<size_t>(hd), 36);

  // CPU: compact heads, optional per-head norm, then rope.
  const auto compact = [&](const std::vector<float>& src, int64_t stride, int32_t heads,
                           int32_t dim) {
    return testing::compact_rows(src, num_tokens, stride, static_cast<int64_t>(heads) * dim);
  };
  RopeParams rope;
  rope.style = c.style;
  rope.head_dim = hd;
  rope.num_rotary_dims = c.num_rotary_dims;
  rope.freq_base = c.freq_base;
  rope.freq_scale = c.freq_scale;
  rope.freq_factors = c.factors ? factors.data() : nullptr;
  rope.attn_factor = c.attn_factor;
  std::vector<float> q_ref = compact(q, q_stride, num_heads, hd);
  std::vector<float> k_ref = compact(k, k_stride, num_kv_heads, hd);
  const std::vector<float> v_ref = compact(v, v_stride, num_kv_heads, vd);
  if (c.qk_norm) {
    cpu_rms_norm(q_ref.data(), q_norm.data(), num_tokens * num_heads, hd, eps, q_ref.data());
    cpu_rms_norm(k_ref.data(), k_norm.data(), num_tokens * num_kv_heads, hd, eps, k_ref.data());
  }
  cpu_rope(q_ref.data(), positions.data(), num_tokens, num_heads, rope);
  cpu_rope(k_ref.data(), positions.data(), num_tokens, num_kv_heads, rope);

  // GPU.
  DeviceArray<float> q_dev(q);
  DeviceArray<float> k_dev(k);
  DeviceArray<float> v_dev(v);
  DeviceArray<int32_t> pos_dev(positions);
  DeviceArray<int32_t> cells_dev(cells);
  DeviceArray<float> factors_dev(factors);
  DeviceArray<float> q_norm_dev(q_norm);
  DeviceArray<float> k_norm_dev(k_norm);
  const size_t elem = c.dtype == KvDtype::kF32 ? 4 : 2;
  DeviceArray<uint8_t> k_cache(static_cast<size_t>(num_rows) * num_kv_heads * hd * elem);
  DeviceArray<uint8_t> v_cache(static_cast<size_t>(num_rows) * num_kv_heads * vd * elem);
  k_cache.poison();
  v_cache.poison();

  RopeKvParams p;
  p.num_tokens = num_tokens;
  p.positions = pos_dev.get();
  p.head_dim = hd;
  p.style = c.style;
  p.num_rotary_dims = c.num_rotary_dims;
  p.freq_base = c.freq_base;
  p.freq_scale = c.freq_scale;
  p.freq_factors = c.factors ? factors_dev.get() : nullptr;
  p.attn_factor = c.attn_factor;
  p.norm_eps = eps;
  if (c.with_q) {
    p.q = q_dev.get();
    p.q_stride = q_stride;
    p.num_heads = num_heads;
    p.q_norm = c.qk_norm ? q_norm_dev.get() : nullptr;
  }
  if (c.with_kv) {
    p.k = k_dev.get();
    p.k_stride = k_stride;
    p.v = v_dev.get();
    p.v_stride = v_stride;
    p.num_kv_heads = num_kv_heads;
    p.value_head_dim = vd;
    p.k_norm = c.qk_norm ? k_norm_dev.get() : nullptr;
    p.cells = cells_dev.get();
    p.k_cache = k_cache.get();
    p.v_cache = v_cache.get();
    p.cache_dtype = c.dtype;
  }
  DeviceArray<float2> table_dev(static_cast<size_t>(num_tokens) * (c.num_rotary_dims / 2 + 1));
  if (c.from_table) {
    table_dev.poison();
    RopeTableParams table;
    table.num_tokens = num_tokens;
    table.positions = pos_dev.get();
    table.num_rotary_dims = c.num_rotary_dims;
    table.freq_base = c.freq_base;
    table.freq_scale = c.freq_scale;
    table.freq_factors = p.freq_factors;
    table.attn_factor = p.attn_factor;
    table.table = table_dev.get();
    const Status table_status = launch_rope_table(table, nullptr);
    ASSERT_TRUE(table_status.ok()) << table_status.to_string();
    p.cos_sin = table_dev.get();
  }
  const Status status = launch_rope_kv(p, nullptr);
  ASSERT_TRUE(status.ok()) << status.to_string();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);

  // Q: rotated in place; the stride's padding untouched.
  const std::vector<float> q_out = q_dev.download();
  if (written != nullptr) {
    const std::vector<uint8_t> k_bytes = k_cache.download();
    const std::vector<uint8_t> v_bytes = v_cache.download();
    written->resize(q_out.size() * sizeof(float));
    std::memcpy(written->data(), q_out.data(), written->size());
    written->insert(written->end(), k_bytes.begin(), k_bytes.end());
    written->insert(written->end(), v_bytes.begin(), v_bytes.end());
  }
  if (c.with_q) {
    EXPECT_TRUE(testing::near_relative("q", compact(q_out, q_stride, num_heads, hd), q_ref, 1e-5));
  } else {
    EXPECT_EQ(q_out, q) << "q changed by a kv-only launch";
  }
  for (int32_t t = 0; t < num_tokens; ++t) {
    for (int64_t i = num_heads * hd; i < q_stride; ++i) {
      ASSERT_EQ(q_out[t * q_stride + i], q[t * q_stride + i]) << "q padding written";
    }
  }

  // K and V: written rows equal the reference in the cache's rounding; other rows untouched.
  // One cache (rows of `width` values): the rows tokens write, gathered with the reference in the
  // cache's rounding; every other row must keep its poison (NaN).
  const auto gather_cache = [&](const char* what, const std::vector<float>& cached,
                                const std::vector<float>& ref, int32_t width,
                                std::vector<float>* got, std::vector<float>* want) {
    for (int32_t row = 0; row < num_rows; ++row) {
      const auto it = std::find(cells.begin(), cells.end(), row);
      const bool written = c.with_kv && it != cells.end();
      const int32_t t = written ? static_cast<int32_t>(it - cells.begin()) : -1;
      for (int32_t i = 0; i < width; ++i) {
        const float value = cached[static_cast<size_t>(row) * width + i];
        if (!written) {
          ASSERT_TRUE(std::isnan(value)) << what << " row " << row << " written";
          continue;
        }
        got->push_back(value);
        want->push_back(testing::kv_stored(ref[static_cast<size_t>(t) * width + i], c.dtype));
      }
    }
  };
  std::vector<float> k_got, k_want, v_got, v_want;
  ASSERT_NO_FATAL_FAILURE(gather_cache("K", testing::read_kv_cache(k_cache.download(), c.dtype),
                                       k_ref, num_kv_heads * hd, &k_got, &k_want));
  ASSERT_NO_FATAL_FAILURE(gather_cache("V", testing::read_kv_cache(v_cache.download(), c.dtype),
                                       v_ref, num_kv_heads * vd, &v_got, &v_want));
  const double tolerance = c.dtype == KvDtype::kF32 ? 1e-5 : 1e-2;
  EXPECT_TRUE(testing::near_relative("k cache", k_got, k_want, tolerance));
  EXPECT_TRUE(testing::near_relative("v cache", v_got, v_want, 0.0));  // a plain copy
}

TEST(RopeKvKernelTest, RotatesQAndWritesKvIntoCellsLikeTheCpu) {
  CELLM_REQUIRE_DEVICE();
  const RopeCase cases[] = {
      {"llama normal f32", RopeStyle::kNormal, 64, 64, 64, 10000.0f, 1.0f, false, false,
       KvDtype::kF32},
      {"neox partial bf16", RopeStyle::kNeox, 128, 64, 128, 1000000.0f, 1.0f, false, false,
       KvDtype::kBF16},
      {"llama3 factors f16", RopeStyle::kNormal, 128, 128, 128, 500000.0f, 1.0f, true, false,
       KvDtype::kF16},
      {"linear scale neox f32", RopeStyle::kNeox, 64, 64, 32, 10000.0f, 0.25f, false, false,
       KvDtype::kF32},
      {"qwen3 qk norm bf16", RopeStyle::kNeox, 128, 128, 128, 1000000.0f, 1.0f, false, true,
       KvDtype::kBF16},
      {"qwen3 qk norm f32 hd32", RopeStyle::kNeox, 32, 32, 32, 1000000.0f, 1.0f, false, true,
       KvDtype::kF32},
      {"stories hd8 f32", RopeStyle::kNormal, 8, 8, 8, 10000.0f, 1.0f, false, false, KvDtype::kF32},
      {"head 256 bf16", RopeStyle::kNeox, 256, 256, 256, 10000.0f, 1.0f, false, false,
       KvDtype::kBF16},
  };
  for (const RopeCase& c : cases) expect_rope_parity(c);
  expect_rope_parity(long_rope_case(KvDtype::kF32));
}

TEST(RopeKvKernelTest, AnglesFromTheStepsTableGiveTheSameBitsAsAnglesComputedPerBlock) {
  CELLM_REQUIRE_DEVICE();
  const RopeCase cases[] = {
      {"llama3 factors bf16", RopeStyle::kNormal, 128, 128, 128, 500000.0f, 1.0f, true, false,
       KvDtype::kBF16},
      {"neox partial f32", RopeStyle::kNeox, 128, 64, 128, 1000000.0f, 1.0f, false, false,
       KvDtype::kF32},
      {"linear scale qwen3 qk norm f16", RopeStyle::kNeox, 64, 64, 32, 10000.0f, 0.25f, false, true,
       KvDtype::kF16},
  };
  for (RopeCase c : {cases[0], cases[1], cases[2], long_rope_case(KvDtype::kBF16)}) {
    std::vector<uint8_t> computed;
    std::vector<uint8_t> from_table;
    ASSERT_NO_FATAL_FAILURE(expect_rope_parity(c, &computed));
    c.from_table = true;
    ASSERT_NO_FATAL_FAILURE(expect_rope_parity(c, &from_table));
    EXPECT_TRUE(computed == from_table) << c.name << ": the table's angles changed bits";
  }
}

TEST(RopeKvKernelTest, GivenATableItRotatesByTheTablesAnglesNotThePositions) {
  CELLM_REQUIRE_DEVICE();
  // Every angle zero in the table (cos 1, sin 0) at positions whose own angles are not: q comes
  // back exactly as it went in.
  const int32_t num_tokens = 3;
  const int32_t num_heads = 4;
  const int32_t head_dim = 64;
  const std::vector<int32_t> positions = {5, 77, 1000};
  const std::vector<float> q =
      random_floats(static_cast<size_t>(num_tokens) * num_heads * head_dim, 41);
  DeviceArray<float> q_dev(q);
  DeviceArray<int32_t> pos_dev(positions);
  DeviceArray<float2> table_dev(
      std::vector<float2>(static_cast<size_t>(num_tokens) * head_dim / 2, make_float2(1.0f, 0.0f)));
  RopeKvParams p;
  p.num_tokens = num_tokens;
  p.positions = pos_dev.get();
  p.head_dim = head_dim;
  p.num_rotary_dims = head_dim;
  p.cos_sin = table_dev.get();
  p.q = q_dev.get();
  p.q_stride = static_cast<int64_t>(num_heads) * head_dim;
  p.num_heads = num_heads;
  const Status status = launch_rope_kv(p, nullptr);
  ASSERT_TRUE(status.ok()) << status.to_string();
  EXPECT_EQ(q_dev.download(), q) << "q rotated by angles other than the table's";
  p.cos_sin = nullptr;  // and the positions' own angles do rotate it
  ASSERT_TRUE(launch_rope_kv(p, nullptr).ok());
  EXPECT_NE(q_dev.download(), q);
}

TEST(RopeKvKernelTest, QOnlyAndKvOnlyLaunchesTouchOnlyTheirPart) {
  CELLM_REQUIRE_DEVICE();
  RopeCase q_only{"q only", RopeStyle::kNeox, 64, 64, 64, 10000.0f, 1.0f, true,
                  true,     KvDtype::kBF16};
  q_only.with_kv = false;
  expect_rope_parity(q_only);
  RopeCase kv_only{"kv only", RopeStyle::kNormal, 64, 48, 64, 10000.0f, 1.0f, false,
                   false,     KvDtype::kF16};
  kv_only.with_q = false;
  expect_rope_parity(kv_only);
}

TEST(RopeKvKernelTest, RefusesOddRotaryDimsAndOversizedHeads) {
  static const int32_t kPosition = 0;  // never read: the launch refuses first
  RopeKvParams p;
  p.num_tokens = 1;
  p.positions = &kPosition;
  p.head_dim = 64;
  p.num_rotary_dims = 63;
  EXPECT_EQ(launch_rope_kv(p, nullptr).code(), StatusCode::kInvalidArgument);
  p.num_rotary_dims = 64;
  p.head_dim = kRopeMaxHeadDim + 8;
  EXPECT_EQ(launch_rope_kv(p, nullptr).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace cellm::kernels
