// End to end on the CUDA executor with random weights (model_geometry.h's "tiny"): how often
// batched greedy tokens differ from solo ones (bf16; reported, not required); the decode graphs
// of short and of long contexts against eager decode, bit for bit; wide steps taking their
// products' bf16 input from the kernel before, bit for bit; resident bf16 copies against weights
// dequantized per step. The int8-activation and fused paths: cuda_random_model_int8_test.cpp.
// GPU tests (label cuda).
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

using testing::ExecutorPair;
using testing::feed_side_by_side;
using testing::make_executor_pair;
using testing::make_random_weights;
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
