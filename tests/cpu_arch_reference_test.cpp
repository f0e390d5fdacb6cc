// End to end on the CPU executor against HF transformers (float64) references of tiny llama3,
// qwen2, qwen3 and mistral models (../shared/models/arch/README.md): the reference prompt ids fed
// as given, greedy decoding one step at a time; every token equal and every logits row within
// 1e-4. Between them they cover llama3 rope factors, tied embeddings, q/k/v biases, per-head q/k
// norms, a head size that is not hidden / heads, neox rope and GQA with one or two kv heads.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "cpu_executor_testing.h"

namespace cellm {
namespace {

constexpr float kTolerance = 1e-4f;

// A model and the features its GGUF must have, so each case tests what it claims to.
struct ArchCase {
  std::string name;
  Architecture architecture;
  RopeStyle rope_style;
  bool rope_factors;
  bool tied_embeddings;
  bool qkv_bias;
  bool qk_norm;
  int32_t num_kv_heads;
  int32_t head_dim;
};

void PrintTo(const ArchCase& arch, std::ostream* os) { *os << arch.name; }

class CpuArchReferenceTest : public ::testing::TestWithParam<ArchCase> {};

TEST_P(CpuArchReferenceTest, GreedyTokensAndLogitsMatchTransformers) {
  const ArchCase& arch = GetParam();
  const std::string& name = arch.name;
  const std::string json_path = testing::test_model_path("arch/" + name + "-reference.json");
  std::ifstream in(json_path);
  ASSERT_TRUE(in) << "cannot open " << json_path;
  const nlohmann::json reference = nlohmann::json::parse(in);
  const std::unique_ptr<Program> program =
      testing::load_test_program("arch/" + reference.at("model").get<std::string>());
  ASSERT_NE(program, nullptr);
  const ModelConfig& config = program->config();
  EXPECT_EQ(config.architecture, arch.architecture);
  EXPECT_EQ(config.rope.style, arch.rope_style);
  EXPECT_EQ(config.rope.has_freq_factors, arch.rope_factors);
  EXPECT_EQ(config.tied_embeddings, arch.tied_embeddings);
  EXPECT_EQ(config.has_qkv_bias, arch.qkv_bias);
  EXPECT_EQ(config.has_qk_norm, arch.qk_norm);
  EXPECT_EQ(config.num_kv_heads, arch.num_kv_heads);
  EXPECT_EQ(config.head_dim, arch.head_dim);
  auto executor = testing::make_executor(*program);
  ASSERT_GE(reference.at("cases").size(), 2u);

  float worst = 0.0f;
  for (const auto& c : reference.at("cases")) {
    const int case_number = c.at("case").get<int>();
    const auto prompt = c.at("prompt_tokens").get<std::vector<int32_t>>();
    const auto expected_tokens = c.at("generated_tokens").get<std::vector<int32_t>>();
    const int32_t vocab = c.at("vocab").get<int32_t>();
    ASSERT_EQ(vocab, config.vocab_size);
    const std::vector<float> expected_logits = testing::read_f32_file(
        testing::test_model_path("arch/" + c.at("logits_file").get<std::string>()));
    ASSERT_EQ(expected_logits.size(), expected_tokens.size() * static_cast<size_t>(vocab));

    const testing::GreedyRun run =
        testing::run_greedy(*executor, prompt, static_cast<int32_t>(expected_tokens.size()));
    EXPECT_EQ(run.tokens, expected_tokens) << name << " case " << case_number;
    worst =
        std::max(worst, testing::expect_rows_near(run.logits, expected_logits, vocab, kTolerance,
                                                  name + " case " + std::to_string(case_number)));
  }
  std::printf("%s: worst logits row max abs diff %.3g (tolerance %.3g)\n", name.c_str(),
              static_cast<double>(worst), static_cast<double>(kTolerance));
}

INSTANTIATE_TEST_SUITE_P(
    Architectures, CpuArchReferenceTest,
    ::testing::Values(ArchCase{"tiny-llama3", Architecture::kLlama, RopeStyle::kNormal, true, true,
                               false, false, 2, 16},
                      ArchCase{"tiny-qwen2", Architecture::kQwen2, RopeStyle::kNeox, false, false,
                               true, false, 2, 16},
                      ArchCase{"tiny-qwen3", Architecture::kQwen3, RopeStyle::kNeox, false, true,
                               false, true, 2, 32},
                      ArchCase{"tiny-mistral", Architecture::kLlama, RopeStyle::kNormal, false,
                               false, false, false, 1, 16}),
    [](const ::testing::TestParamInfo<ArchCase>& info) {
      std::string name = info.param.name;
      std::erase(name, '-');
      return name;
    });

}  // namespace
}  // namespace cellm
