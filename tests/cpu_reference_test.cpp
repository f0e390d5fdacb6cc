// End to end on the CPU executor against llama.cpp's greedy references
// (../shared/models/reference/README.md): the prompt ids as given (BOS included), greedy decoding
// one step at a time; every token equal and every logits row within tolerance.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cpu_executor_testing.h"

namespace cellm {
namespace {

using testing::GreedyRun;

// Checks every case of a reference JSON (reference/<name>-greedy.json) against the executor.
void check_reference(const std::string& json_name, float tolerance) {
  const std::string json_path = testing::test_model_path("reference/" + json_name);
  std::ifstream in(json_path);
  ASSERT_TRUE(in) << "cannot open " << json_path;
  const nlohmann::json reference = nlohmann::json::parse(in);
  const std::unique_ptr<Program> program =
      testing::load_test_program(reference.at("model").get<std::string>());
  ASSERT_NE(program, nullptr);
  auto executor = testing::make_executor(*program);
  ASSERT_GT(reference.at("cases").size(), 0u);

  float worst = 0.0f;
  for (const auto& c : reference.at("cases")) {
    const auto prompt = c.at("prompt_tokens").get<std::vector<int32_t>>();
    const auto expected_tokens = c.at("generated_tokens").get<std::vector<int32_t>>();
    const int32_t vocab = c.at("vocab").get<int32_t>();
    ASSERT_EQ(vocab, program->config().vocab_size);
    const std::vector<float> expected_logits = testing::read_f32_file(
        testing::test_model_path("reference/" + c.at("logits_file").get<std::string>()));
    ASSERT_EQ(expected_logits.size(), expected_tokens.size() * static_cast<size_t>(vocab));

    const GreedyRun run =
        testing::run_greedy(*executor, prompt, static_cast<int32_t>(expected_tokens.size()));
    EXPECT_EQ(run.tokens, expected_tokens)
        << "prompt \"" << c.at("prompt").get<std::string>() << "\"";
    worst = std::max(
        worst, testing::expect_rows_near(run.logits, expected_logits, vocab, tolerance,
                                         "prompt \"" + c.at("prompt").get<std::string>() + "\""));
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
