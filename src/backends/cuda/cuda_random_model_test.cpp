// End to end on the CUDA executor with random weights (model_geometry.h's "tiny", and
// "tiny-gemma" for the post-norm path's int8 activations): how often
// batched greedy tokens differ from solo ones (bf16; reported, not required); the decode graphs
// of short and of long contexts against eager decode, bit for bit; small batches with int8
// activations (Q8_0 / Q4_0 / Q4_K / Q6_K, the Q4_K_M mix) within int8 rounding of exact ones;
// the fused layer with q, k and v apart against the unfused sequence; wide steps taking their
// products' bf16 input from the kernel before, bit for bit; resident bf16 copies against weights
// dequantized per step. GPU tests (label cuda).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "backends/cuda/cuda_e2e_support.h"
#include "backends/cuda/cuda_side_by_side.h"
#include "backends/cuda/kernels/attention.cuh"
#include "backends/cuda/kernels/matmul.cuh"
#include "backends/cuda/kernels/matmul_int8.cuh"
#include "backends/cuda/model_geometry.h"

namespace cellm {
namespace {

using testing::feed_side_by_side;
using testing::relative_difference;
using testing::Tokens;

// Reported, not required: rounding differs between the one-row (GEMV, f32 activations) and the
// wide (tensor cores, bf16 activations) matrix paths, so near-ties may break differently.
TEST(CudaRandomModelTest, ReportsHowOftenBatchedGreedyTokensDifferFromSolo) {
  ASSERT_NO_FATAL_FAILURE(testing::require_cuda_device());
  const StatusOr<ModelConfig> config = named_geometry("tiny");
  ASSERT_TRUE(config.ok());
  CudaWeightsOptions weight_options;
  auto weights = CudaWeights::random(*config, {TensorType::kBF16, 7}, weight_options);
  ASSERT_TRUE(weights.ok()) << weights.status().to_string();
  std::shared_ptr<const CudaWeights> shared = std::move(weights).value();
  const ProgramSpec spec =
      random_program(*config, 1024, 256, 33, {1, 2, 4, 8, 16, 32}, KvDtype::kBF16, 65536);
  const auto make = [&] {
    auto executor = std::make_unique<CudaExecutor>(*config, shared, spec);
    const Status status = executor->initialize();
    EXPECT_TRUE(status.ok()) << status.to_string();
    return executor;
  };
  std::vector<Tokens> prompts;
  for (int32_t j = 0; j < 16; ++j) {
    Tokens p;
    for (int32_t t = 0; t < 4 + 9 * j; ++t) p.push_back((t * 131 + j * 977) % config->vocab_size);
    prompts.push_back(p);
  }
  constexpr int32_t kNumSteps = 32;
  auto solo_executor = make();
  auto executor = make();
  std::vector<testing::GreedyRun> solo;
  for (const Tokens& p : prompts) solo.push_back(testing::run_greedy(*solo_executor, p, kNumSteps));
  const auto together = testing::run_greedy_together(*executor, prompts, kNumSteps);
  int32_t differing_tokens = 0;
  int32_t diverged_sessions = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    bool diverged = false;
    for (int32_t s = 0; s < kNumSteps; ++s) {
      if (together[i].tokens[s] != solo[i].tokens[s]) {
        ++differing_tokens;
        if (!diverged) {
          std::printf("session %zu first differs at step %d\n", i, s);
          diverged = true;
        }
      }
    }
    diverged_sessions += diverged ? 1 : 0;
  }
  std::printf(
      "random bf16 'tiny' model, 16 sessions x %d greedy steps: %d of %d tokens differ between "
      "batched and solo runs (%d sessions diverge)\n",
      kNumSteps, differing_tokens, 16 * kNumSteps, diverged_sessions);
  SUCCEED();
}

// With sessions longer than kernels::kDecodeClusterMaxContext allowed, the executor captures two
// decode graphs per width — sequences up to that bound take the cluster-merged attention, longer
// ones the split kernel and its combine — and replays the one the step's longest sequence fits.
// Eager decode shapes its launches for the same bound, so each batch's logits equal it bit for
// bit (a replay of the other graph would merge the attention's splits differently).
TEST(CudaRandomModelTest, ShortAndLongContextDecodeGraphsEqualEagerDecode) {
  ASSERT_NO_FATAL_FAILURE(testing::require_cuda_device());
  const StatusOr<ModelConfig> config = named_geometry("tiny");
  ASSERT_TRUE(config.ok());
  CudaWeightsOptions weight_options;
  auto weights = CudaWeights::random(*config, {TensorType::kBF16, 11}, weight_options);
  ASSERT_TRUE(weights.ok()) << weights.status().to_string();
  std::shared_ptr<const CudaWeights> shared = std::move(weights).value();
  const int32_t long_prompt = kernels::kDecodeClusterMaxContext + 300;
  const ProgramSpec spec = random_program(*config, long_prompt + 64, 256, 33, {1, 2, 4},
                                          KvDtype::kBF16, 4 * (long_prompt + 64));
  CudaExecutorOptions eager_options;
  eager_options.use_graphs = false;
  CudaExecutor graphs(*config, shared, spec);
  CudaExecutor eager(*config, shared, spec, eager_options);
  ASSERT_TRUE(graphs.initialize().ok());
  ASSERT_TRUE(eager.initialize().ok());
  const auto prompt = [&](int32_t length, int32_t seed) {
    Tokens p;
    for (int32_t t = 0; t < length; ++t) p.push_back((t * 131 + seed * 977) % config->vocab_size);
    return p;
  };
  const std::vector<Tokens> short_batch = {prompt(5, 1), prompt(40, 2), prompt(17, 3)};
  const std::vector<Tokens> mixed_batch = {prompt(23, 4), prompt(long_prompt, 5)};
  for (const std::vector<Tokens>* batch : {&short_batch, &mixed_batch}) {
    const auto with_graphs = testing::run_greedy_together(graphs, *batch, 6);
    const auto without = testing::run_greedy_together(eager, *batch, 6);
    for (size_t i = 0; i < batch->size(); ++i) {
      EXPECT_EQ(with_graphs[i].tokens, without[i].tokens) << "session " << i;
      EXPECT_EQ(testing::max_abs_diff(with_graphs[i].logits, without[i].logits), 0.0f)
          << (batch == &short_batch ? "short" : "mixed") << " batch, session " << i;
    }
  }
  EXPECT_GT(graphs.stats().num_graph_launches, 0);
  EXPECT_EQ(eager.stats().num_graph_launches, 0);
}

// How closely executor `a` (int8 activations) follows `b` (exact ones) over the same steps
// (feed_side_by_side): the worst |logit difference| / max |logit| of any row, and how many rows
// pick the same greedy token.
struct RowAgreement {
  int32_t rows = 0;
  int32_t same_argmax = 0;
  float worst_relative = 0.0f;
};

template <class Token>
RowAgreement compare_side_by_side(Executor& a, Executor& b, int32_t num_sessions,
                                  const std::vector<int32_t>& lengths, Token token,
                                  int32_t vocab_size) {
  RowAgreement agreement;
  feed_side_by_side(
      a, b, num_sessions, lengths, token,
      [&](int32_t, const std::vector<float>& a_logits, const std::vector<float>& b_logits) {
        ASSERT_EQ(a_logits.size(), b_logits.size());
        const auto vocab = static_cast<size_t>(vocab_size);
        for (size_t r = 0; r * vocab < a_logits.size(); ++r) {
          const std::span<const float> x(a_logits.data() + r * vocab, vocab);
          const std::span<const float> y(b_logits.data() + r * vocab, vocab);
          agreement.worst_relative = std::max(agreement.worst_relative, relative_difference(x, y));
          agreement.same_argmax += testing::argmax(x) == testing::argmax(y) ? 1 : 0;
          ++agreement.rows;
        }
      });
  return agreement;
}

// Int8 rounding, not a broken product: some difference (the int8 path ran), under 5% of the
// logits' range, the same greedy token in 9 rows of 10.
void expect_int8_rounding(const RowAgreement& agreement) {
  EXPECT_GT(agreement.worst_relative, 0.0f) << "int8 activations were not used";
  EXPECT_LT(agreement.worst_relative, 0.05f);
  EXPECT_GE(agreement.same_argmax, agreement.rows * 9 / 10);
}

// Random weights of `spec` for `config`, shared by the executors a test compares.
void make_random_weights(const ModelConfig& config, const RandomWeightsSpec& spec,
                         const CudaWeightsOptions& options,
                         std::shared_ptr<const CudaWeights>* shared) {
  auto weights = CudaWeights::random(config, spec, options);
  ASSERT_TRUE(weights.ok()) << weights.status().to_string();
  *shared = std::move(weights).value();
}

// Two initialized executors over one set of weights and one program: `a` with `a_options`, `b`
// with `b_options` and, where `b_switch` names one, that environment switch set to 0 while `b` is
// made (the forward reads its switches then), so `b` takes the path the switch turns off to.
struct ExecutorPair {
  std::unique_ptr<CudaExecutor> a;
  std::unique_ptr<CudaExecutor> b;
};

void make_executor_pair(const ModelConfig& config, const std::shared_ptr<const CudaWeights>& shared,
                        const ProgramSpec& spec, const CudaExecutorOptions& a_options,
                        const CudaExecutorOptions& b_options, const char* b_switch,
                        ExecutorPair* pair) {
  pair->a = std::make_unique<CudaExecutor>(config, shared, spec, a_options);
  const Status a_initialized = pair->a->initialize();
  ASSERT_TRUE(a_initialized.ok()) << a_initialized.to_string();
  if (b_switch != nullptr) {
    ASSERT_EQ(setenv(b_switch, "0", 1), 0);
  }
  pair->b = std::make_unique<CudaExecutor>(config, shared, spec, b_options);
  const Status b_initialized = pair->b->initialize();
  if (b_switch != nullptr) {
    ASSERT_EQ(unsetenv(b_switch), 0);
  }
  ASSERT_TRUE(b_initialized.ok()) << b_initialized.to_string();
}

// Executor options with exact (f32) activations.
CudaExecutorOptions exact_activations() {
  CudaExecutorOptions options;
  options.int8_activations = false;
  return options;
}

// Small batches with int8 activations — Q8_0 / Q4_K / Q6_K / Q4_0 on the int8 tensor cores from
// 2 / 2 / 2 / 3 rows to 16 (kernels::launch_int8_matmul; RMSNorm and the kept-row gather folded
// into the quantize launch), one row in the fused decode products (dp4a; Q8_0 / Q4_0 with the
// normed inputs handed over by the output and down products), also Q6_K beside Q4_K
// in the Q4_K_M mix: sessions stepping the same tokens
// must give the logits of the same executor with exact (f32) activations within int8 rounding (a
// few percent of the logits' range), and the same greedy token in nearly every row.
TEST(CudaRandomModelTest, SmallBatchesWithInt8ActivationsStayWithinInt8Rounding) {
  ASSERT_NO_FATAL_FAILURE(testing::require_cuda_device());
  const StatusOr<ModelConfig> config = named_geometry("tiny");
  ASSERT_TRUE(config.ok());
  const struct {
    TensorType type;
    std::vector<int32_t> sessions;
    bool q4_k_m = false;  // Q4_K with Q6_K beside it (RandomWeightsSpec::q4_k_m)
  } cases[] = {{TensorType::kQ8_0, {1, 3, 8, 12}},
               {TensorType::kQ4_0, {1, 3, 8, 12}},
               {TensorType::kQ4_K, {1, 3, 8, 12}},
               {TensorType::kQ6_K, {1, 5}},
               {TensorType::kQ4_K, {1, 3, 8}, true}};
  for (const auto& [type, sessions, q4_k_m] : cases) {
    SCOPED_TRACE(std::string(tensor_type_name(type)) + (q4_k_m ? " (Q4_K_M mix)" : ""));
    std::shared_ptr<const CudaWeights> shared;
    ASSERT_NO_FATAL_FAILURE(
        make_random_weights(*config, {type, 17, q4_k_m}, CudaWeightsOptions{}, &shared));
    const ProgramSpec spec =
        random_program(*config, 256, 64, 33, {1, 2, 4, 8, 16}, KvDtype::kBF16, 4096);
    ExecutorPair int8_exact;
    ASSERT_NO_FATAL_FAILURE(
        make_executor_pair(*config, shared, spec, {}, exact_activations(), nullptr, &int8_exact));
    for (const int32_t num_sessions : sessions) {
      const std::vector<int32_t> lengths(6, 1);  // one token per session and step
      const RowAgreement agreement = compare_side_by_side(
          *int8_exact.a, *int8_exact.b, num_sessions, lengths,
          [&](int32_t step, int32_t i, int32_t) {
            return (step * 977 + i * 131 + 5) % config->vocab_size;
          },
          config->vocab_size);
      ASSERT_FALSE(::testing::Test::HasFatalFailure());
      std::printf(
          "%s, %d sessions: worst |logit difference| / max |logit| %.3g, %d of %d rows "
          "with the same greedy token\n",
          (std::string(tensor_type_name(type)) + (q4_k_m ? " (Q4_K_M mix)" : "")).c_str(),
          num_sessions, static_cast<double>(agreement.worst_relative), agreement.same_argmax,
          agreement.rows);
      expect_int8_rounding(agreement);
    }
  }
}

// gemma3's post-norm path (cuda_forward_post_norm.cpp) with int8 activations: one to four rows
// of Q8_0 / Q4_0 on the fused decode products after a quantize launch, wider ones on the int8
// tensor cores. On "tiny-gemma" (heads of 256, post norms, GeGLU, a window of 16 on every other
// layer with its own rope) sessions stepping the same tokens must give the logits of the same
// executor with exact activations within int8 rounding, and the same greedy token in nearly every
// row; then a 40-token prompt of one session (the prefill kernel at head size 256), the same.
TEST(CudaRandomModelTest, PostNormModelsWithInt8ActivationsStayWithinInt8Rounding) {
  ASSERT_NO_FATAL_FAILURE(testing::require_cuda_device());
  const StatusOr<ModelConfig> config = named_geometry("tiny-gemma");
  ASSERT_TRUE(config.ok());
  ASSERT_TRUE(config->has_post_norms);
  for (const TensorType type : {TensorType::kQ8_0, TensorType::kQ4_0}) {
    SCOPED_TRACE(tensor_type_name(type));
    std::shared_ptr<const CudaWeights> shared;
    ASSERT_NO_FATAL_FAILURE(
        make_random_weights(*config, {type, 23}, CudaWeightsOptions{}, &shared));
    const ProgramSpec spec =
        random_program(*config, 256, 64, 33, {1, 2, 4, 8, 16}, KvDtype::kBF16, 4096);
    ExecutorPair int8_exact;
    ASSERT_NO_FATAL_FAILURE(
        make_executor_pair(*config, shared, spec, {}, exact_activations(), nullptr, &int8_exact));
    for (const auto& [num_sessions, lengths] :
         {std::pair{1, std::vector<int32_t>(20, 1)}, std::pair{3, std::vector<int32_t>(6, 1)},
          std::pair{8, std::vector<int32_t>(4, 1)}, std::pair{1, std::vector<int32_t>{40, 1, 1}}}) {
      const RowAgreement agreement = compare_side_by_side(
          *int8_exact.a, *int8_exact.b, num_sessions, lengths,
          [&](int32_t step, int32_t i, int32_t t) {
            return (step * 977 + i * 131 + t * 31 + 5) % config->vocab_size;
          },
          config->vocab_size);
      ASSERT_FALSE(::testing::Test::HasFatalFailure());
      std::printf(
          "tiny-gemma %s, %d sessions, %zu steps (first %d tokens): worst |logit difference| / "
          "max |logit| %.3g, %d of %d rows with the same greedy token\n",
          std::string(tensor_type_name(type)).c_str(), num_sessions, lengths.size(), lengths[0],
          static_cast<double>(agreement.worst_relative), agreement.same_argmax, agreement.rows);
      expect_int8_rounding(agreement);
    }
  }
}

// The post-norm path fused (one to four rows on int8 activations: each quantize launch joins the
// post-normed block output to the residual, GeGLU in the gate|up epilogue) against its plain
// sequence (CELLM_CUDA_POST_NORM_FUSED=0: post norm, add and norm as launches of their own, GeGLU
// apart), both on int8 activations, on "tiny-gemma" of Q8_0, Q4_0 and Q4_K (per-256 input), and
// of Q4_0 with a Q6_K or a BF16 head (tied embedding: llama.cpp's Q4_0 files, a checkpoint's bf16
// table — the latter takes the plain path's tail), and "tiny-gemma2" of Q4_0 (soft caps, no q/k
// norms): logits within int8 rounding of each other and
// the same greedy token in nearly every row — one and two sessions stepping, and decode after a
// 40-token prompt.
TEST(CudaRandomModelTest, ThePostNormFusedPathGivesThePlainPathsLogitsWithinInt8Rounding) {
  ASSERT_NO_FATAL_FAILURE(testing::require_cuda_device());
  const struct {
    const char* geometry;
    TensorType type;
    std::optional<TensorType> head;
  } kinds[] = {{"tiny-gemma", TensorType::kQ8_0, std::nullopt},
               {"tiny-gemma", TensorType::kQ4_0, std::nullopt},
               {"tiny-gemma", TensorType::kQ4_K, std::nullopt},
               {"tiny-gemma", TensorType::kQ4_0, TensorType::kQ6_K},
               {"tiny-gemma", TensorType::kQ4_0, TensorType::kBF16},
               {"tiny-gemma2", TensorType::kQ4_0, std::nullopt}};
  for (const auto& [geometry, type, head] : kinds) {
    SCOPED_TRACE(std::string(geometry) + " " + std::string(tensor_type_name(type)) + " head " +
                 std::string(tensor_type_name(head.value_or(type))));
    const StatusOr<ModelConfig> config = named_geometry(geometry);
    ASSERT_TRUE(config.ok());
    ASSERT_TRUE(config->tied_embeddings);
    RandomWeightsSpec random_spec{type, 29};
    random_spec.head_type = head;
    std::shared_ptr<const CudaWeights> shared;
    ASSERT_NO_FATAL_FAILURE(
        make_random_weights(*config, random_spec, CudaWeightsOptions{}, &shared));
    const ProgramSpec spec = random_program(*config, 256, 64, 41, {1, 2, 4}, KvDtype::kBF16, 2048);
    ExecutorPair fused_plain;
    ASSERT_NO_FATAL_FAILURE(make_executor_pair(*config, shared, spec, {}, {},
                                               "CELLM_CUDA_POST_NORM_FUSED", &fused_plain));
    for (const auto& [num_sessions, lengths] :
         {std::pair{1, std::vector<int32_t>(12, 1)}, std::pair{2, std::vector<int32_t>(6, 1)},
          std::pair{1, std::vector<int32_t>{40, 1, 1, 1}}}) {
      const RowAgreement agreement = compare_side_by_side(
          *fused_plain.a, *fused_plain.b, num_sessions, lengths,
          [&](int32_t step, int32_t i, int32_t t) {
            return (step * 613 + i * 97 + t * 41 + 3) % config->vocab_size;
          },
          config->vocab_size);
      ASSERT_FALSE(::testing::Test::HasFatalFailure());
      std::printf(
          "%s %s (head %s), %d sessions, fused vs plain post-norm path: worst |logit "
          "difference| / max |logit| %.3g, %d of %d rows with the same greedy token\n",
          geometry, std::string(tensor_type_name(type)).c_str(),
          std::string(tensor_type_name(head.value_or(type))).c_str(), num_sessions,
          static_cast<double>(agreement.worst_relative), agreement.same_argmax, agreement.rows);
      EXPECT_LT(agreement.worst_relative, 0.05f);
      EXPECT_GE(agreement.same_argmax, agreement.rows * 9 / 10);
    }
  }
}

// Wide steps take each product's bf16 input from the RMSNorm, SwiGLU or decode attention before
// it, in the order the product reads (CudaForward::wide_input): the fused wide product's order for
// 17–128 rows of Q8_0 / Q4_0 (Q4_0: 17–48 with resident bf16 copies), the columns as they are for
// cuBLAS (BF16 weights; Q8_0 / Q4_0 beyond, on the copies or dequantized in tiles). On a random
// model, 20, 40 and 150 sessions (a three-token prompt each — one eager prefill step at 150 —,
// then decode steps) must give the logits of the same executor with that turned off
// (CELLM_CUDA_WIDE_INPUT=0: each product rounds, and permutes, its f32 input in a launch of its
// own) bit for bit.
// A Q4_K_M model's layers whose v is Q6_K cannot fuse q|k|v into one matrix; the fused layer runs
// q, k and v as three products on one input instead (then rope_kv). With exact (f32) activations
// its logits must be the unfused sequence's (CELLM_CUDA_FUSED=0) up to the products' summation
// order — on the qwen geometry, whose q|k|v bias each product takes its part of.
TEST(CudaRandomModelTest, TheFusedLayerWithQKAndVApartGivesTheUnfusedSequencesLogits) {
  ASSERT_NO_FATAL_FAILURE(testing::require_cuda_device());
  const StatusOr<ModelConfig> config = named_geometry("tiny-qwen");
  ASSERT_TRUE(config.ok());
  std::shared_ptr<const CudaWeights> shared;
  ASSERT_NO_FATAL_FAILURE(
      make_random_weights(*config, {TensorType::kQ4_K, 23, true}, CudaWeightsOptions{}, &shared));
  int32_t apart = 0;
  for (int32_t l = 0; l < config->num_layers; ++l) apart += shared->layer(l).qkv_fused() ? 0 : 1;
  ASSERT_GT(apart, 0) << "no layer with q, k and v apart";
  ASSERT_LT(apart, config->num_layers) << "no layer with q|k|v fused";
  const ProgramSpec spec = random_program(*config, 256, 64, 37, {1, 2, 4}, KvDtype::kBF16, 2048);
  ExecutorPair fused_unfused;
  ASSERT_NO_FATAL_FAILURE(make_executor_pair(*config, shared, spec, exact_activations(),
                                             exact_activations(), "CELLM_CUDA_FUSED",
                                             &fused_unfused));
  float worst_relative = 0.0f;
  feed_side_by_side(
      *fused_unfused.a, *fused_unfused.b, 1, {3, 1, 1, 1, 1, 1},
      [&](int32_t step, int32_t, int32_t t) {
        return (step * 577 + t * 89 + 11) % config->vocab_size;
      },
      [&](int32_t, const std::vector<float>& a_logits, const std::vector<float>& b_logits) {
        ASSERT_EQ(a_logits.size(), b_logits.size());
        worst_relative = std::max(worst_relative, relative_difference(a_logits, b_logits));
      });
  ASSERT_FALSE(::testing::Test::HasFatalFailure());
  std::printf("q, k and v apart, fused vs unfused: worst |logit difference| / max |logit| %.3g\n",
              worst_relative);
  // The same kernels on the same values: equal bits today (0); a q|k|v bias taken whole by each
  // product instead of its part measured 1.2e-5.
  EXPECT_LT(worst_relative, 2e-6f);
}

// Wide steps of a Q4_K_M model run q, k and v apart on the int8 tensor cores from one quantize
// launch with the norm folded in (CudaForward::unfused_qkv), each product into its columns with
// its part of the q|k|v bias. Their logits must be those of the norm into a buffer and a quantize
// launch per product (CELLM_CUDA_INT8_QKV_APART=0) bit for bit: the same int8 values, the same
// products. On the qwen geometry (q|k|v bias), 3 and 8 sessions.
TEST(CudaRandomModelTest, QKAndVApartOnTheInt8TensorCoresShareOneQuantizedInput) {
  ASSERT_NO_FATAL_FAILURE(testing::require_cuda_device());
  const StatusOr<ModelConfig> config = named_geometry("tiny-qwen");
  ASSERT_TRUE(config.ok());
  std::shared_ptr<const CudaWeights> shared;
  ASSERT_NO_FATAL_FAILURE(
      make_random_weights(*config, {TensorType::kQ4_K, 29, true}, CudaWeightsOptions{}, &shared));
  int32_t apart = 0;
  for (int32_t l = 0; l < config->num_layers; ++l) {
    const CudaLayerWeights& layer = shared->layer(l);
    if (layer.qkv_fused()) continue;
    ++apart;
    for (const kernels::DeviceWeight* w : {&layer.wq, &layer.wk, &layer.wv}) {
      ASSERT_TRUE(kernels::int8_matmul_supports(*w)) << "layer " << l;
      ASSERT_LE(kernels::int8_matmul_min_tokens(w->type), 3) << "layer " << l;
    }
  }
  ASSERT_GT(apart, 0) << "no layer with q, k and v apart";
  ASSERT_NE(shared->layer(0).qkv_bias, nullptr);
  const ProgramSpec spec = random_program(*config, 256, 64, 37, {1, 2, 4, 8}, KvDtype::kBF16, 2048);
  ExecutorPair shared_input_per_product;
  ASSERT_NO_FATAL_FAILURE(make_executor_pair(
      *config, shared, spec, {}, {}, "CELLM_CUDA_INT8_QKV_APART", &shared_input_per_product));
  for (const int32_t num_sessions : {3, 8}) {
    feed_side_by_side(
        *shared_input_per_product.a, *shared_input_per_product.b, num_sessions, {2, 1, 1, 1},
        [&](int32_t step, int32_t i, int32_t t) {
          return (step * 577 + i * 131 + t * 89 + 11) % config->vocab_size;
        },
        [&](int32_t step, const std::vector<float>& a_logits, const std::vector<float>& b_logits) {
          ASSERT_EQ(a_logits.size(), static_cast<size_t>(num_sessions * config->vocab_size));
          ASSERT_EQ(a_logits.size(), b_logits.size());
          EXPECT_EQ(testing::max_abs_diff(a_logits, b_logits), 0.0f)
              << num_sessions << " sessions, step " << step;
        });
  }
}

TEST(CudaRandomModelTest, WideStepsGetTheirProductsInputFromTheKernelBeforeToTheSameBits) {
  ASSERT_NO_FATAL_FAILURE(testing::require_cuda_device());
  const StatusOr<ModelConfig> config = named_geometry("tiny");
  ASSERT_TRUE(config.ok());
  const struct {
    TensorType type;
    bool copies;
  } variants[] = {{TensorType::kQ8_0, false},
                  {TensorType::kQ4_0, false},
                  {TensorType::kQ4_0, true},
                  {TensorType::kBF16, false}};
  for (const auto& [type, copies] : variants) {
    SCOPED_TRACE(std::string(tensor_type_name(type)) + (copies ? " with bf16 copies" : ""));
    CudaWeightsOptions weight_options;
    weight_options.resident_bf16 = copies;
    std::shared_ptr<const CudaWeights> shared;
    ASSERT_NO_FATAL_FAILURE(make_random_weights(*config, {type, 19}, weight_options, &shared));
    const ProgramSpec spec = random_program(
        *config, 1024, 512, 257, {1, 2, 4, 8, 16, 32, 64, 128, 256}, KvDtype::kBF16, 4096);
    // The steps below do take both orders (20 / 40 / 150 sessions: widths 32 / 64 / 256).
    const bool quantized = type != TensorType::kBF16;
    const kernels::WideOrder at_32 =
        quantized ? kernels::WideOrder::kFused : kernels::WideOrder::kNatural;
    const kernels::WideOrder at_64 = quantized && !copies ? at_32 : kernels::WideOrder::kNatural;
    ASSERT_EQ(kernels::matmul_wide_input_order(shared->layer(0).gate_up, 32, copies), at_32);
    ASSERT_EQ(kernels::matmul_wide_input_order(shared->layer(0).w_down, 64, copies), at_64);
    ASSERT_EQ(kernels::matmul_wide_input_order(shared->layer(0).w_down, 256, copies),
              kernels::WideOrder::kNatural);
    ASSERT_EQ(shared->bf16_copy(shared->layer(0).w_down) != nullptr, copies);
    ExecutorPair wide_permuting;
    ASSERT_NO_FATAL_FAILURE(make_executor_pair(*config, shared, spec, {}, {},
                                               "CELLM_CUDA_WIDE_INPUT", &wide_permuting));
    for (const int32_t num_sessions : {20, 40, 150}) {
      const std::vector<int32_t> lengths = {3, 1, 1, 1};  // a prompt, then one token per step
      feed_side_by_side(
          *wide_permuting.a, *wide_permuting.b, num_sessions, lengths,
          [&](int32_t step, int32_t i, int32_t t) {
            return (step * 977 + i * 131 + t * 17 + 5) % config->vocab_size;
          },
          [&](int32_t step, const std::vector<float>& a_logits,
              const std::vector<float>& b_logits) {
            ASSERT_EQ(a_logits.size(), static_cast<size_t>(num_sessions * config->vocab_size));
            ASSERT_EQ(a_logits.size(), b_logits.size());
            EXPECT_EQ(testing::max_abs_diff(a_logits, b_logits), 0.0f)
                << num_sessions << " sessions, step " << step;
          });
    }
  }
}

// Resident bf16 copies of the quantized matrices (cuBLAS on the copies) against the same weights
// without them (the fused wide product to 128 rows, cuBLAS on tiles dequantized per step beyond):
// on a random model, a 384-row prefill step of 64 sessions (tiles / copies) and two 64-row decode
// steps (fused product / copies) give finite logits within bf16 rounding of each other.
TEST(CudaRandomModelTest, ResidentBf16CopiesGiveTheLogitsOfWeightsDequantizedPerStep) {
  ASSERT_NO_FATAL_FAILURE(testing::require_cuda_device());
  const StatusOr<ModelConfig> config = named_geometry("tiny");
  ASSERT_TRUE(config.ok());
  for (const TensorType type : {TensorType::kQ4_0, TensorType::kQ8_0, TensorType::kQ4_K}) {
    SCOPED_TRACE(std::string(tensor_type_name(type)));
    CudaWeightsOptions with_copies;
    with_copies.resident_bf16 = true;
    auto plain = CudaWeights::random(*config, {type, 23}, CudaWeightsOptions{});
    auto copied = CudaWeights::random(*config, {type, 23}, with_copies);
    ASSERT_TRUE(plain.ok() && copied.ok());
    ASSERT_TRUE((*copied)->has_bf16_copies());
    const ProgramSpec spec =
        random_program(*config, 1024, 512, 257, {1, 2, 4, 8, 16, 32, 64}, KvDtype::kBF16, 4096);
    CudaExecutor a(*config, std::move(plain).value(), spec);
    CudaExecutor b(*config, std::move(copied).value(), spec);
    ASSERT_TRUE(a.initialize().ok());
    ASSERT_TRUE(b.initialize().ok());
    constexpr int32_t kSessions = 64;
    const std::vector<int32_t> lengths = {6, 1, 1};  // a prompt, then one token per step
    feed_side_by_side(
        a, b, kSessions, lengths,
        [&](int32_t step, int32_t i, int32_t t) {
          return (step * 613 + i * 97 + t * 31 + 7) % config->vocab_size;
        },
        [&](int32_t step, const std::vector<float>& x, const std::vector<float>& y) {
          ASSERT_EQ(x.size(), static_cast<size_t>(kSessions * config->vocab_size));
          ASSERT_EQ(x.size(), y.size());
          float range = 0.0f;
          for (size_t i = 0; i < x.size(); ++i) {
            ASSERT_TRUE(std::isfinite(x[i]) && std::isfinite(y[i]))
                << "step " << step << " i " << i;
            range = std::max(range, std::fabs(x[i]));
          }
          const auto vocab = static_cast<size_t>(config->vocab_size);
          int32_t same_argmax = 0;
          for (size_t r = 0; r < static_cast<size_t>(kSessions); ++r) {
            same_argmax +=
                testing::argmax(std::span<const float>(x.data() + r * vocab, vocab)) ==
                        testing::argmax(std::span<const float>(y.data() + r * vocab, vocab))
                    ? 1
                    : 0;
          }
          const float worst = testing::max_abs_diff(x, y) / range;
          std::printf(
              "%s step %d: worst |logit difference| / max |logit| %.3g, %d of %d same argmax\n",
              std::string(tensor_type_name(type)).c_str(), step, worst, same_argmax, kSessions);
          EXPECT_LT(worst, 2e-2f) << "step " << step;
          EXPECT_GE(same_argmax, kSessions * 9 / 10) << "step " << step;
        });
  }
}

}  // namespace
}  // namespace cellm
