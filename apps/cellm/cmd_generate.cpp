// `cellm generate --model F (--prompt P | --prompt-tokens 1,45,23) [-n N]`: one session through
// the Runner, text streamed to stdout as it is produced. Greedy by default (--temperature,
// --top-k, --top-p, --min-p, --seed sample instead). --prompt is encoded with BOS when the
// vocabulary adds one; --prompt-tokens takes the ids as given, no BOS added. Generation stops
// after EOS or an end-of-turn token (included) unless --ignore-eos, or after N tokens. --json
// prints one object instead: {"prompt_tokens", "generated_tokens", "text", "finish_reason"}.
// Bad arguments: one line on stderr, exit status 2; a failure: one line, exit status 1.
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "batching/runner.h"
#include "cmd_engine.h"
#include "cmd_text.h"
#include "commands.h"

namespace cellm::app {
namespace {

struct GenerateOptions {
  std::string model;
  std::string prompt;  // given when prompt_option's count is 1
  CLI::Option* prompt_option = nullptr;
  std::string prompt_tokens;
  SamplingFlags sampling;
  ChatFlags chat;
  bool json = false;
  EngineFlags engine;
};

int fail(const Status& status, int exit_code) {
  std::cerr << "cellm generate: " << status.message() << "\n";
  return exit_code;
}

int generate_command(const GenerateOptions& o) {
  const bool has_prompt = o.prompt_option->count() > 0;
  if (has_prompt == !o.prompt_tokens.empty()) {
    return fail(invalid_argument("give exactly one of --prompt and --prompt-tokens"), 2);
  }
  if (o.chat.chat && !has_prompt) return fail(invalid_argument("--chat needs --prompt"), 2);
  StatusOr<GenConfig> config = gen_config_from_flags(o.sampling);
  if (!config.ok()) return fail(config.status(), 2);
  if (const Status flags = check_engine_flags(o.engine); !flags.ok()) return fail(flags, 2);
  std::vector<int32_t> prompt_tokens;
  if (!has_prompt) {
    StatusOr<std::vector<int32_t>> ids = parse_int_list(o.prompt_tokens, "--prompt-tokens");
    if (!ids.ok()) return fail(ids.status(), 2);
    prompt_tokens = std::move(ids).value();
  }

  StatusOr<Engine> engine = load_engine(o.model, o.engine);
  if (!engine.ok()) {
    return fail(engine.status(), engine.status().code() == StatusCode::kInvalidArgument ? 2 : 1);
  }
  const TextCodec codec = TextCodec::from_program(*engine->program);
  for (const int32_t id : prompt_tokens) {
    if (id < 0 || id >= engine->limits.vocab_size) {
      return fail(invalid_argument("--prompt-tokens: id " + std::to_string(id) +
                                   " is outside the vocabulary [0, " +
                                   std::to_string(engine->limits.vocab_size) + ")"),
                  2);
    }
  }
  if (has_prompt) {
    StatusOr<std::vector<int32_t>> ids =
        o.chat.chat
            ? codec.encode_chat(o.prompt, o.chat.system, /*enable_thinking=*/!o.chat.no_thinking)
            : codec.encode_prompt(o.prompt);
    if (!ids.ok()) return fail(ids.status(), 1);
    prompt_tokens = std::move(ids).value();
  }

  RunnerOptions runner_options = codec.runner_options();
  Runner runner(*engine->executor, DecodeFirstScheduler(engine->scheduler), runner_options);
  Session session = runner.open_session();
  const bool stream = !o.json;
  GenerationHandle handle =
      session.generate_async(prompt_tokens, *config, [stream](const GenerationUpdate& update) {
        if (stream && !update.text.empty()) std::cout << update.text << std::flush;
      });
  handle.wait();
  if (handle.finish_reason() == FinishReason::kFailed) {
    if (stream) std::cout << "\n";
    return fail(internal_error(handle.error_message()), 1);
  }
  if (o.json) {
    const nlohmann::ordered_json out = {
        {"prompt_tokens", prompt_tokens},
        {"generated_tokens", handle.tokens()},
        {"text", handle.text()},
        {"finish_reason", std::string(finish_reason_name(handle.finish_reason()))}};
    std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else {
    std::cout << "\n";
  }
  return 0;
}

}  // namespace

void add_generate_command(CLI::App& app, CommandResult& result) {
  auto o = std::make_shared<GenerateOptions>();
  CLI::App* c = app.add_subcommand("generate", "Generate text from one prompt (one session)");
  c->add_option("--model", o->model, "Program or GGUF model file")->required();
  o->prompt_option =
      c->add_option("--prompt", o->prompt, "Prompt text (BOS added when the model adds one)");
  c->add_option("--prompt-tokens", o->prompt_tokens, "Prompt token ids, e.g. 1,45,23 (as given)");
  c->add_option("-n,--max-new-tokens", o->sampling.max_new_tokens, "Tokens to generate (128)");
  add_sampling_flags(*c, o->sampling);
  c->add_option("--seed", o->sampling.seed, "Seed of the random draws");
  c->add_flag("--ignore-eos", o->sampling.ignore_eos, "Keep generating past EOS");
  add_chat_flags(*c, o->chat, "Apply the model's chat template to the prompt");
  c->add_flag("--json", o->json, "Print one JSON object instead of streaming text");
  add_engine_flags(*c, o->engine);
  c->callback([o, &result] { result.exit_code = generate_command(*o); });
}

}  // namespace cellm::app
