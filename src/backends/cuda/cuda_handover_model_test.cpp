// End to end on the CUDA executor with random Q8_0 / Q4_0 weights (model_geometry.h's "tiny"):
// one-token steps whose products hand the next product its normed int8 input, each set of
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

// Status of an executor initialized with CELLM_CUDA_HANDOVER = `handovers` (read when its forward
// is made; the environment restored after).
Status initialize_with(CudaExecutor& executor, const char* handovers) {
  EXPECT_EQ(setenv("CELLM_CUDA_HANDOVER", handovers, 1), 0);
  const Status initialized = executor.initialize();
  EXPECT_EQ(unsetenv("CELLM_CUDA_HANDOVER"), 0);
  return initialized;
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
      float worst_relative = 0.0f;
      int32_t same_argmax = 0;
      const std::vector<int32_t> lengths = {3, 1, 1, 1, 1, 1, 1, 1, 1, 1};
      feed_side_by_side(
          handed, launched, 1, lengths,
          [&](int32_t step, int32_t, int32_t t) {
            return (step * 389 + t * 97 + 3) % config->vocab_size;
          },
          [&](int32_t, const std::vector<float>& a_logits, const std::vector<float>& b_logits) {
            ASSERT_EQ(a_logits.size(), b_logits.size());
            worst_relative = std::max(worst_relative, relative_difference(a_logits, b_logits));
            same_argmax += testing::argmax(a_logits) == testing::argmax(b_logits) ? 1 : 0;
          });
      ASSERT_FALSE(::testing::Test::HasFatalFailure());
      std::printf(
          "%s handover %s vs quantize launches: worst |logit difference| / max |logit| %.3g, %d "
          "of %zu steps with the same greedy token\n",
          std::string(tensor_type_name(type)).c_str(), handovers, worst_relative, same_argmax,
          lengths.size());
      EXPECT_GT(worst_relative, 0.0f) << "the handover did not run";
      EXPECT_LT(worst_relative, 0.05f);
      EXPECT_GE(same_argmax, static_cast<int32_t>(lengths.size()) - 1);
    }
  }
}

}  // namespace
}  // namespace cellm
