// The fixture of the CUDA end-to-end tests on stories260K (cuda_batching_test.cpp,
// cuda_runner_test.cpp): the model, its greedy reference (prompts and tokens) and the logits at
// every position of a token list on a fresh session. Test code only; one test at a time.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "backends/cuda/cuda_e2e_support.h"

namespace cellm::testing {

class StoriesReferenceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(require_cuda_device());
    model_ = open_model("stories260K.gguf");
    vocab_ = model_->config().vocab_size;
    const std::string path = test_model_path("reference/stories260K-greedy.json");
    std::ifstream in(path);
    ASSERT_TRUE(in) << "cannot open " << path;
    reference_ = nlohmann::json::parse(in);
  }

  size_t num_reference_cases() const { return reference_.at("cases").size(); }
  Tokens reference_prompt(size_t index) const {
    return reference_.at("cases").at(index).at("prompt_tokens").get<Tokens>();
  }
  Tokens reference_tokens(size_t index, size_t count) const {
    const Tokens all = reference_.at("cases").at(index).at("generated_tokens").get<Tokens>();
    return Tokens(all.begin(), all.begin() + static_cast<ptrdiff_t>(count));
  }
  // Reference case `index`'s prompt followed by its first `extra` greedy tokens.
  Tokens sequence(size_t index, size_t extra) const {
    Tokens tokens = reference_prompt(index);
    const Tokens more = reference_tokens(index, extra);
    tokens.insert(tokens.end(), more.begin(), more.end());
    return tokens;
  }
  // 16 prompts: the 6 reference prompts, then 10 of lengths 1 to 90 (BOS, then a pattern).
  std::vector<Tokens> sixteen_prompts() const {
    std::vector<Tokens> prompts;
    for (size_t i = 0; i < num_reference_cases(); ++i) prompts.push_back(reference_prompt(i));
    for (int32_t j = 0; prompts.size() < 16; ++j) {
      Tokens p = {1};
      const int32_t length = 1 + (j * 37) % 90;
      for (int32_t t = 1; t < length; ++t) p.push_back(3 + (t * 31 + j * 17) % (vocab_ - 3));
      prompts.push_back(p);
    }
    return prompts;
  }

  // Logits at every position of `tokens` on a new session, one input per token: [n, vocab].
  std::vector<float> logits_at_every_position(Executor& executor, const Tokens& tokens) const {
    const std::optional<SessionId> session = executor.open_session();
    EXPECT_TRUE(session.has_value());
    BatchInput batch;
    for (int32_t i = 0; i < static_cast<int32_t>(tokens.size()); ++i) {
      batch.inputs.push_back(step_input(*session, 0, tokens, i, i + 1, true));
    }
    const BatchOutput output = execute_ok(executor, batch);
    EXPECT_EQ(output.outputs.size(), tokens.size());
    return {output.logits.begin(), output.logits.end()};  // the view lasts until the next step
  }

  std::unique_ptr<Program> model_;
  int32_t vocab_ = 0;
  nlohmann::json reference_;
};

}  // namespace cellm::testing
