// Shared helpers of the export suites that run programs (tests/export_*_test.cpp): greedy
// generation on the CPU executor, plus everything in export_hf_writer.h. Header-only because each
// suite is its own binary. Thread-safety: test code, one thread.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backends/cpu/cpu_executor.h"
#include "cpu_executor_testing.h"
#include "export_hf_writer.h"
#include "program/exporter.h"
#include "program/program.h"
#include "reference_case.h"

namespace cellm::export_testing {

// Greedy generation of `num_steps` tokens after `prompt` on a fresh CPU executor.
inline testing::GreedyRun greedy(const Program& program, const std::vector<int32_t>& prompt,
                                 int32_t num_steps) {
  CpuExecutorOptions options;
  options.num_threads = 1;
  const std::unique_ptr<CpuExecutor> executor =
      testing::make_executor(program, program.spec(), options);
  return testing::run_greedy(*executor, prompt, num_steps);
}

// Exports a copy of the checkpoint in `hf_dir` whose config.json is `config`, which must be
// refused: the error names `expected` and no program is left behind.
inline void expect_config_refused(const std::string& hf_dir, const nlohmann::json& config,
                                  const std::string& expected, const std::string& what) {
  const std::string dir = fresh_dir("bad_config");
  std::filesystem::copy(hf_dir, dir, std::filesystem::copy_options::recursive);
  std::ofstream(dir + "/config.json") << config.dump();
  ExportOptions options;
  options.source = ExportSource::kCheckpoint;
  options.input = dir;
  options.output = dir + "/program.gguf";
  options.tokenizer_path = testing::test_model_path("stories260K.gguf");
  const StatusOr<ExportReport> report = export_program(options);
  ASSERT_FALSE(report.ok()) << what;
  EXPECT_NE(report.status().message().find(expected), std::string::npos)
      << what << ": " << report.status().to_string();
  EXPECT_FALSE(exists(options.output)) << what;
}

// Greedy runs of reference `cases` (an HF transformers document's: reference_case.h) on
// `program`: every token equal and every kept logit within `tolerance` — the first `num_steps`
// of each case when > 0. Prints and returns the worst logits difference, as "<what>: ...".
inline float expect_reference_cases(const Program& program, const nlohmann::json& cases,
                                    float tolerance, const std::string& what,
                                    int32_t num_steps = 0) {
  float worst = 0.0f;
  for (nlohmann::json c : cases) {
    if (num_steps > 0) {
      c["generated_tokens"].get_ref<nlohmann::json::array_t&>().resize(num_steps);
      c["logit_rows"].get_ref<nlohmann::json::array_t&>().resize(num_steps);
    }
    const auto prompt = c.at("prompt_tokens").get<std::vector<int32_t>>();
    const auto steps = static_cast<int32_t>(c.at("generated_tokens").size());
    const testing::GreedyRun run = greedy(program, prompt, steps);
    worst = std::max(worst,
                     testing::expect_reference_case(run, c, program.config().vocab_size, tolerance,
                                                    what + " case " + c.at("case").dump()));
  }
  std::printf("%s: worst logits diff vs HF %.3g\n", what.c_str(), static_cast<double>(worst));
  return worst;
}

}  // namespace cellm::export_testing
