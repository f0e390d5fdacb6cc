// `cellm run`, `cellm generate` and `cellm perplexity` on the GPU, through the binary
// (tests/support/cellm_cli.h), on stories260K: `--backend cuda` generates the reference greedy
// tokens (the Runner sampling from the CUDA executor's pinned logits views and taking the device's
// argmax for greedy sessions), and `--backend auto` picks CUDA when a device is visible and says so
// in the summary and the report's config. Needs a GPU (label cuda). Thread-safety: test code, one
// thread.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backends/cuda/cuda_test_util.h"
#include "cellm_cli.h"
#include "test_models.h"

namespace cellm {
namespace {

namespace fs = std::filesystem;

nlohmann::json reference() {
  std::ifstream file(testing::test_model_path("reference/stories260K-greedy.json"));
  return nlohmann::json::parse(file);
}

class CudaCliTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(testing::require_cuda_device()); }
};

TEST_F(CudaCliTest, GenerateOnCudaMatchesTheReferenceGreedyTokens) {
  const nlohmann::json cases = reference().at("cases");
  for (const bool exact : {false, true}) {
    const nlohmann::json& c = cases.at(0);
    std::vector<std::string> args = {
        "generate", "--model",      testing::test_model_path("stories260K.gguf"),
        "--prompt", c.at("prompt"), "-n",
        "128",      "--json",       "--backend",
        "cuda"};
    if (exact) args.push_back("--exact-activations");
    const testing::CliResult r = testing::run_cellm(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const nlohmann::json out = nlohmann::json::parse(r.out);
    EXPECT_EQ(out.at("prompt_tokens"), c.at("prompt_tokens"));
    EXPECT_EQ(out.at("generated_tokens"), c.at("generated_tokens")) << "exact " << exact;
    EXPECT_EQ(out.at("text"), c.at("text"));
  }
}

// `cellm perplexity` on CUDA (prompt rows summarized on the device) against the CPU's, on every
// reference case's text at once, in chunks of 24 tokens.
TEST_F(CudaCliTest, PerplexityOnCudaIsTheCpus) {
  // The reference held in a local: a range-for over reference().at("cases") would iterate a
  // destroyed temporary (C++20 extends only the outermost temporary's life).
  const nlohmann::json cases = reference().at("cases");
  std::string text;
  for (const nlohmann::json& c : cases) text += c.at("text").get<std::string>();
  nlohmann::json got[2];
  for (int b = 0; b < 2; ++b) {
    const testing::CliResult r = testing::run_cellm(
        {"perplexity", "--model", testing::test_model_path("stories260K.gguf"), "--text", text,
         "--context", "24", "--json", "--backend", b == 0 ? "cpu" : "cuda"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    got[b] = nlohmann::json::parse(r.out);
  }
  EXPECT_EQ(got[1].at("backend"), "cuda");
  EXPECT_EQ(got[1].at("tokens_scored"), got[0].at("tokens_scored"));
  EXPECT_GT(got[0].at("chunks").get<int>(), 8);
  const double cpu = got[0].at("perplexity").get<double>();
  const double cuda = got[1].at("perplexity").get<double>();
  std::printf("perplexity: cpu %.6f, cuda %.6f\n", cpu, cuda);
  EXPECT_NEAR(cuda, cpu, 1e-4 * cpu);
}

TEST_F(CudaCliTest, RunWithAutoPicksCudaAndEveryPromptGetsItsReferenceTokens) {
  const nlohmann::json cases = reference().at("cases");
  const fs::path dir = fs::temp_directory_path() / ("cellm_cuda_run_" + std::to_string(getpid()));
  std::vector<std::string> prompts;
  for (const nlohmann::json& c : cases) prompts.push_back(c.at("prompt"));
  const std::string prompts_file = testing::write_prompts_file(dir / "prompts.txt", prompts);
  const fs::path report = dir / "out.json";
  const testing::CliResult r =
      testing::run_cellm({"run", "--model", testing::test_model_path("stories260K.gguf"),
                          "--prompts-file", prompts_file, "--max-new-tokens", "64", "--backend",
                          "auto", "--report-json", report.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("backend: cuda"), std::string::npos) << r.out;
  const nlohmann::json out = nlohmann::json::parse(testing::slurp(report));
  EXPECT_EQ(out.at("config").at("backend"), "cuda");
  // A plain model on CUDA gets the recommended plan.
  EXPECT_EQ(out.at("config").at("min_prefill_chunk"), 257);
  ASSERT_EQ(out.at("generations").size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    const nlohmann::json& g = out.at("generations").at(i);
    std::vector<int32_t> expected = cases.at(i).at("generated_tokens").get<std::vector<int32_t>>();
    const std::vector<int32_t> got = g.at("generated_tokens").get<std::vector<int32_t>>();
    ASSERT_LE(got.size(), expected.size()) << "case " << i;
    expected.resize(got.size());  // an EOS may end it early; up to there, the same tokens
    EXPECT_EQ(got, expected) << "case " << i;
    EXPECT_FALSE(got.empty()) << "case " << i;
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace cellm
