// End to end through the `cellm` binary on stories260K: `cellm generate --json` against the
// reference greedy output, `cellm run --report-json` (generations in prompt order, engine metrics
// with preemptions, config), and bad arguments (one line, exit status 2).
//
// The binary is found by tests/support/cellm_cli.h. Every run hides the GPUs
// (CUDA_VISIBLE_DEVICES empty), so `--backend auto` is the CPU and `--backend cuda` has no device
// wherever the suite runs; src/backends/cuda/cuda_cli_test.cpp runs the CLI on a GPU.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cellm_cli.h"
#include "test_models.h"

namespace cellm {
namespace {

namespace fs = std::filesystem;

using Result = testing::CliResult;
using testing::slurp;

// Every run hides the GPUs: the suite's expectations are the CPU's, wherever it runs.
Result run_cellm(const std::vector<std::string>& args) {
  return testing::run_cellm(args, "CUDA_VISIBLE_DEVICES=");
}

nlohmann::json reference() {
  std::ifstream file(testing::test_model_path("reference/stories260K-greedy.json"));
  return nlohmann::json::parse(file);
}

std::vector<int32_t> head(const nlohmann::json& tokens, size_t n) {
  std::vector<int32_t> all = tokens.get<std::vector<int32_t>>();
  all.resize(std::min(n, all.size()));
  return all;
}

TEST(RuntimeCliTest, GenerateJsonMatchesTheFirstReferenceCase) {
  const nlohmann::json c = reference().at("cases").at(0);
  const Result r = run_cellm({"generate", "--model", testing::test_model_path("stories260K.gguf"),
                              "--prompt", c.at("prompt"), "-n", "128", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json out = nlohmann::json::parse(r.out);
  EXPECT_EQ(out.at("prompt_tokens"), c.at("prompt_tokens"));
  EXPECT_EQ(out.at("generated_tokens"), c.at("generated_tokens"));
  EXPECT_EQ(out.at("text"), c.at("text"));
  EXPECT_EQ(out.at("finish_reason"), "new_token_limit");
}

TEST(RuntimeCliTest, GeneratePromptTokensAreTakenAsGiven) {
  const nlohmann::json c = reference().at("cases").at(3);
  std::string ids;
  for (const int32_t id : c.at("prompt_tokens").get<std::vector<int32_t>>()) {
    ids += (ids.empty() ? "" : ",") + std::to_string(id);
  }
  const Result r = run_cellm({"generate", "--model", testing::test_model_path("stories260K.gguf"),
                              "--prompt-tokens", ids, "-n", "20", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json out = nlohmann::json::parse(r.out);
  EXPECT_EQ(out.at("prompt_tokens"), c.at("prompt_tokens")) << "no BOS added to given ids";
  EXPECT_EQ(out.at("generated_tokens").get<std::vector<int32_t>>(),
            head(c.at("generated_tokens"), 20));
}

TEST(RuntimeCliTest, RunWritesAReportInPromptOrderWithPreemptionsCounted) {
  const nlohmann::json cases = reference().at("cases");
  const fs::path dir = fs::temp_directory_path() / ("cellm_run_" + std::to_string(getpid()));
  std::vector<std::string> prompts;
  for (const nlohmann::json& c : cases) prompts.push_back(c.at("prompt"));
  const std::string prompts_file = testing::write_prompts_file(dir / "prompts.txt", prompts);
  const fs::path report = dir / "out.json";
  const Result r =
      run_cellm({"run", "--model", testing::test_model_path("stories260K.gguf"), "--prompts-file",
                 prompts_file, "--max-sessions", "6", "--max-cells", "300", "--max-step-tokens",
                 "64", "--max-new-tokens", "64", "--report-json", report.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("summary:"), std::string::npos) << r.out;
  const nlohmann::json out = nlohmann::json::parse(slurp(report));
  ASSERT_EQ(out.at("generations").size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    const nlohmann::json& g = out.at("generations").at(i);
    EXPECT_EQ(g.at("prompt"), cases[i].at("prompt"));
    EXPECT_EQ(g.at("prompt_tokens"), cases[i].at("prompt_tokens")) << "case " << i;
    EXPECT_EQ(g.at("generated_tokens").get<std::vector<int32_t>>(),
              head(cases[i].at("generated_tokens"), 64))
        << "case " << i;
    EXPECT_EQ(g.at("finish_reason"), "new_token_limit");
    EXPECT_TRUE(g.at("text").is_string());
    EXPECT_EQ(g.at("metrics").at("generated_tokens"), 64);
  }
  EXPECT_GT(out.at("engine").at("preemptions").get<int>(), 0) << "300 cells for 6 x ~70 tokens";
  EXPECT_EQ(out.at("engine").at("generated_tokens"), 6 * 64);
  EXPECT_EQ(out.at("config").at("max_cells"), 300);
  EXPECT_EQ(out.at("config").at("max_sessions"), 6);
}

TEST(RuntimeCliTest, BadArgumentsGiveOneClearLineAndExitStatusTwo) {
  const std::string model = testing::test_model_path("stories260K.gguf");
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"run", "--model", model, "--prompt", "hi", "--max-new-tokens", "-1"}, "--max-new-tokens"},
      {{"run", "--model", model, "--prompt", "hi", "--top-p", "1.5"}, "--top-p"},
      {{"run", "--model", model, "--prompt", "hi", "--decode-widths", "1,4,2"}, "--decode-widths"},
      {{"run", "--model", model}, "no prompts"},
      {{"run", "--model", model, "--prompts-file", "/no/such/file"}, "/no/such/file"},
      {{"generate", "--model", model}, "--prompt"},
      {{"generate", "--model", model, "--prompt-tokens", "1,two"}, "two"},
      {{"generate", "--model", model, "--prompt-tokens", "1,512"}, "512"},
      {{"run", "--model", model, "--prompt", "hi", "--max-cells", "100"}, "--max-cells 100"},
      {{"run", "--model", model, "--prompt", "hi", "--resident-bf16", "maybe"}, "--resident-bf16"},
      {{"serve", "--model", model, "--port", "70000"}, "--port"},
      {{"serve", "--model", model, "--max-concurrent", "0"}, "--max-concurrent"},
      {{"serve", "--model", model, "--max-cells", "100"}, "--max-cells 100"},
  };
  for (const auto& [args, words] : cases) {
    const Result r = run_cellm(args);
    EXPECT_EQ(r.exit_code, 2) << args.back() << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find(words), std::string::npos) << r.err;
  }
}

TEST(RuntimeCliTest, TheCudaBackendWithoutADeviceIsOneClearLine) {
  // Built with CUDA: no usable device; built without: no CUDA backend. Either way one line.
  for (const char* command : {"run", "generate"}) {
    const Result r = run_cellm({command, "--model", testing::test_model_path("stories260K.gguf"),
                                "--prompt", "hi", "--backend", "cuda"});
    EXPECT_EQ(r.exit_code, 1) << command;
    EXPECT_NE(r.err.find("--backend cuda"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("CUDA"), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
}

TEST(RuntimeCliTest, AutoRunsOnTheCpuWithoutADeviceAndSaysSo) {
  const fs::path report =
      fs::temp_directory_path() / ("cellm_auto_" + std::to_string(getpid()) + ".json");
  const Result r =
      run_cellm({"run", "--model", testing::test_model_path("stories260K.gguf"), "--prompt", "Once",
                 "--max-new-tokens", "4", "--backend", "auto", "--exact-activations",
                 "--resident-bf16", "off", "--report-json", report.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("backend: cpu"), std::string::npos) << r.out;
  const nlohmann::json out = nlohmann::json::parse(slurp(report));
  EXPECT_EQ(out.at("config").at("backend"), "cpu");
  fs::remove(report);
}

}  // namespace
}  // namespace cellm
