// The engine as the run and generate commands build it: the program loaded on the chosen backend
// with the flags' limits applied to its spec, an initialized Executor, and the scheduler's
// configuration; and the engine and sampling flags the two commands share.
//
// Flags are checked here first (check_engine_flags: bad values are the user's, exit status 2,
// the message names the flag); then load_engine loads the program and initializes the executor
// (failures there are exit status 1). The only place the two commands pick a backend: `cpu`,
// `cuda` (src/backends/cuda/cuda_backend.h; one clear error line when this cellm was built
// without it or no usable device is visible) or `auto` (CUDA when built with it and a device is
// visible, else the CPU; Engine::backend says which). On CUDA, a plain GGUF model (no cellm.*
// keys) gets the recommended slicing plan (program_spec.h) unless --decode-widths or
// --min-prefill-chunk say otherwise, and greedy tokens come from the device's argmax.
// Thread-safety: plain data; the Executor is then the Runner's.
#pragma once

#include <CLI/CLI.hpp>
#include <climits>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "batching/executor.h"
#include "batching/gen_config.h"
#include "batching/scheduler.h"
#include "core/status.h"
#include "program/program.h"
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
  int32_t num_threads = kUnset;        // CPU forward threads; unset = every core
  bool exact_activations = false;      // CUDA: no int8 activations in small quantized products
  std::string resident_bf16 = "auto";  // CUDA: bf16 copies of quantized matrices: auto, on, off
};

// Registers the engine flags (--backend, --threads, --max-sessions ... --decode-widths).
void add_engine_flags(CLI::App& command, EngineFlags& flags);

// InvalidArgument naming the flag (--max-cells ...) for a value no model could take.
Status check_engine_flags(const EngineFlags& flags);

// Registers --no-prefix-reuse (run and serve: the Runner's PrefixReuseOptions::enabled, off when
// set).
void add_prefix_reuse_flag(CLI::App& command, bool& no_prefix_reuse);

// The sampling flags the run and generate commands share.
struct SamplingFlags {
  int32_t max_new_tokens = 128;
  float temperature = 0.0f;
  int32_t top_k = 0;
  float top_p = 1.0f;
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;  // SamplingParams' penalties
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  int32_t min_new_tokens = 0;  // GenConfig::min_new_tokens
  uint64_t seed = 0;
  bool ignore_eos = false;
  bool json_object = false;      // GenConfig::json_object
  std::string json_schema_file;  // GenConfig::json_schema, compiled from this file; "" none
  std::string regex;             // GenConfig::text_pattern, compiled from it; "" none
};

// Registers --temperature, --top-k, --top-p, --min-p, the penalties (--repetition-penalty,
// --presence-penalty, --frequency-penalty), --min-new-tokens, --json-object, --json-schema and
// --regex (each command adds --max-new-tokens, --seed and --ignore-eos with its own words).
void add_sampling_flags(CLI::App& command, SamplingFlags& flags);

// --chat (the model's chat template applied to the prompts, `chat_help` says how), --system
// (with --chat: a system message before each prompt) and --no-thinking (with --chat: a thinking
// switch off); TextCodec::encode_chat takes them.
struct ChatFlags {
  bool chat = false;
  std::string system;
  bool no_thinking = false;
};
void add_chat_flags(CLI::App& command, ChatFlags& flags, const std::string& chat_help);

// The generation the flags ask for (seed as given, stop strings added); InvalidArgument naming
// the flag ("--top-p is 2; ...") when validate_gen_config refuses it.
StatusOr<GenConfig> gen_config_from_flags(const SamplingFlags& flags,
                                          const std::vector<std::string>& stop_strings = {});

// "1,2,4" -> {1, 2, 4}; InvalidArgument naming `flag` for anything else.
StatusOr<std::vector<int32_t>> parse_int_list(const std::string& text, const std::string& flag);

struct Engine {
  std::unique_ptr<Program> program;  // keeps the file (and the weights' mapping) alive
  std::unique_ptr<Executor> executor;
  std::string backend;         // the one chosen: "cpu" or "cuda"
  std::string backend_detail;  // "CPU, 16 threads" or the CUDA device's summary
  ProgramSpec spec;            // after the flags
  ExecutorLimits limits;
  SchedulerConfig scheduler;
};

// Loads the program at `model_path` and builds an initialized executor; errors name the file or
// the flag.
// InvalidArgument means the flags do not fit this model (exit status 2); anything else is a
// failure to load or initialize (exit status 1).
StatusOr<Engine> load_engine(const std::string& model_path, const EngineFlags& flags);

}  // namespace cellm::app
