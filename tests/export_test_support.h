// Shared helpers of the export suites that run programs (tests/export_*_test.cpp): greedy
// generation on the CPU executor, plus everything in export_hf_writer.h. Header-only because each
// suite is its own binary. Thread-safety: test code, one thread.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "backends/cpu/cpu_executor.h"
#include "cpu_executor_testing.h"
#include "export_hf_writer.h"
#include "program/exporter.h"
#include "program/program.h"

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

}  // namespace cellm::export_testing
