// Engine setup shared by `cellm run` and `cellm generate` (cmd_engine.h).
#include "cmd_engine.h"

#include <algorithm>
#include <climits>
#include <fstream>
#include <memory>
#include <sstream>

#include "backends/cpu/cpu_executor.h"
#include "batching/step_plan.h"
#include "core/thread_pool.h"

#ifdef CELLM_HAVE_CUDA
#include "backends/cuda/cuda_backend.h"
#endif

namespace cellm::app {
namespace {

Status at_least(const char* flag, int32_t value, int32_t minimum) {
  if (value == kUnset || value >= minimum) return ok_status();
  return invalid_argument(std::string(flag) + " " + std::to_string(value) + ": must be at least " +
                          std::to_string(minimum));
}

// "cpu" or "cuda" for --backend cpu|cuda|auto; FailedPrecondition (one line) when cuda is asked
// for and cannot run here.
StatusOr<std::string> choose_backend(const std::string& requested) {
  if (requested == "cpu") return std::string("cpu");
#ifdef CELLM_HAVE_CUDA
  if (cuda_device_available()) return std::string("cuda");
  if (requested == "auto") return std::string("cpu");
  const std::string summary = cuda_device_summary();  // "no CUDA device (...)" or the device
  return failed_precondition(
      "--backend cuda: " +
      (summary.starts_with("no CUDA device") ? summary : "no usable CUDA device: " + summary) +
      "; use --backend cpu or auto");
#else
  if (requested == "auto") return std::string("cpu");
  return failed_precondition(
      "--backend cuda: this cellm was built without the CUDA backend (configure with "
      "-DCELLM_CUDA=ON where nvcc is installed); use --backend cpu or auto");
#endif
}

// The executor of `backend` over the program's weights with `spec`, not yet initialized.
StatusOr<std::unique_ptr<Executor>> make_executor([[maybe_unused]] const std::string& backend,
                                                  const Program& program, const ProgramSpec& spec,
                                                  const EngineFlags& flags, std::string* detail) {
#ifdef CELLM_HAVE_CUDA
  if (backend == "cuda") {
    CudaExecutorOptions options;
    if (flags.max_sessions != kUnset) options.max_sessions = flags.max_sessions;
    if (flags.max_session_tokens != kUnset) options.max_session_tokens = flags.max_session_tokens;
    options.device_argmax = true;  // greedy sessions take the device's argmax (sampler.h)
    options.int8_activations = !flags.exact_activations;
    options.resident_bf16 = flags.resident_bf16 == "on";
    options.resident_bf16_if_room = flags.resident_bf16 == "auto";
    *detail = cuda_device_summary();
    return make_cuda_executor(program.config(), program.weights(), spec, options);
  }
#endif
  CpuExecutorOptions options;
  if (flags.max_sessions != kUnset) options.max_sessions = flags.max_sessions;
  if (flags.max_session_tokens != kUnset) options.max_session_tokens = flags.max_session_tokens;
  if (flags.num_threads != kUnset) options.num_threads = flags.num_threads;
  *detail = "CPU, " +
            (options.num_threads > 0 ? std::to_string(options.num_threads) : std::string("all")) +
            " threads";
  return std::unique_ptr<Executor>(
      new CpuExecutor(program.config(), program.weights(), spec, options));
}

}  // namespace

StatusOr<std::vector<int32_t>> parse_int_list(const std::string& text, const std::string& flag) {
  std::vector<int32_t> values;
  std::string item;
  std::stringstream stream(text);
  while (std::getline(stream, item, ',')) {
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    size_t used = 0;
    long long value = 0;
    try {
      value = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size() || value < INT32_MIN || value > INT32_MAX) {
      return invalid_argument(flag + " '" + text + "': '" + item + "' is not an integer");
    }
    values.push_back(static_cast<int32_t>(value));
  }
  if (values.empty()) return invalid_argument(flag + " is empty");
  return values;
}

void add_engine_flags(CLI::App& command, EngineFlags& flags) {
  command.add_option("--backend", flags.backend,
                     "cpu, cuda or auto (default: CUDA when built with it and a device is "
                     "visible, else the CPU)");
  command.add_option("--threads", flags.num_threads, "CPU forward threads (default: all cores)");
  command.add_flag("--exact-activations", flags.exact_activations,
                   "CUDA: keep the activations of small quantized products in f32 (default: "
                   "int8, about 3e-3 relative error in those products)");
  command
      .add_option("--resident-bf16", flags.resident_bf16,
                  "CUDA: bf16 copies of quantized matrices for steps of many rows — auto (where "
                  "they fit beside the KV pool at its largest), on, or off (2 bytes per weight; "
                  "faster many-session decode and prefill, small batches a few percent slower)")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->capture_default_str();
  command.add_option("--max-sessions", flags.max_sessions, "Sessions at once (default: all)");
  command.add_option("--max-session-tokens", flags.max_session_tokens, "Positions per session");
  command.add_option("--max-cells", flags.max_cells, "Cells in the shared KV pool");
  command.add_option("--max-decode-sequences", flags.max_decode_sequences, "Decodes per step");
  command.add_option("--max-step-tokens", flags.max_step_tokens, "W: the widest forward");
  command.add_option("--min-prefill-chunk", flags.min_prefill_chunk,
                     "m: the narrowest prefill (default: the program's)");
  command.add_option("--decode-widths", flags.decode_widths,
                     "Static decode widths, e.g. 1,2,4,8 (default: the program's; on CUDA a "
                     "plain GGUF model gets 1,2,4,...,256 below W and m one past the widest)");
}

void add_prefix_reuse_flag(CLI::App& command, bool& no_prefix_reuse) {
  command.add_flag(
      "--no-prefix-reuse", no_prefix_reuse,
      "Compute every prompt in full, even where another session's cells hold its start");
}

void add_sampling_flags(CLI::App& command, SamplingFlags& flags) {
  command.add_option("--temperature", flags.temperature, "0 = greedy (default)");
  command.add_option("--top-k", flags.top_k, "Keep the k most likely; 0 = off");
  command.add_option("--top-p", flags.top_p, "Nucleus mass, (0, 1]");
  command.add_option("--min-p", flags.min_p, "Drop tokens below min-p x the best; 0 = off");
  command.add_option("--repetition-penalty", flags.repetition_penalty,
                     "> 1 discourages the tokens among the context's last 64; 1 = off");
  command.add_option("--presence-penalty", flags.presence_penalty,
                     "Subtracted once from the logit of each token among the context's last 64");
  command.add_option("--frequency-penalty", flags.frequency_penalty,
                     "Subtracted from a token's logit per occurrence among the context's last 64");
  command.add_option("--min-new-tokens", flags.min_new_tokens,
                     "Generate at least this many tokens: stop tokens and strings end nothing "
                     "before (not with a constrained output)");
  CLI::Option* object =
      command.add_flag("--json-object", flags.json_object,
                       "Constrain the output to one JSON object; stop when it is whole");
  CLI::Option* schema =
      command
          .add_option("--json-schema", flags.json_schema_file,
                      "Constrain the output to one JSON value this file's JSON Schema accepts; "
                      "stop when it is whole")
          ->excludes(object);
  command
      .add_option("--regex", flags.regex,
                  "Constrain the whole output to a text this regular expression (ECMA-262) "
                  "matches; stop where it matches and the model ends, or when nothing may follow")
      ->excludes(object)
      ->excludes(schema);
}

void add_chat_flags(CLI::App& command, ChatFlags& flags, const std::string& chat_help) {
  CLI::Option* chat = command.add_flag("--chat", flags.chat, chat_help);
  command.add_option("--system", flags.system, "With --chat: a system message before the prompt")
      ->needs(chat);
  command
      .add_flag("--no-thinking", flags.no_thinking,
                "With --chat: answer without thinking where the chat format has a switch for it "
                "(qwen3's enable_thinking off; other formats ignore it)")
      ->needs(chat);
}

StatusOr<GenConfig> gen_config_from_flags(const SamplingFlags& flags,
                                          const std::vector<std::string>& stop_strings) {
  if (flags.max_new_tokens < 0) {
    return invalid_argument("--max-new-tokens " + std::to_string(flags.max_new_tokens) +
                            ": must be at least 0");
  }
  GenConfig config;
  config.max_new_tokens = flags.max_new_tokens;
  config.sampling.temperature = flags.temperature;
  config.sampling.top_k = flags.top_k;
  config.sampling.top_p = flags.top_p;
  config.sampling.min_p = flags.min_p;
  config.sampling.repetition_penalty = flags.repetition_penalty;
  config.sampling.presence_penalty = flags.presence_penalty;
  config.sampling.frequency_penalty = flags.frequency_penalty;
  config.min_new_tokens = flags.min_new_tokens;
  config.seed = flags.seed;
  config.use_default_stop_tokens = !flags.ignore_eos;
  config.stop_strings = stop_strings;
  config.json_object = flags.json_object;
  if (!flags.json_schema_file.empty()) {
    std::ifstream file(flags.json_schema_file, std::ios::binary);
    std::ostringstream text;
    text << file.rdbuf();
    if (!file) return not_found("--json-schema " + flags.json_schema_file + ": cannot read it");
    StatusOr<std::shared_ptr<const JsonSchema>> schema = JsonSchema::compile(text.str());
    if (!schema.ok()) {
      return invalid_argument("--json-schema " + flags.json_schema_file + ": " +
                              schema.status().message());
    }
    config.json_schema = *std::move(schema);
  }
  if (!flags.regex.empty()) {
    StatusOr<std::shared_ptr<const StringPattern>> pattern = StringPattern::compile(
        flags.regex, 0, StringPattern::kUnbounded, StringPattern::Target::kWholeText);
    if (!pattern.ok()) return invalid_argument("--regex: " + pattern.status().message());
    if (!(*pattern)->matches_something()) return invalid_argument("--regex matches no text");
    config.text_pattern = *std::move(pattern);
  }
  const Status status = validate_gen_config(config);
  if (!status.ok()) {  // "top_p is 2; ..." -> "--top-p is 2; ..."
    std::string message = status.message();
    const size_t word = message.find(' ');
    std::replace(message.begin(), message.begin() + std::min(word, message.size()), '_', '-');
    return invalid_argument("--" + message);
  }
  return config;
}

Status check_engine_flags(const EngineFlags& flags) {
  if (flags.backend != "cpu" && flags.backend != "cuda" && flags.backend != "auto") {
    return invalid_argument("--backend '" + flags.backend + "': must be cpu, cuda or auto");
  }
  CELLM_RETURN_IF_ERROR(at_least("--max-sessions", flags.max_sessions, 1));
  CELLM_RETURN_IF_ERROR(at_least("--max-session-tokens", flags.max_session_tokens, 1));
  CELLM_RETURN_IF_ERROR(at_least("--max-cells", flags.max_cells, 1));
  CELLM_RETURN_IF_ERROR(at_least("--max-step-tokens", flags.max_step_tokens, 1));
  CELLM_RETURN_IF_ERROR(at_least("--min-prefill-chunk", flags.min_prefill_chunk, 1));
  CELLM_RETURN_IF_ERROR(at_least("--max-decode-sequences", flags.max_decode_sequences, 1));
  CELLM_RETURN_IF_ERROR(at_least("--threads", flags.num_threads, 1));
  if (flags.num_threads != kUnset &&
      static_cast<size_t>(flags.num_threads) > ThreadPool::kMaxThreads) {
    return invalid_argument("--threads " + std::to_string(flags.num_threads) +
                            ": must be at most " + std::to_string(ThreadPool::kMaxThreads));
  }
  if (!flags.decode_widths.empty()) {
    CELLM_ASSIGN_OR_RETURN(const std::vector<int32_t> widths,
                           parse_int_list(flags.decode_widths, "--decode-widths"));
    if (widths.front() != 1 || !std::is_sorted(widths.begin(), widths.end()) ||
        std::adjacent_find(widths.begin(), widths.end()) != widths.end()) {
      return invalid_argument("--decode-widths '" + flags.decode_widths +
                              "': must rise strictly from 1, e.g. 1,2,4,8");
    }
  }
  if (flags.max_step_tokens != kUnset && flags.min_prefill_chunk != kUnset &&
      flags.min_prefill_chunk > flags.max_step_tokens) {
    return invalid_argument("--min-prefill-chunk " + std::to_string(flags.min_prefill_chunk) +
                            " is above --max-step-tokens " + std::to_string(flags.max_step_tokens));
  }
  return ok_status();
}

StatusOr<Engine> load_engine(const std::string& model_path, const EngineFlags& flags) {
  CELLM_RETURN_IF_ERROR(check_engine_flags(flags));
  Engine engine;
  CELLM_ASSIGN_OR_RETURN(engine.backend, choose_backend(flags.backend));
  CELLM_ASSIGN_OR_RETURN(Program program, Program::load(model_path));
  engine.program = std::make_unique<Program>(std::move(program));
  ProgramSpec spec = engine.program->spec();
  if (flags.max_step_tokens != kUnset) {
    spec.max_step_tokens = flags.max_step_tokens;
    // A plain model's context is only a default: keep room for one more position than W.
    if (engine.program->uses_default_spec()) {
      spec.max_context_len = std::max(spec.max_context_len, spec.max_step_tokens + 1);
    }
  }
  if (flags.min_prefill_chunk != kUnset) spec.min_prefill_chunk = flags.min_prefill_chunk;
  if (!flags.decode_widths.empty()) {
    CELLM_ASSIGN_OR_RETURN(spec.decode_widths,
                           parse_int_list(flags.decode_widths, "--decode-widths"));
  }
  if (engine.backend == "cuda" && engine.program->uses_default_spec() &&
      flags.decode_widths.empty() && flags.min_prefill_chunk == kUnset) {
    // A plain model's seed plan (widths {1}, m 5) would run 2-4 decodes one call per token and
    // 5-256 eagerly: take the recommended graphs instead.
    spec.decode_widths = recommended_decode_widths(spec.max_step_tokens);
    spec.min_prefill_chunk = auto_min_prefill_chunk(spec.decode_widths, spec.max_step_tokens);
  }
  if (flags.max_cells != kUnset) spec.kv_max_cells = flags.max_cells;
  const Status slices =
      validate_slice_params(spec.max_step_tokens, spec.min_prefill_chunk, spec.decode_widths);
  if (!slices.ok()) return invalid_argument("the flags give a bad step plan: " + slices.message());
  if (spec.kv_max_cells < spec.max_step_tokens) {
    return invalid_argument("--max-cells " + std::to_string(spec.kv_max_cells) +
                            " is below the step width W = " + std::to_string(spec.max_step_tokens) +
                            " (--max-step-tokens)");
  }
  if (spec.max_step_tokens >= spec.max_context_len) {
    return invalid_argument("--max-step-tokens " + std::to_string(spec.max_step_tokens) +
                            " must be below the program's context of " +
                            std::to_string(spec.max_context_len) + " positions");
  }
  if (flags.max_session_tokens != kUnset && flags.max_session_tokens > spec.max_context_len) {
    return invalid_argument("--max-session-tokens " + std::to_string(flags.max_session_tokens) +
                            " is above the program's context of " +
                            std::to_string(spec.max_context_len) + " positions");
  }
  CELLM_ASSIGN_OR_RETURN(
      std::unique_ptr<Executor> executor,
      make_executor(engine.backend, *engine.program, spec, flags, &engine.backend_detail));
  CELLM_RETURN_IF_ERROR(executor->initialize().with_context(model_path));
  engine.spec = spec;
  engine.limits = executor->limits();
  engine.scheduler = SchedulerConfig::defaults_for(engine.limits.max_step_tokens);
  if (flags.max_decode_sequences != kUnset) {
    engine.scheduler.max_decode_sequences = flags.max_decode_sequences;
  }
  engine.executor = std::move(executor);
  return engine;
}

}  // namespace cellm::app
