// Shared helpers of the export suites that run programs (tests/export_*_test.cpp): greedy
// generation on the CPU executor and reference checks, refused configs, a program exported again
// from its GGUF, the loader's invariants, GGUF files rewritten as other converters write them,
// plus everything in export_hf_writer.h. Header-only because each
// suite is its own binary. Thread-safety: test code, one thread.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "backends/cpu/cpu_executor.h"
#include "cpu_executor_testing.h"
#include "export_hf_writer.h"
#include "gguf/gguf_writer.h"
#include "program/exporter.h"
#include "program/program.h"
#include "program/program_test_support.h"
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

// `first` (a program) exported again from its own GGUF into a fresh directory named after
// `name` (max_seq_len 64, W 16); returns the new program's path.
inline std::string export_again_from_gguf(const std::string& first, const std::string& name) {
  const std::string again = fresh_dir(name) + "/program.gguf";
  ExportOptions options;
  options.source = ExportSource::kGguf;
  options.input = first;
  options.output = again;
  options.max_seq_len = 64;
  options.max_step_tokens = 16;
  export_ok(options);
  return again;
}

// The invariants the mutation and fuzz suites hold every loaded program to
// (program_test_support.h) hold for the program at `path`.
inline void expect_loader_invariants(const std::string& path) {
  StatusOr<GgufFile> file = GgufFile::open(path);
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  const program_testing::LoadOutcome outcome =
      program_testing::load_and_check(std::move(file).value());
  EXPECT_TRUE(outcome.loaded) << outcome.refusal;
  EXPECT_EQ(outcome.problem, "");
}

// `source`'s metadata without the keys `drop` names (plus `extra` keys), and all its tensors, as
// a GGUF file in memory: how a file another converter wrote looks.
inline void rewrite_gguf(const GgufFile& source,
                         const std::function<bool(const std::string&)>& drop,
                         const std::vector<std::pair<std::string, GgufValue>>& extra,
                         std::vector<uint8_t>* bytes) {
  GgufWriter writer;
  for (const auto& [key, value] : source.metadata()) {
    if (drop(key)) continue;
    ASSERT_TRUE(writer.add_metadata(key, value).ok()) << key;
  }
  for (const auto& [key, value] : extra) ASSERT_TRUE(writer.add_metadata(key, value).ok()) << key;
  for (const GgufTensorInfo& info : source.tensors()) {
    ASSERT_TRUE(writer.add_tensor(info.name, info.type, info.dims, source.tensor_data(info)).ok());
  }
  StatusOr<std::vector<uint8_t>> written = writer.write_bytes();
  ASSERT_TRUE(written.ok()) << written.status().to_string();
  *bytes = std::move(written).value();
}

}  // namespace cellm::export_testing
