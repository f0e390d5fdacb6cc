// Shared helpers of the CUDA end-to-end suites (cuda_*_test.cpp in this folder): what the CPU
// suites use (tests/support/cpu_executor_testing.h: load a program, give it another slicing plan,
// drive greedy generation through Executor::execute, compare logits rows), plus an initialized
// CudaExecutor for a program. Greedy argmax is the test's own (lowest id wins ties), not the
// engine's sampler. Header-only: each suite is its own binary. Thread-safety: test code, one
// thread.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/cpu/cpu_executor.h"
#include "backends/cuda/cuda_executor.h"
#include "backends/cuda/cuda_test_util.h"
#include "cpu_executor_testing.h"
#include "program/program.h"

namespace cellm::testing {

using Tokens = std::vector<int32_t>;

// Loads a program from the test models folder; a failure is a fatal test failure.
inline std::unique_ptr<Program> open_model(const std::string& relative) {
  std::unique_ptr<Program> program = load_test_program(relative);
  if (program == nullptr) std::abort();
  return program;
}

// An initialized CudaExecutor over `program`'s weights running `spec`; null (and a test failure)
// when initialize() fails.
inline std::unique_ptr<CudaExecutor> make_cuda(const Program& program, const ProgramSpec& spec,
                                               const CudaExecutorOptions& options = {}) {
  auto executor =
      std::make_unique<CudaExecutor>(program.config(), program.weights(), spec, options);
  const Status status = executor->initialize();
  EXPECT_TRUE(status.ok()) << status.to_string();
  if (!status.ok()) return nullptr;
  return executor;
}

// The CPU oracle over the same program.
inline std::unique_ptr<CpuExecutor> make_cpu(const Program& program, const ProgramSpec& spec) {
  return make_executor(program, spec);
}

}  // namespace cellm::testing
