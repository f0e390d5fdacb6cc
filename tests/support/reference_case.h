// expect_reference_case: one greedy run checked against one case of an HF transformers
// reference document (tests/tools/gen_tiny_*_reference.py: generated tokens, and per step the
// logits of the 8 largest entries and 8 fixed ones), and export_tiny_checkpoint, which exports
// the tiny checkpoints those references are of. Used by the tiny-phi3 and tiny-gemma3 CPU and
// CUDA suites. Header-only. Thread-safety: test code, one thread.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cpu_executor_testing.h"
#include "program/exporter.h"
#include "test_models.h"

namespace cellm::testing {

// Exports a tiny Hugging Face checkpoint in `hf_dir` with stories260K's tokenizer (their
// vocabularies are both 512) to `output`, serving `max_seq_len` positions, W 32.
inline void export_tiny_checkpoint(const std::string& hf_dir, const std::string& output,
                                   int32_t max_seq_len, ExportQuant quant) {
  ExportOptions options;
  options.source = ExportSource::kCheckpoint;
  options.input = hf_dir;
  options.output = output;
  options.tokenizer_path = test_model_path("stories260K.gguf");
  options.max_seq_len = max_seq_len;
  options.max_step_tokens = 32;
  options.quant = quant;
  StatusOr<ExportReport> report = export_program(options);
  ASSERT_TRUE(report.ok()) << report.status().to_string();
}

// A greedy run against one reference case: every token equal, every logit the reference keeps
// (its largest 8 and 8 fixed ones a row) within `tolerance`. Returns the largest difference.
inline float expect_reference_case(const GreedyRun& run, const nlohmann::json& c, int32_t vocab,
                                   float tolerance, const std::string& what) {
  const auto expected = c.at("generated_tokens").get<std::vector<int32_t>>();
  EXPECT_EQ(run.tokens, expected) << what;
  const nlohmann::json& rows = c.at("logit_rows");
  EXPECT_EQ(run.logits.size(), rows.size() * static_cast<size_t>(vocab)) << what;
  float worst = 0.0f;
  for (size_t row = 0; row < rows.size() && (row + 1) * vocab <= run.logits.size(); ++row) {
    for (const nlohmann::json& entry : rows[row]) {
      const auto token = entry.at(0).get<int32_t>();
      const auto logit = entry.at(1).get<double>();
      const float got = run.logits[row * static_cast<size_t>(vocab) + static_cast<size_t>(token)];
      const auto diff = static_cast<float>(std::fabs(got - logit));
      worst = std::max(worst, diff);
      EXPECT_LE(diff, tolerance) << what << ", row " << row << ", token " << token;
    }
  }
  return worst;
}

}  // namespace cellm::testing
