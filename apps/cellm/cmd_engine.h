// The engine as the run and generate commands build it: the model opened on the chosen backend
// with the flags' limits applied to its program spec, an initialized Executor, and the
// scheduler's configuration.
//
// Flags are checked here first (check_engine_flags: bad values are the user's, exit status 2,
// the message names the flag); then load_engine opens the model and initializes the executor
// (failures there are exit status 1). The only place the two commands pick a backend: `cpu`,
// `auto` (the CPU until a CUDA executor exists) or `cuda` (a clear error while it is not built
// or has no executor). Thread-safety: plain data; the Executor is then the Runner's.
#pragma once

#include <climits>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/cpu/cpu_model.h"
#include "batching/executor.h"
#include "batching/scheduler.h"
#include "core/status.h"
#include "program/program_spec.h"

namespace cellm::app {

// A flag not given: the program's value or the default.
inline constexpr int32_t kUnset = INT32_MIN;

struct EngineFlags {
  std::string backend = "auto";   // cpu, cuda or auto
  int32_t max_sessions = kUnset;  // sessions the executor allows at once
  int32_t max_session_tokens = kUnset;
  int32_t max_cells = kUnset;
  int32_t max_step_tokens = kUnset;  // W
  int32_t min_prefill_chunk = kUnset;
  std::string decode_widths;  // "1,2,4,8"; empty = the program's
  int32_t max_decode_sequences = kUnset;
  int32_t num_threads = kUnset;  // forward threads; unset = every core
};

// InvalidArgument naming the flag (--max-cells ...) for a value no model could take.
Status check_engine_flags(const EngineFlags& flags);

// "1,2,4" -> {1, 2, 4}; InvalidArgument naming `flag` for anything else.
StatusOr<std::vector<int32_t>> parse_int_list(const std::string& text, const std::string& flag);

struct Engine {
  std::unique_ptr<CpuModel> model;  // keeps the file (and the weights' mapping) alive
  std::unique_ptr<Executor> executor;
  std::string backend;  // the one chosen: "cpu"
  ProgramSpec spec;     // after the flags
  ExecutorLimits limits;
  SchedulerConfig scheduler;
};

// Opens `model_path` and builds an initialized executor; errors name the file or the flag.
// InvalidArgument means the flags do not fit this model (exit status 2); anything else is a
// failure to load or initialize (exit status 1).
StatusOr<Engine> load_engine(const std::string& model_path, const EngineFlags& flags);

}  // namespace cellm::app
