// `cellm run`: many prompts at once through the Runner (DESIGN §8). Prompts come from --prompt
// (repeatable), --prompts-file (one per line, an empty line an empty prompt; `\n`, `\t` and
// `\\` escapes) and --prompt-tokens-file (one prompt per line, token ids separated by commas or
// spaces, taken as given: no BOS added; blank lines skipped), in that order. At most
// --max-sessions run at once; as one finishes its session closes and the next prompt starts.
// While it runs, a progress line is kept on stderr when stderr is a terminal. Then each prompt's
// text and finish reason in prompt order, and a summary (tokens/s, TTFT, ITL, steps, pool use,
// preemptions); --report-json writes all of it. Greedy by default; generation stops after EOS
// (included) unless --ignore-eos. Bad arguments: one line on stderr, exit status 2; a failure:
// one line, exit status 1.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <fstream>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "batching/runner.h"
#include "cmd_engine.h"
#include "cmd_run_report.h"
#include "cmd_text.h"
#include "commands.h"
#include "core/check.h"

namespace cellm::app {
namespace {

struct RunOptions {
  std::string model;
  std::vector<std::string> prompts;
  std::string prompts_file;
  std::string prompt_tokens_file;
  ChatFlags chat;
  bool no_prefix_reuse = false;
  SamplingFlags sampling;  // sampling.seed is prompt 0's; prompt i uses seed + i
  std::vector<std::string> stop;
  std::string report_json;
  EngineFlags engine;
};

struct PromptInput {
  std::optional<std::string> text;  // none for a token-file prompt
  std::vector<int32_t> tokens;
};

// Exit statuses of the command.
constexpr int kFailure = 1;
constexpr int kBadArguments = 2;

int report_error(const Status& status, int exit_code) {
  std::cerr << "cellm run: " << status.message() << "\n";
  return exit_code;
}

std::string unescape(const std::string& line) {
  std::string out;
  for (size_t i = 0; i < line.size(); ++i) {
    if (line[i] == '\\' && i + 1 < line.size()) {
      const char next = line[i + 1];
      if (next == 'n' || next == 't' || next == '\\') {
        out += next == 'n' ? '\n' : next == 't' ? '\t' : '\\';
        ++i;
        continue;
      }
    }
    out += line[i];
  }
  return out;
}

// The lines of a file (a trailing '\r' dropped); an empty line is an empty prompt.
StatusOr<std::vector<std::string>> read_lines(const std::string& path, const char* flag) {
  std::ifstream file(path);
  if (!file) return not_found(std::string(flag) + " '" + path + "': cannot open it");
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(file, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(line);
  }
  return lines;
}

Status check_options(const RunOptions& o) {
  if (o.prompts.empty() && o.prompts_file.empty() && o.prompt_tokens_file.empty()) {
    return invalid_argument("no prompts: give --prompt, --prompts-file or --prompt-tokens-file");
  }
  CELLM_RETURN_IF_ERROR(gen_config_from_flags(o.sampling, o.stop).status());
  return check_engine_flags(o.engine);
}

StatusOr<std::vector<PromptInput>> read_prompts(const RunOptions& o, const TextCodec& codec) {
  std::vector<std::string> texts = o.prompts;
  if (!o.prompts_file.empty()) {
    CELLM_ASSIGN_OR_RETURN(const std::vector<std::string> lines,
                           read_lines(o.prompts_file, "--prompts-file"));
    for (const std::string& line : lines) texts.push_back(unescape(line));
  }
  std::vector<PromptInput> prompts;
  for (const std::string& text : texts) {
    StatusOr<std::vector<int32_t>> tokens =
        o.chat.chat
            ? codec.encode_chat(text, o.chat.system, /*enable_thinking=*/!o.chat.no_thinking)
            : codec.encode_prompt(text);
    if (!tokens.ok())
      return tokens.status().with_context("prompt " + std::to_string(prompts.size()));
    prompts.push_back({text, std::move(tokens).value()});
  }
  if (!o.prompt_tokens_file.empty()) {
    CELLM_ASSIGN_OR_RETURN(const std::vector<std::string> lines,
                           read_lines(o.prompt_tokens_file, "--prompt-tokens-file"));
    for (size_t i = 0; i < lines.size(); ++i) {
      std::string line = lines[i];
      if (line.find_first_not_of(" \t,") == std::string::npos) continue;
      std::replace(line.begin(), line.end(), ' ', ',');
      std::string compact;  // runs of separators become one comma
      for (const char c : line) {
        if (c != ',' || (!compact.empty() && compact.back() != ',')) compact += c;
      }
      if (!compact.empty() && compact.back() == ',') compact.pop_back();
      StatusOr<std::vector<int32_t>> tokens =
          parse_int_list(compact, "--prompt-tokens-file line " + std::to_string(i + 1));
      if (!tokens.ok()) return invalid_argument(tokens.status().message());
      prompts.push_back({std::nullopt, std::move(tokens).value()});
    }
  }
  return prompts;
}

// Prompt `index`'s generation: a fixed seed per request. The flags were checked up front.
GenConfig config_for(const RunOptions& o, size_t index) {
  SamplingFlags flags = o.sampling;
  flags.seed += index;
  StatusOr<GenConfig> config = gen_config_from_flags(flags, o.stop);
  CELLM_CHECK(config.ok()) << "flags checked by check_options: " << config.status().to_string();
  return std::move(config).value();
}

nlohmann::ordered_json config_json(const RunOptions& o, const Engine& engine, int32_t max_sessions,
                                   size_t num_prompts) {
  return {{"model", o.model},
          {"backend", engine.backend},
          {"backend_detail", engine.backend_detail},
          {"num_prompts", num_prompts},
          {"max_sessions", max_sessions},
          {"max_session_tokens", engine.limits.max_session_tokens},
          {"max_cells", engine.spec.kv_max_cells},
          {"max_step_tokens", engine.spec.max_step_tokens},
          {"min_prefill_chunk", engine.spec.min_prefill_chunk},
          {"decode_widths", engine.spec.decode_widths},
          {"max_batch_tokens", engine.scheduler.max_batch_tokens},
          {"max_decode_sequences", engine.scheduler.max_decode_sequences},
          {"max_prefill_chunk", engine.scheduler.max_prefill_chunk},
          {"max_new_tokens", o.sampling.max_new_tokens},
          {"temperature", o.sampling.temperature},
          {"top_k", o.sampling.top_k},
          {"top_p", o.sampling.top_p},
          {"min_p", o.sampling.min_p},
          {"seed", o.sampling.seed},
          {"ignore_eos", o.sampling.ignore_eos},
          {"json_object", o.sampling.json_object},
          {"json_schema", o.sampling.json_schema_file},
          {"regex", o.sampling.regex},
          {"chat", o.chat.chat},
          {"prefix_reuse", !o.no_prefix_reuse},
          {"stop", o.stop}};
}

std::string one_line(const std::string& text, size_t max_chars) {
  std::string out;
  for (const char c : text) out += c == '\n' ? ' ' : c;
  if (out.size() > max_chars) out = out.substr(0, max_chars) + "...";
  return out;
}

int run_command(const RunOptions& o) {
  if (const Status status = check_options(o); !status.ok()) {
    return report_error(status, kBadArguments);
  }
  StatusOr<Engine> engine = load_engine(o.model, o.engine);
  if (!engine.ok()) {
    const bool bad_flags = engine.status().code() == StatusCode::kInvalidArgument;
    return report_error(engine.status(), bad_flags ? kBadArguments : kFailure);
  }
  const TextCodec codec = TextCodec::from_program(*engine->program);
  StatusOr<std::vector<PromptInput>> prompts = read_prompts(o, codec);
  if (!prompts.ok()) {
    const bool bad_input = prompts.status().code() == StatusCode::kInvalidArgument ||
                           prompts.status().code() == StatusCode::kNotFound;
    return report_error(prompts.status(), bad_input ? kBadArguments : kFailure);
  }
  const size_t n = prompts->size();
  if (n == 0)
    return report_error(invalid_argument("the prompt files hold no prompt"), kBadArguments);
  // Sessions at once: every prompt, at most the executor's limit (--max-sessions, else 64 on the
  // CPU and 256 on CUDA).
  const int32_t max_sessions =
      std::min<int32_t>(engine->limits.max_sessions, static_cast<int32_t>(n));

  RunnerOptions runner_options = codec.runner_options();
  runner_options.prefix_reuse.enabled = !o.no_prefix_reuse;
  Runner runner(*engine->executor, DecodeFirstScheduler(engine->scheduler), runner_options);

  std::mutex mutex;
  std::condition_variable finished_cv;
  std::deque<size_t> finished;  // guarded by mutex: prompts whose final update arrived
  std::vector<std::optional<Session>> sessions(n);
  std::vector<GenerationHandle> handles(n);
  std::vector<GenerationRecord> records(n);
  const bool progress = isatty(STDERR_FILENO) != 0;
  size_t next = 0, active = 0, done = 0;
  const auto start = std::chrono::steady_clock::now();
  while (done < n) {
    for (; next < n && active < static_cast<size_t>(max_sessions); ++next, ++active) {
      sessions[next] = runner.open_session();
      handles[next] = sessions[next]->generate_async((*prompts)[next].tokens, config_for(o, next),
                                                     [&, i = next](const GenerationUpdate& u) {
                                                       if (!u.finished) return;
                                                       std::lock_guard<std::mutex> lock(mutex);
                                                       finished.push_back(i);
                                                       finished_cv.notify_one();
                                                     });
    }
    std::vector<size_t> ended;
    {
      std::unique_lock<std::mutex> lock(mutex);
      finished_cv.wait_for(lock, std::chrono::milliseconds(200), [&] { return !finished.empty(); });
      ended.assign(finished.begin(), finished.end());
      finished.clear();
    }
    for (const size_t i : ended) {
      handles[i].wait();
      GenerationRecord& record = records[i];
      record.prompt = (*prompts)[i].text;
      record.prompt_tokens = (*prompts)[i].tokens;
      record.generated_tokens = handles[i].tokens();
      record.text = handles[i].text();
      record.finish_reason = handles[i].finish_reason();
      record.error = handles[i].error_message();
      record.metrics = handles[i].metrics();
      sessions[i].reset();  // closes it; the next open is queued after the close
      --active;
      ++done;
    }
    if (progress) {
      const EngineMetrics m = runner.metrics();
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::cerr << fmt::format(
                       "\r\x1b[2Kcellm run: {}/{} done, {} running, {} tokens, {:.1f} "
                       "tokens/s, {} preemptions",
                       done, n, active, m.num_generated_tokens,
                       seconds > 0 ? m.num_generated_tokens / seconds : 0.0, m.num_preemptions)
                << std::flush;
    }
  }
  if (progress) std::cerr << "\r\x1b[2K" << std::flush;
  runner.shutdown();
  const EngineMetrics metrics = runner.metrics();

  size_t num_failed = 0;
  std::string first_error;
  for (size_t i = 0; i < n; ++i) {
    const GenerationRecord& r = records[i];
    const std::string prompt = r.prompt ? "\"" + one_line(*r.prompt, 60) + "\""
                                        : fmt::format("{} prompt tokens", r.prompt_tokens.size());
    std::cout << fmt::format("=== [{}] {}: {}, {} tokens\n", i, prompt,
                             finish_reason_name(r.finish_reason), r.generated_tokens.size());
    std::cout << r.text << (r.text.empty() || r.text.back() != '\n' ? "\n" : "");
    if (!r.error.empty()) std::cout << "error: " << r.error << "\n";
    if (r.finish_reason == FinishReason::kFailed && num_failed++ == 0) first_error = r.error;
  }
  std::cout << "\nbackend: " << engine->backend << " (" << engine->backend_detail << ")\n"
            << run_summary_text(metrics, n);
  if (!o.report_json.empty()) {
    std::ofstream out(o.report_json);
    out << run_report_json(records, metrics, config_json(o, *engine, max_sessions, n))
               .dump(2, ' ', false, nlohmann::json::error_handler_t::replace)
        << "\n";
    if (!out) {
      return report_error(io_error("--report-json '" + o.report_json + "': cannot write it"),
                          kFailure);
    }
  }
  if (num_failed > 0) {
    return report_error(internal_error(fmt::format("{} of {} generations failed; the first: {}",
                                                   num_failed, n, first_error)),
                        kFailure);
  }
  return 0;
}

}  // namespace

void add_run_command(CLI::App& app, CommandResult& result) {
  auto o = std::make_shared<RunOptions>();
  CLI::App* c = app.add_subcommand("run", "Generate from many prompts at once (batched)");
  c->add_option("--model", o->model, "Program or GGUF model file")->required();
  c->add_option("--prompt", o->prompts, "A prompt (repeatable)");
  c->add_option("--prompts-file", o->prompts_file, "Prompts, one per line (\\n escapes)");
  c->add_option("--prompt-tokens-file", o->prompt_tokens_file,
                "Prompts as token ids, one per line (no BOS added)");
  add_chat_flags(*c, o->chat, "Apply the model's chat template to each text prompt");
  c->add_option("--max-new-tokens", o->sampling.max_new_tokens,
                "Tokens to generate per prompt (128)");
  add_sampling_flags(*c, o->sampling);
  c->add_option("--seed", o->sampling.seed, "Seed of prompt 0; prompt i uses seed + i");
  c->add_flag("--ignore-eos", o->sampling.ignore_eos, "Do not stop at EOS or end-of-turn tokens");
  add_prefix_reuse_flag(*c, o->no_prefix_reuse);
  c->add_option("--stop", o->stop, "A stop string (repeatable)");
  add_engine_flags(*c, o->engine);
  c->add_option("--report-json", o->report_json, "Write generations, engine metrics, config");
  c->callback([o, &result] { result.exit_code = run_command(*o); });
}

}  // namespace cellm::app
