// End to end on the CUDA executor with random weights, its int8-activation and fused paths
// (model_geometry.h's "tiny", and "tiny-gemma" for the post-norm path): small batches with int8
// activations (Q8_0 / Q4_0 / Q4_K / Q6_K, the Q4_K_M mix) within int8 rounding of exact ones, and
// post-norm models likewise; the post-norm fused path against the plain one; the fused layer with
// q, k and v apart against the unfused sequence, and on the int8 tensor cores sharing one
// quantized input. The suite is cuda_random_model_test.cpp's (CudaRandomModelTest). GPU tests
// (label cuda).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "backends/cuda/cuda_e2e_support.h"
#include "backends/cuda/cuda_side_by_side.h"
#include "backends/cuda/kernels/matmul.cuh"
#include "backends/cuda/kernels/matmul_int8.cuh"
#include "backends/cuda/model_geometry.h"

namespace cellm {
namespace {

using testing::compare_side_by_side;
using testing::exact_activations;
using testing::ExecutorPair;
using testing::expect_int8_rounding;
using testing::feed_side_by_side;
using testing::make_executor_pair;
using testing::make_random_weights;
using testing::relative_difference;
using testing::RowAgreement;

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

}  // namespace
}  // namespace cellm
