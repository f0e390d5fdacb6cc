// End to end on the CPU executor against llama.cpp's greedy references
// (../shared/models/reference/README.md): the prompt ids as given (BOS included), greedy decoding
// one step at a time; every token equal and every logits row within tolerance.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cpu_e2e_support.h"

namespace cellm {
namespace {

using testing::GreedyRun;

// Checks every case of a reference JSON (reference/<name>-greedy.json) against the executor.
void check_reference(const std::string& json_name, float tolerance) {
  const std::string json_path = testing::test_model_path("reference/" + json_name);
  std::ifstream in(json_path);
  ASSERT_TRUE(in) << "cannot open " << json_path;
  const nlohmann::json reference = nlohmann::json::parse(in);
  const std::unique_ptr<CpuModel> opened =
      testing::open_test_model(reference.at("model").get<std::string>());
  ASSERT_NE(opened, nullptr);
  const CpuModel& model = *opened;
  auto executor = testing::make_executor(model);
  ASSERT_GT(reference.at("cases").size(), 0u);

  float worst = 0.0f;
  for (const auto& c : reference.at("cases")) {
    const auto prompt = c.at("prompt_tokens").get<std::vector<int32_t>>();
    const auto expected_tokens = c.at("generated_tokens").get<std::vector<int32_t>>();
    const int32_t vocab = c.at("vocab").get<int32_t>();
    ASSERT_EQ(vocab, model.config.vocab_size);
    const std::vector<float> expected_logits = testing::read_f32_file(
        testing::test_model_path("reference/" + c.at("logits_file").get<std::string>()));
    ASSERT_EQ(expected_logits.size(), expected_tokens.size() * static_cast<size_t>(vocab));

    const GreedyRun run =
        testing::run_greedy(*executor, prompt, static_cast<int32_t>(expected_tokens.size()));
    EXPECT_EQ(run.tokens, expected_tokens)
        << "prompt \"" << c.at("prompt").get<std::string>() << "\"";
    ASSERT_EQ(run.logits.size(), expected_logits.size());
    for (size_t row = 0; row < expected_tokens.size(); ++row) {
      const size_t offset = row * static_cast<size_t>(vocab);
      const float diff =
          testing::max_abs_diff(std::span<const float>(run.logits).subspan(offset, vocab),
                                std::span<const float>(expected_logits).subspan(offset, vocab));
      worst = std::max(worst, diff);
      EXPECT_LE(diff, tolerance) << "prompt \"" << c.at("prompt").get<std::string>()
                                 << "\", logits row " << row;
    }
  }
  std::printf("%s: worst logits row max abs diff %.3g (tolerance %.3g)\n", json_name.c_str(),
              static_cast<double>(worst), static_cast<double>(tolerance));
}

TEST(CpuReferenceTest, Stories260KMatchesLlamaCppTokensAndLogits) {
  check_reference("stories260K-greedy.json", 1e-4f);
}

// The reference rounds activations to f16 before its f16 matrix products, so 2e-4
// (reference/README.md).
TEST(CpuReferenceTest, Llama2TinyRandomMatchesLlamaCppTokensAndLogits) {
  check_reference("llama-2-tiny-random-greedy.json", 2e-4f);
}

}  // namespace
}  // namespace cellm
