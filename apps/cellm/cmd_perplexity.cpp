// `cellm perplexity --model F (--file T | --text S) [--context N] [--max-chunks K] [--json]`: the
// model's perplexity on a text, e.g. to compare quantizations of one model.
//
// The text is tokenized as one piece (no BOS) and cut into consecutive chunks of N tokens (the
// last may be shorter). Each chunk runs as a prompt of its own, BOS first when the vocabulary
// adds one, and every chunk token with a token before it in that prompt is scored:
// ln p(token | the prompt before it), the model's raw log-softmax (prompt log-probabilities
// through the Runner, no new token; on CUDA each row is summarized on the device). Perplexity is
// exp(-mean) over every scored token. Chunks run concurrently, at most the executor's sessions at
// once. Prints one line (or with --json one object, per-chunk figures included); bad arguments:
// one line, exit status 2; a failure: one line, exit status 1.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "batching/runner.h"
#include "cmd_engine.h"
#include "cmd_text.h"
#include "commands.h"

namespace cellm::app {
namespace {

struct PerplexityOptions {
  std::string model;
  std::string file;  // given when file_option's count is 1
  std::string text;  // given when text_option's count is 1
  CLI::Option* file_option = nullptr;
  CLI::Option* text_option = nullptr;
  int32_t context = 512;
  int32_t max_chunks = 0;  // 0: every chunk
  bool json = false;
  EngineFlags engine;
};

int fail(const Status& status, int exit_code) {
  std::cerr << "cellm perplexity: " << status.message() << "\n";
  return exit_code;
}

// One chunk's prompt and, once it ran, the log-probabilities of its scored tokens.
struct Chunk {
  std::vector<int32_t> prompt;
  std::vector<double> logprobs;
};

// Runs every chunk's prompt with prompt log-probabilities, `max_at_once` sessions at a time.
Status score_chunks(Runner& runner, std::vector<Chunk>& chunks, int32_t max_at_once) {
  GenConfig config;
  config.max_new_tokens = 0;
  config.sampling.prompt_logprobs = 0;
  for (size_t first = 0; first < chunks.size(); first += static_cast<size_t>(max_at_once)) {
    const size_t end = std::min(chunks.size(), first + static_cast<size_t>(max_at_once));
    std::vector<Session> sessions;
    std::vector<GenerationHandle> handles;
    for (size_t c = first; c < end; ++c) {
      sessions.push_back(runner.open_session());
      Chunk& chunk = chunks[c];
      handles.push_back(sessions.back().generate_async(
          chunk.prompt, config, [&chunk](const GenerationUpdate& update) {
            for (const TokenLogprobs& entry : update.prompt_logprobs) {
              chunk.logprobs.push_back(entry.logprob);
            }
          }));
    }
    for (size_t k = 0; k < handles.size(); ++k) {
      handles[k].wait();
      if (handles[k].finish_reason() != FinishReason::kNewTokenLimit) {
        return internal_error("chunk " + std::to_string(first + k) +
                              " failed: " + handles[k].error_message());
      }
      const Chunk& chunk = chunks[first + k];
      if (chunk.logprobs.size() + 1 != chunk.prompt.size()) {
        return internal_error("chunk " + std::to_string(first + k) + " returned " +
                              std::to_string(chunk.logprobs.size()) + " log-probabilities for " +
                              std::to_string(chunk.prompt.size() - 1) + " tokens");
      }
    }
  }
  return ok_status();
}

StatusOr<std::string> read_text(const PerplexityOptions& o) {
  if (o.text_option->count() > 0) return o.text;
  std::ifstream in(o.file, std::ios::binary);
  if (!in.is_open()) return not_found("cannot read --file " + o.file);
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return data_loss("error reading --file " + o.file);
  return text.str();
}

int perplexity_command(const PerplexityOptions& o) {
  if ((o.file_option->count() > 0) == (o.text_option->count() > 0)) {
    return fail(invalid_argument("give exactly one of --file and --text"), 2);
  }
  if (const Status flags = check_engine_flags(o.engine); !flags.ok()) return fail(flags, 2);
  StatusOr<std::string> text = read_text(o);
  if (!text.ok()) return fail(text.status(), 1);
  StatusOr<Engine> engine = load_engine(o.model, o.engine);
  if (!engine.ok()) {
    return fail(engine.status(), engine.status().code() == StatusCode::kInvalidArgument ? 2 : 1);
  }
  const TextCodec codec = TextCodec::from_program(*engine->program);
  StatusOr<std::vector<int32_t>> tokens = codec.encode_text(*text);
  if (!tokens.ok()) return fail(tokens.status(), 1);
  const int32_t bos = codec.adds_bos() ? codec.bos_token() : kNoToken;
  const int32_t room = engine->limits.max_session_tokens - (bos != kNoToken ? 1 : 0);
  if (o.context > room) {
    return fail(invalid_argument("--context " + std::to_string(o.context) + " is more than the " +
                                 std::to_string(room) + " tokens a session may hold here"),
                2);
  }

  // The chunks: each scores its tokens after its prompt's first (every one, behind a BOS).
  std::vector<Chunk> chunks;
  const auto num_tokens = static_cast<int64_t>(tokens->size());
  for (int64_t begin = 0; begin < num_tokens; begin += o.context) {
    if (o.max_chunks > 0 && static_cast<int32_t>(chunks.size()) == o.max_chunks) break;
    Chunk chunk;
    if (bos != kNoToken) chunk.prompt.push_back(bos);
    chunk.prompt.insert(chunk.prompt.end(), tokens->begin() + begin,
                        tokens->begin() + std::min(num_tokens, begin + o.context));
    if (chunk.prompt.size() < 2) break;  // a last lone token with nothing before it
    chunks.push_back(std::move(chunk));
  }
  if (chunks.empty()) {
    return fail(invalid_argument("the text has no token to score (" + std::to_string(num_tokens) +
                                 " tokens)"),
                2);
  }

  Runner runner(*engine->executor, DecodeFirstScheduler(engine->scheduler), codec.runner_options());
  const auto start = std::chrono::steady_clock::now();
  const Status scored = score_chunks(runner, chunks, engine->limits.max_sessions);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!scored.ok()) return fail(scored, 1);

  double sum = 0.0;
  int64_t count = 0;
  nlohmann::json per_chunk = nlohmann::json::array();
  for (const Chunk& chunk : chunks) {
    double chunk_sum = 0.0;
    for (const double logprob : chunk.logprobs) chunk_sum += logprob;
    per_chunk.push_back(
        std::exp(-chunk_sum / static_cast<double>(std::max<size_t>(1, chunk.logprobs.size()))));
    sum += chunk_sum;
    count += static_cast<int64_t>(chunk.logprobs.size());
  }
  const double mean_nll = -sum / static_cast<double>(count);
  const double perplexity = std::exp(mean_nll);
  if (o.json) {
    const nlohmann::ordered_json out = {
        {"perplexity", perplexity}, {"mean_negative_log_likelihood", mean_nll},
        {"tokens_scored", count},   {"chunks", chunks.size()},
        {"context", o.context},     {"backend", engine->backend},
        {"seconds", seconds},       {"chunk_perplexities", per_chunk}};
    std::cout << out.dump() << "\n";
  } else {
    std::cout << "perplexity " << perplexity << " over " << count << " tokens in " << chunks.size()
              << " chunks of up to " << o.context << " (" << engine->backend << ", " << seconds
              << " s, " << static_cast<double>(count) / seconds << " tokens/s)\n";
  }
  return 0;
}

}  // namespace

void add_perplexity_command(CLI::App& app, CommandResult& result) {
  auto o = std::make_shared<PerplexityOptions>();
  CLI::App* c = app.add_subcommand("perplexity", "The model's perplexity on a text");
  c->add_option("--model", o->model, "Program or GGUF model file")->required();
  o->file_option = c->add_option("--file", o->file, "The text, from a file");
  o->text_option = c->add_option("--text", o->text, "The text itself");
  c->add_option("--context", o->context, "Tokens per chunk (512)")->check(CLI::Range(2, 1 << 30));
  c->add_option("--max-chunks", o->max_chunks, "Score only the first K chunks (0: all)")
      ->check(CLI::NonNegativeNumber);
  c->add_flag("--json", o->json, "Print one JSON object");
  add_engine_flags(*c, o->engine);
  c->callback([o, &result] { result.exit_code = perplexity_command(*o); });
}

}  // namespace cellm::app
