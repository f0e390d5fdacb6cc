// Exporting each ../shared/models/arch/tiny-*-hf checkpoint (with stories260K's vocabulary via
// --tokenizer) gives a program whose greedy tokens equal HF transformers' references and whose
// logits are within 1e-4 of them (arch/README.md), and whose tensors are byte for byte those of
// llama.cpp's conversion of the same checkpoint (names, the llama Q/K row permutation, llama3
// rope_freqs, qwen2 biases, qwen3 q/k norms, tied embeddings).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "export_test_support.h"

namespace cellm {
namespace {

class ExportArchTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ExportArchTest, ProgramMatchesTheHfReferenceAndLlamaCppTensors) {
  const std::string name = GetParam();
  const std::string output = et::fresh_dir("arch_" + name) + "/program.gguf";
  ExportOptions options;
  options.source = ExportSource::kCheckpoint;
  options.input = testing::test_model_path("arch/" + name + "-hf");
  options.output = output;
  options.tokenizer_path = testing::test_model_path("stories260K.gguf");
  et::export_ok(options);
  const Program program = et::load_ok(output);

  StatusOr<GgufFile> converted = GgufFile::open(testing::test_model_path("arch/" + name + ".gguf"));
  ASSERT_TRUE(converted.ok());
  EXPECT_EQ(program.file().tensors().size(), converted->tensors().size());
  for (const GgufTensorInfo& info : converted->tensors()) {
    const GgufTensorInfo* mine = program.file().find_tensor(info.name);
    ASSERT_NE(mine, nullptr) << info.name;
    EXPECT_EQ(mine->dims, info.dims) << info.name;
    const auto a = converted->tensor_data(info), b = program.file().tensor_data(*mine);
    EXPECT_TRUE(std::equal(a.begin(), a.end(), b.begin(), b.end())) << info.name;
  }

  std::ifstream in(testing::test_model_path("arch/" + name + "-reference.json"));
  const nlohmann::json reference = nlohmann::json::parse(in);
  const nlohmann::json cases = reference.at("cases");
  ASSERT_FALSE(cases.empty());
  float worst = 0.0f;
  for (const auto& c : cases) {
    const auto prompt = c.at("prompt_tokens").get<std::vector<int32_t>>();
    const auto expected = c.at("generated_tokens").get<std::vector<int32_t>>();
    const std::vector<float> logits = testing::read_f32_file(
        testing::test_model_path("arch/" + c.at("logits_file").get<std::string>()));
    const int32_t vocab = c.at("vocab").get<int32_t>();
    ASSERT_EQ(logits.size(), expected.size() * static_cast<size_t>(vocab));
    const testing::GreedyRun run =
        et::greedy(program, prompt, static_cast<int32_t>(expected.size()));
    EXPECT_EQ(run.tokens, expected) << name << " case " << c.at("case");
    ASSERT_EQ(run.logits.size(), logits.size());
    for (size_t row = 0; row < expected.size(); ++row) {
      const auto span = [&](const std::vector<float>& v) {
        return std::span<const float>(v).subspan(row * vocab, vocab);
      };
      const float diff = testing::max_abs_diff(span(run.logits), span(logits));
      worst = std::max(worst, diff);
      EXPECT_LE(diff, 1e-4f) << name << " case " << c.at("case") << " row " << row;
    }
  }
  std::printf("%s: worst logits diff vs HF %.3g\n", name.c_str(), static_cast<double>(worst));
}

INSTANTIATE_TEST_SUITE_P(TinyModels, ExportArchTest,
                         ::testing::Values("tiny-llama3", "tiny-qwen2", "tiny-qwen3",
                                           "tiny-mistral"),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

}  // namespace
}  // namespace cellm
