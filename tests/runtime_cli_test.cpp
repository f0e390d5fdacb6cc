// End to end through the `cellm` binary on stories260K: `cellm generate --json` against the
// reference greedy output (and held to --regex: a text the standard library's regex matches
// whole; moved off it by the penalty flags), `cellm run --report-json` (generations in prompt
// order, engine metrics with preemptions, config), and bad arguments (one line, exit status 2).
//
// The binary is found by tests/support/cellm_cli.h. Every run hides the GPUs
// (CUDA_VISIBLE_DEVICES empty), so `--backend auto` is the CPU and `--backend cuda` has no device
// wherever the suite runs; src/backends/cuda/cuda_cli_test.cpp runs the CLI on a GPU.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "backends/cpu/cpu_executor.h"
#include "cellm_cli.h"
#include "cpu_executor_testing.h"
#include "program/program.h"
#include "test_models.h"
#include "tokenizer/tokenizer.h"

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

// The penalty flags reach the sampler: stories260K repeats itself greedily, a repetition penalty
// steers it elsewhere (the sampler's arithmetic is checked in batching's tests).
TEST(RuntimeCliTest, GeneratePenaltiesChangeWhatAGreedyGenerationRepeats) {
  const nlohmann::json c = reference().at("cases").at(0);
  for (const char* flag : {"--repetition-penalty", "--presence-penalty", "--frequency-penalty"}) {
    const Result r = run_cellm({"generate", "--model", testing::test_model_path("stories260K.gguf"),
                                "--prompt", c.at("prompt"), "-n", "128", "--json", flag, "1.5"});
    ASSERT_EQ(r.exit_code, 0) << flag << ": " << r.err;
    const nlohmann::json out = nlohmann::json::parse(r.out);
    EXPECT_EQ(out.at("prompt_tokens"), c.at("prompt_tokens"));
    EXPECT_NE(out.at("generated_tokens"), c.at("generated_tokens")) << flag;
  }
}

TEST(RuntimeCliTest, GenerateRegexGivesATextItMatchesWhole) {
  const std::string regex = "(Once|Then) [a-z]{1,8}( [a-z]{1,8})*\\.";
  for (const char* temperature : {"0", "1"}) {
    const Result r =
        run_cellm({"generate", "--model", testing::test_model_path("stories260K.gguf"), "--prompt",
                   "Lily", "-n", "60", "--temperature", temperature, "--regex", regex, "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const nlohmann::json out = nlohmann::json::parse(r.out);
    const std::string text = out.at("text");
    EXPECT_NE(out.at("finish_reason"), "new_token_limit") << text;
    EXPECT_TRUE(std::regex_match(text, std::regex(regex))) << text;
  }
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

// `cellm perplexity` against the log-softmax (in long double) of the CPU executor's own rows, one
// input per position of each chunk — not the Runner's prompt log-probabilities the command uses.
TEST(RuntimeCliTest, PerplexityIsTheMeanLogSoftmaxOfEveryChunkTokenFromTheExecutorsRows) {
  const std::string text = reference().at("cases").at(0).at("text");
  const std::string model = testing::test_model_path("stories260K.gguf");
  const Result r =
      run_cellm({"perplexity", "--model", model, "--text", text, "--context", "16", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json out = nlohmann::json::parse(r.out);

  const Program& program = testing::stories260k();
  StatusOr<std::vector<int32_t>> tokens =
      program.tokenizer().encode(text, EncodeOptions{.add_special = false});
  ASSERT_TRUE(tokens.ok());
  const int32_t bos = program.tokenizer().bos_id();
  ASSERT_NE(bos, kNoToken) << "stories260K adds BOS: every chunk token is scored";
  std::unique_ptr<CpuExecutor> executor =
      testing::make_executor(program, program.spec(), CpuExecutorOptions{});
  ASSERT_NE(executor, nullptr);
  const int32_t vocab = executor->limits().vocab_size;
  long double sum = 0;
  int64_t count = 0;
  int32_t num_chunks = 0;
  for (size_t begin = 0; begin < tokens->size(); begin += 16, ++num_chunks) {
    std::vector<int32_t> prompt = {bos};
    prompt.insert(
        prompt.end(), tokens->begin() + static_cast<std::ptrdiff_t>(begin),
        tokens->begin() + static_cast<std::ptrdiff_t>(std::min(tokens->size(), begin + 16)));
    const std::optional<SessionId> session = executor->open_session();
    ASSERT_TRUE(session.has_value());
    BatchInput batch;
    for (int32_t p = 0; p + 1 < static_cast<int32_t>(prompt.size()); ++p) {
      batch.inputs.push_back({*session, 0, prompt, p, p + 1, true});
    }
    StatusOr<BatchOutput> rows = executor->execute(batch, true);
    ASSERT_TRUE(rows.ok()) << rows.status().to_string();
    for (size_t p = 0; p + 1 < prompt.size(); ++p) {
      const float* row = rows->logits.data() + p * static_cast<size_t>(vocab);
      const long double top = *std::max_element(row, row + vocab);
      long double z = 0;
      for (int32_t v = 0; v < vocab; ++v) z += std::exp(static_cast<long double>(row[v]) - top);
      sum += static_cast<long double>(row[prompt[p + 1]]) - top - std::log(z);
      ++count;
    }
    ASSERT_TRUE(executor->close_session(*session).ok());
  }
  EXPECT_EQ(out.at("tokens_scored"), count);
  EXPECT_EQ(out.at("chunks"), num_chunks);
  const double expected = std::exp(static_cast<double>(-sum / count));
  EXPECT_NEAR(out.at("perplexity").get<double>(), expected, 1e-5 * expected);
  EXPECT_GT(expected, 1.0);

  // Bad input: a missing file, no text to score, a context beyond a session.
  for (const auto& [args, words] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"perplexity", "--model", model, "--file", "/no/such/file"}, "/no/such/file"},
           {{"perplexity", "--model", model, "--text", ""}, "no token to score"},
           {{"perplexity", "--model", model, "--text", "hi", "--context", "100000"}, "--context"},
           {{"perplexity", "--model", model, "--text", "a", "--file", "b"}, "exactly one"}}) {
    const Result bad = run_cellm(args);
    EXPECT_NE(bad.exit_code, 0) << args.back();
    EXPECT_EQ(std::count(bad.err.begin(), bad.err.end(), '\n'), 1) << bad.err;
    EXPECT_NE(bad.err.find(words), std::string::npos) << bad.err;
  }
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
      {{"generate", "--model", model, "--prompt", "hi", "--regex", "a(?=b)"}, "--regex"},
      {{"generate", "--model", model, "--prompt", "hi", "--regex", "a", "--json-object"},
       "--regex"},
      {{"run", "--model", model, "--prompt", "hi", "--max-cells", "100"}, "--max-cells 100"},
      {{"generate", "--model", model, "--prompt", "hi", "--threads", "100000"}, "--threads 100000"},
      {{"generate", "--model", model, "--prompt", "hi", "--no-thinking"}, "--chat"},
      {{"run", "--model", model, "--prompt", "hi", "--system", "Be brief."}, "--chat"},
      {{"generate", "--model", model, "--prompt", "hi", "-n", "4", "--min-new-tokens", "5"},
       "--min-new-tokens is 5"},
      {{"run", "--model", model, "--prompt", "hi", "--repetition-penalty", "0"},
       "--repetition-penalty is 0"},
      {{"generate", "--model", model, "--prompt", "hi", "--min-new-tokens", "2", "--json-object"},
       "--min-new-tokens beside a constrained output"},
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
