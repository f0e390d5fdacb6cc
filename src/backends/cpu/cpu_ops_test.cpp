#include "backends/cpu/cpu_ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace cellm {
namespace {

constexpr float kEps = 1e-6f;

// A WeightView over bytes the test owns: num_rows rows of num_cols elements of `type`.
WeightView weight_view(const std::vector<uint8_t>& bytes, TensorType type, int64_t num_rows,
                       int64_t num_cols) {
  WeightView view;
  view.name = "test.weight";
  view.type = type;
  view.num_rows = num_rows;
  view.num_cols = num_cols;
  view.row_bytes = bytes.size() / static_cast<size_t>(num_rows);
  view.bytes = bytes;
  return view;
}

std::vector<uint8_t> f32_bytes(const std::vector<float>& values) {
  std::vector<uint8_t> bytes(values.size() * sizeof(float));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

std::vector<float> random_values(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(n);
  for (float& v : values) v = normal(rng);
  return values;
}

TEST(CpuOpsTest, RmsNormDividesEachRowByItsRootMeanSquare) {
  const std::vector<float> x = {3, 4, 2, 2};  // [2 rows, 2]
  const std::vector<float> w = {1, 2};
  std::vector<float> y(4);
  cpu_rms_norm(x.data(), w.data(), 2, 2, 0.0f, y.data());
  const double rms = std::sqrt(12.5);  // sqrt((9 + 16) / 2)
  EXPECT_NEAR(y[0], 3 / rms, kEps);
  EXPECT_NEAR(y[1], 2 * 4 / rms, kEps);
  EXPECT_NEAR(y[2], 1.0, kEps);
  EXPECT_NEAR(y[3], 2.0, kEps);
}

TEST(CpuOpsTest, RmsNormAddsEpsilonInsideTheRoot) {
  const std::vector<float> x = {1, 1};
  const std::vector<float> w = {1, 1};
  std::vector<float> y(2);
  cpu_rms_norm(x.data(), w.data(), 1, 2, 3.0f, y.data());  // 1 / sqrt(1 + 3)
  EXPECT_NEAR(y[0], 0.5, kEps);
  EXPECT_NEAR(y[1], 0.5, kEps);
}

RopeParams rope(RopeStyle style, int32_t head_dim, int32_t num_rotary_dims) {
  RopeParams params;
  params.style = style;
  params.head_dim = head_dim;
  params.num_rotary_dims = num_rotary_dims;
  params.freq_base = 10000.0f;
  return params;
}

TEST(CpuOpsTest, NormalRopeRotatesAdjacentPairs) {
  // Position 1, 4 rotary dims: pair 0 turns 1 rad, pair 1 turns 10000^(-2/4) = 0.01 rad.
  std::vector<float> x = {1, 0, 1, 0};
  const int32_t pos = 1;
  cpu_rope(x.data(), &pos, 1, 1, rope(RopeStyle::kNormal, 4, 4));
  EXPECT_NEAR(x[0], std::cos(1.0), kEps);
  EXPECT_NEAR(x[1], std::sin(1.0), kEps);
  EXPECT_NEAR(x[2], std::cos(0.01), kEps);
  EXPECT_NEAR(x[3], std::sin(0.01), kEps);
}

TEST(CpuOpsTest, NeoxRopeRotatesHalves) {
  // Pairs (0, 2) and (1, 3).
  std::vector<float> x = {1, 1, 0, 0};
  const int32_t pos = 1;
  cpu_rope(x.data(), &pos, 1, 1, rope(RopeStyle::kNeox, 4, 4));
  EXPECT_NEAR(x[0], std::cos(1.0), kEps);
  EXPECT_NEAR(x[1], std::cos(0.01), kEps);
  EXPECT_NEAR(x[2], std::sin(1.0), kEps);
  EXPECT_NEAR(x[3], std::sin(0.01), kEps);
}

TEST(CpuOpsTest, RopeLeavesDimsPastTheRotaryOnesAndEveryHeadTurns) {
  std::vector<float> x = {1, 0, 5, 6, 0, 1, 7, 8};  // [1 token, 2 heads, 4]
  const int32_t pos = 2;
  cpu_rope(x.data(), &pos, 1, 2, rope(RopeStyle::kNormal, 4, 2));
  EXPECT_NEAR(x[0], std::cos(2.0), kEps);
  EXPECT_NEAR(x[1], std::sin(2.0), kEps);
  EXPECT_EQ(x[2], 5);
  EXPECT_EQ(x[3], 6);
  EXPECT_NEAR(x[4], -std::sin(2.0), kEps);
  EXPECT_NEAR(x[5], std::cos(2.0), kEps);
  EXPECT_EQ(x[6], 7);
  EXPECT_EQ(x[7], 8);
}

TEST(CpuOpsTest, RopeDividesByFreqFactorsAndScalesPositions) {
  const std::vector<float> factors = {1, 2};
  RopeParams params = rope(RopeStyle::kNormal, 4, 4);
  params.freq_factors = factors.data();
  params.freq_scale = 0.5f;
  std::vector<float> x = {1, 0, 1, 0};
  const int32_t pos = 4;  // scaled to 2: pair 0 turns 2 rad, pair 1 0.02 / 2 rad
  cpu_rope(x.data(), &pos, 1, 1, params);
  EXPECT_NEAR(x[0], std::cos(2.0), kEps);
  EXPECT_NEAR(x[1], std::sin(2.0), kEps);
  EXPECT_NEAR(x[2], std::cos(0.01), kEps);
  EXPECT_NEAR(x[3], std::sin(0.01), kEps);
}

TEST(CpuOpsTest, RopeAttentionFactorScalesTheRotatedDimsOnly) {
  // LongRoPE's attention factor multiplies cos and sin: the rotated pairs grow by it, the dims
  // past the rotary ones do not (Hugging Face's partial rotary concatenates them unscaled).
  RopeParams params = rope(RopeStyle::kNeox, 6, 4);
  params.attn_factor = 1.25f;
  std::vector<float> x = {1, 1, 0, 0, 5, 6};
  const int32_t pos = 1;
  cpu_rope(x.data(), &pos, 1, 1, params);
  EXPECT_NEAR(x[0], 1.25 * std::cos(1.0), kEps);
  EXPECT_NEAR(x[1], 1.25 * std::cos(0.01), kEps);
  EXPECT_NEAR(x[2], 1.25 * std::sin(1.0), kEps);
  EXPECT_NEAR(x[3], 1.25 * std::sin(0.01), kEps);
  EXPECT_EQ(x[4], 5);
  EXPECT_EQ(x[5], 6);
}

TEST(CpuOpsTest, RopeAtPositionZeroChangesNothing) {
  const std::vector<float> original = {0.5f, -1.5f, 2.0f, 3.0f};
  std::vector<float> x = original;
  const int32_t pos = 0;
  cpu_rope(x.data(), &pos, 1, 1, rope(RopeStyle::kNeox, 4, 4));
  EXPECT_EQ(x, original);
}

TEST(CpuOpsTest, SiluMulMatchesItsDefinition) {
  const std::vector<float> gate = {0, 1, -2};
  const std::vector<float> up = {5, 1, 3};
  std::vector<float> out(3);
  cpu_silu_mul(gate.data(), up.data(), 3, out.data());
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_NEAR(out[1], 1 / (1 + std::exp(-1.0)), kEps);
  EXPECT_NEAR(out[2], 3 * -2 / (1 + std::exp(2.0)), kEps);
}

TEST(CpuOpsTest, GeluTanhMulMatchesItsDefinitionAndTheErfFormClosely) {
  const std::vector<float> gate = {0, 1, -2, 3.5f, -0.25f};
  const std::vector<float> up = {5, 1, 3, -2, 4};
  std::vector<float> out(gate.size());
  cpu_gelu_tanh_mul(gate.data(), up.data(), static_cast<int64_t>(gate.size()), out.data());
  for (size_t i = 0; i < gate.size(); ++i) {
    const double g = gate[i];
    const double tanh_form =
        0.5 * g * (1 + std::tanh(std::sqrt(2 / M_PI) * (g + 0.044715 * g * g * g)));
    EXPECT_NEAR(out[i], tanh_form * up[i], 1e-5 * (1 + std::fabs(tanh_form * up[i]))) << i;
    // The exact GELU differs from the tanh form by < 1e-3: a silu here would be far off.
    const double exact = 0.5 * g * (1 + std::erf(g / std::sqrt(2.0)));
    EXPECT_NEAR(out[i], exact * up[i], 2e-3 * std::fabs(up[i])) << i;
  }
  std::vector<float> dispatched(gate.size());
  cpu_gated_mul(FfnActivation::kGeluTanh, gate.data(), up.data(), static_cast<int64_t>(gate.size()),
                dispatched.data());
  EXPECT_EQ(dispatched, out);
  cpu_gated_mul(FfnActivation::kSilu, gate.data(), up.data(), static_cast<int64_t>(gate.size()),
                dispatched.data());
  EXPECT_NE(dispatched, out);
}

TEST(CpuOpsTest, MatmulDequantizesQ8_0Rows) {
  // Row 0: scale 0.5 (f16 0x3800), quants i - 16; row 1: scale 1 (0x3c00), quants all 1.
  std::vector<uint8_t> bytes(2 * 34);
  bytes[0] = 0x00;
  bytes[1] = 0x38;
  bytes[34] = 0x00;
  bytes[35] = 0x3c;
  for (int i = 0; i < 32; ++i) {
    bytes[2 + i] = static_cast<uint8_t>(static_cast<int8_t>(i - 16));
    bytes[36 + i] = 1;
  }
  const WeightView w = weight_view(bytes, TensorType::kQ8_0, 2, 32);
  std::vector<float> x(64);  // [2 tokens, 32]: ones, then 0..31
  for (int i = 0; i < 32; ++i) {
    x[i] = 1.0f;
    x[32 + i] = static_cast<float>(i);
  }
  std::vector<float> out(4);  // [2 tokens, 2 rows]
  cpu_matmul(w, x.data(), 2, out.data(), nullptr);
  EXPECT_EQ(out[0], 0.5f * (496 - 512));         // 0.5 Σ (i - 16)
  EXPECT_EQ(out[1], 32.0f);                      // Σ 1
  EXPECT_EQ(out[2], 0.5f * (10416 - 16 * 496));  // 0.5 Σ (i - 16) i
  EXPECT_EQ(out[3], 496.0f);                     // Σ i
}

TEST(CpuOpsTest, MatmulRowsDoNotDependOnOtherTokensOrThreads) {
  constexpr int64_t kRows = 300;
  constexpr int64_t kCols = 256;
  constexpr int64_t kTokens = 9;
  const std::vector<uint8_t> bytes = f32_bytes(random_values(kRows * kCols, 1));
  const WeightView w = weight_view(bytes, TensorType::kF32, kRows, kCols);
  const std::vector<float> x = random_values(kTokens * kCols, 2);
  ThreadPool pool(2);
  std::vector<float> together(kTokens * kRows);
  cpu_matmul(w, x.data(), kTokens, together.data(), &pool);
  for (int64_t t = 0; t < kTokens; ++t) {
    std::vector<float> alone(kRows);
    cpu_matmul(w, x.data() + t * kCols, 1, alone.data(), nullptr);
    for (int64_t r = 0; r < kRows; ++r) {
      ASSERT_EQ(alone[r], together[t * kRows + r]) << "token " << t << ", row " << r;
    }
  }
}

TEST(CpuOpsTest, EmbedGathersDequantizedRows) {
  // An f16 table of 3 rows of 2: row r holds (r, -r) (f16 0x3c00 = 1, 0x4000 = 2).
  const std::vector<uint8_t> bytes = {0x00, 0x00, 0x00, 0x00, 0x00, 0x3c,
                                      0x00, 0xbc, 0x00, 0x40, 0x00, 0xc0};
  const WeightView table = weight_view(bytes, TensorType::kF16, 3, 2);
  const std::vector<int32_t> tokens = {2, 0, 1};
  std::vector<float> out(6);
  cpu_embed(table, tokens.data(), 3, out.data());
  EXPECT_EQ(out, (std::vector<float>{2, -2, 0, 0, 1, -1}));
}

AttentionParams attention(int32_t num_heads, int32_t num_kv_heads, int32_t head_dim,
                          int32_t value_head_dim) {
  return {num_heads, num_kv_heads, head_dim, value_head_dim,
          1.0f / std::sqrt(static_cast<float>(head_dim))};
}

KvCacheView f32_view(const std::vector<float>& data, int32_t num_heads, int32_t head_dim) {
  return {data.data(), KvDtype::kF32, static_cast<int32_t>(data.size()) / (num_heads * head_dim),
          num_heads, head_dim};
}

TEST(CpuOpsTest, AttentionWeightsValuesBySoftmaxOfScaledScores) {
  // Scores (q · k) / sqrt(2) = (ln 3, 0): weights 3/4 and 1/4.
  const std::vector<float> q = {static_cast<float>(std::sqrt(2.0) * std::log(3.0)), 0};
  const std::vector<float> k = {1, 0, 0, 1};  // [2 cells, 1 head, 2]
  const std::vector<float> v = {4, 0, 0, 8};
  const std::vector<int32_t> cells = {0, 1};
  const std::vector<std::span<const int32_t>> visible = {cells};
  std::vector<float> out(2);
  cpu_attention(q.data(), visible, f32_view(k, 1, 2), f32_view(v, 1, 2), attention(1, 1, 2, 2),
                out.data(), nullptr);
  EXPECT_NEAR(out[0], 3.0, 1e-5);
  EXPECT_NEAR(out[1], 2.0, 1e-5);
}

TEST(CpuOpsTest, AttentionMapsEachQueryHeadToItsKvHeadGroup) {
  // 4 query heads over 2 kv heads: heads 0 and 1 read kv head 0, heads 2 and 3 kv head 1.
  const std::vector<float> q = {1, 1, 1, 1};
  const std::vector<float> k = {1, 1};  // [1 cell, 2 heads, 1]
  const std::vector<float> v = {10, 20};
  const std::vector<int32_t> cells = {0};
  const std::vector<std::span<const int32_t>> visible = {cells};
  std::vector<float> out(4);
  cpu_attention(q.data(), visible, f32_view(k, 2, 1), f32_view(v, 2, 1), attention(4, 2, 1, 1),
                out.data(), nullptr);
  EXPECT_EQ(out, (std::vector<float>{10, 10, 20, 20}));
}

TEST(CpuOpsTest, AttentionReadsOnlyTheListedCells) {
  const std::vector<float> q = {1};
  const std::vector<float> k = {100, 0, 0};  // cell 0 would win every softmax
  const std::vector<float> v = {-1000, 7, 5};
  const std::vector<int32_t> cells = {2};
  const std::vector<std::span<const int32_t>> visible = {cells};
  std::vector<float> out(1);
  cpu_attention(q.data(), visible, f32_view(k, 1, 1), f32_view(v, 1, 1), attention(1, 1, 1, 1),
                out.data(), nullptr);
  EXPECT_EQ(out[0], 5.0f);
}

TEST(CpuOpsTest, AttentionReadsHalfPrecisionCaches) {
  // The f32 values of AttentionWeightsValuesBySoftmaxOfScaledScores, exact in f16 and bf16.
  const std::vector<float> q = {static_cast<float>(std::sqrt(2.0) * std::log(3.0)), 0};
  const std::vector<uint16_t> k_f16 = {0x3c00, 0, 0, 0x3c00};  // 1, 0, 0, 1
  const std::vector<uint16_t> v_f16 = {0x4400, 0, 0, 0x4800};  // 4, 0, 0, 8
  const std::vector<uint16_t> k_bf16 = {0x3f80, 0, 0, 0x3f80};
  const std::vector<uint16_t> v_bf16 = {0x4080, 0, 0, 0x4100};
  const std::vector<int32_t> cells = {0, 1};
  const std::vector<std::span<const int32_t>> visible = {cells};
  for (const auto& [dtype, k, v] :
       {std::tuple{KvDtype::kF16, &k_f16, &v_f16}, std::tuple{KvDtype::kBF16, &k_bf16, &v_bf16}}) {
    std::vector<float> out(2);
    cpu_attention(q.data(), visible, KvCacheView{k->data(), dtype, 2, 1, 2},
                  KvCacheView{v->data(), dtype, 2, 1, 2}, attention(1, 1, 2, 2), out.data(),
                  nullptr);
    EXPECT_NEAR(out[0], 3.0, 1e-5) << kv_dtype_name(dtype);
    EXPECT_NEAR(out[1], 2.0, 1e-5) << kv_dtype_name(dtype);
  }
}

TEST(CpuOpsTest, AttentionOfAQueryDoesNotDependOnOtherQueriesOrThreads) {
  constexpr int32_t kHeads = 8;
  constexpr int32_t kKvHeads = 2;
  constexpr int32_t kDim = 16;
  constexpr int32_t kCells = 64;
  constexpr int32_t kQueries = 24;
  const std::vector<float> q = random_values(kQueries * kHeads * kDim, 3);
  const std::vector<float> k = random_values(kCells * kKvHeads * kDim, 4);
  const std::vector<float> v = random_values(kCells * kKvHeads * kDim, 5);
  std::vector<std::vector<int32_t>> lists(kQueries);
  for (int32_t i = 0; i < kQueries; ++i) {
    for (int32_t c = i % 5; c < kCells; c += 1 + i % 3) lists[i].push_back(c);
  }
  const std::vector<std::span<const int32_t>> visible(lists.begin(), lists.end());
  const AttentionParams params = attention(kHeads, kKvHeads, kDim, kDim);
  ThreadPool pool(2);
  std::vector<float> together(kQueries * kHeads * kDim);
  cpu_attention(q.data(), visible, f32_view(k, kKvHeads, kDim), f32_view(v, kKvHeads, kDim), params,
                together.data(), &pool);
  for (int32_t i = 0; i < kQueries; ++i) {
    std::vector<float> alone(kHeads * kDim);
    cpu_attention(q.data() + i * kHeads * kDim, std::span(visible).subspan(i, 1),
                  f32_view(k, kKvHeads, kDim), f32_view(v, kKvHeads, kDim), params, alone.data(),
                  nullptr);
    for (int32_t j = 0; j < kHeads * kDim; ++j) {
      ASSERT_EQ(alone[j], together[i * kHeads * kDim + j]) << "query " << i << ", element " << j;
    }
  }
}

}  // namespace
}  // namespace cellm
