// End to end on the CUDA executor with random Q8_0 / Q4_0 weights (model_geometry.h's "tiny"):
// one-token steps whose products hand the next product its (normed) int8 input, each set of
// handovers against quantize launches, within int8 rounding. GPU tests (label cuda).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "backends/cuda/cuda_e2e_support.h"
#include "backends/cuda/cuda_side_by_side.h"
#include "backends/cuda/model_geometry.h"

namespace cellm {
namespace {

using testing::feed_side_by_side;
using testing::relative_difference;

// Status of an executor initialized with the environment variable `name` = `value` (read when
// its forward is made; the environment restored after).
Status initialize_with(CudaExecutor& executor, const char* value,
                       const char* name = "CELLM_CUDA_HANDOVER") {
  EXPECT_EQ(setenv(name, value, 1), 0);
  const Status initialized = executor.initialize();
  EXPECT_EQ(unsetenv(name), 0);
  return initialized;
}

// Ten one-token steps of `a` and `b` side by side; the worst relative logit difference and the
// steps whose greedy tokens agree.
struct SideBySide {
  float worst_relative = 0.0f;
  int32_t same_argmax = 0;
  int32_t num_steps = 0;
};
SideBySide one_token_steps(CudaExecutor& a, CudaExecutor& b, int32_t vocab_size) {
  SideBySide result;
  const std::vector<int32_t> lengths = {3, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  result.num_steps = static_cast<int32_t>(lengths.size());
  feed_side_by_side(
      a, b, 1, lengths,
      [&](int32_t step, int32_t, int32_t t) { return (step * 389 + t * 97 + 3) % vocab_size; },
      [&](int32_t, const std::vector<float>& a_logits, const std::vector<float>& b_logits) {
        ASSERT_EQ(a_logits.size(), b_logits.size());
        result.worst_relative =
            std::max(result.worst_relative, relative_difference(a_logits, b_logits));
        result.same_argmax += testing::argmax(a_logits) == testing::argmax(b_logits) ? 1 : 0;
      });
  return result;
}

// One-token steps of Q8_0 / Q4_0 models hand q|k|v, gate|up and the LM head their normed int8
// input from the output and down products (kernels::DecodeOutput::kAddHandover): the int8 values
// of x ⊙ norm weight, the RMS scale applied to the sums. Each set of handovers (the output
// product's, the down product's, both; the default is per type) against quantize launches of the
// normed rows (CELLM_CUDA_HANDOVER=0), that is another rounding of the same values: the logits
// must agree within int8 rounding, and differ somewhere (else the handover did not run).
TEST(CudaHandoverModelTest, HandedOverInputsGiveTheQuantizeLaunchesLogitsWithinInt8Rounding) {
  ASSERT_NO_FATAL_FAILURE(testing::require_cuda_device());
  const StatusOr<ModelConfig> config = named_geometry("tiny");
  ASSERT_TRUE(config.ok());
  const std::vector<const char*> variants = {"o,down", "o", "down"};
  for (const TensorType type : {TensorType::kQ8_0, TensorType::kQ4_0}) {
    auto weights = CudaWeights::random(*config, {type, 41}, CudaWeightsOptions{});
    ASSERT_TRUE(weights.ok()) << weights.status().to_string();
    std::shared_ptr<const CudaWeights> shared = std::move(weights).value();
    const ProgramSpec spec = random_program(*config, 256, 64, 43, {1, 2}, KvDtype::kBF16, 2048);
    for (const char* handovers : variants) {
      SCOPED_TRACE(std::string(tensor_type_name(type)) + " handover " + handovers);
      CudaExecutor handed(*config, shared, spec);
      const Status handed_initialized = initialize_with(handed, handovers);
      CudaExecutor launched(*config, shared, spec);
      const Status initialized = initialize_with(launched, "0");
      ASSERT_TRUE(handed_initialized.ok()) << handed_initialized.to_string();
      ASSERT_TRUE(initialized.ok()) << initialized.to_string();
      const SideBySide r = one_token_steps(handed, launched, config->vocab_size);
      ASSERT_FALSE(::testing::Test::HasFatalFailure());
      std::printf(
          "%s handover %s vs quantize launches: worst |logit difference| / max |logit| %.3g, %d "
          "of %d steps with the same greedy token\n",
          std::string(tensor_type_name(type)).c_str(), handovers, r.worst_relative, r.same_argmax,
          r.num_steps);
      EXPECT_GT(r.worst_relative, 0.0f) << "the handover did not run";
      EXPECT_LT(r.worst_relative, 0.05f);
      EXPECT_GE(r.same_argmax, r.num_steps - 1);
    }
  }
}

// gate|up handing down its SwiGLU values as int8 per 16 (kernels::DecodeOutput::kSwigluHandover,
// CELLM_CUDA_HANDOVER_SWIGLU=1) against the quantize launch per 32 (=0), the other handovers at
// their defaults: another rounding of the same values, so the logits agree within int8 rounding
// and differ somewhere.
TEST(CudaHandoverModelTest, SwigluValuesHandedOverPer16GiveTheQuantizeLaunchLogitsWithinRounding) {
  ASSERT_NO_FATAL_FAILURE(testing::require_cuda_device());
  const StatusOr<ModelConfig> config = named_geometry("tiny");
  ASSERT_TRUE(config.ok());
  for (const TensorType type : {TensorType::kQ8_0, TensorType::kQ4_0}) {
    SCOPED_TRACE(tensor_type_name(type));
    auto weights = CudaWeights::random(*config, {type, 47}, CudaWeightsOptions{});
    ASSERT_TRUE(weights.ok()) << weights.status().to_string();
    std::shared_ptr<const CudaWeights> shared = std::move(weights).value();
    const ProgramSpec spec = random_program(*config, 256, 64, 43, {1, 2}, KvDtype::kBF16, 2048);
    CudaExecutor handed(*config, shared, spec);
    const Status handed_initialized = initialize_with(handed, "1", "CELLM_CUDA_HANDOVER_SWIGLU");
    CudaExecutor launched(*config, shared, spec);
    const Status initialized = initialize_with(launched, "0", "CELLM_CUDA_HANDOVER_SWIGLU");
    ASSERT_TRUE(handed_initialized.ok()) << handed_initialized.to_string();
    ASSERT_TRUE(initialized.ok()) << initialized.to_string();
    const SideBySide r = one_token_steps(handed, launched, config->vocab_size);
    ASSERT_FALSE(::testing::Test::HasFatalFailure());
    std::printf(
        "%s SwiGLU handed over per 16 vs the quantize launch: worst |logit difference| / max "
        "|logit| %.3g, %d of %d steps with the same greedy token\n",
        std::string(tensor_type_name(type)).c_str(), r.worst_relative, r.same_argmax, r.num_steps);
    EXPECT_GT(r.worst_relative, 0.0f) << "the SwiGLU handover did not run";
    EXPECT_LT(r.worst_relative, 0.05f);
    EXPECT_GE(r.same_argmax, r.num_steps - 1);
  }
}

}  // namespace
}  // namespace cellm
