// GenConfig: what one generation asks for — how many new tokens, how to sample them, what stops
// it — and FinishReason, how it ended (DESIGN §6–§7).
//
// Plain data handed to Session::generate_async. The Runner checks it against the executor's
// limits at submit (validate_gen_config checks what it can without them). It knows no
// tokenizer: stop strings are matched on the text a TextStream (stop_matcher.h) makes, and the
// model's default stop tokens (EOS, end of turn) come from RunnerOptions, which the app fills
// from its tokenizer. Thread-safety: plain values.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "batching/batch.h"
#include "batching/json_schema.h"
#include "core/status.h"

namespace cellm {

// One token's additive logit bias (applied before penalties and sampling).
struct LogitBias {
  int32_t token = 0;
  float bias = 0.0f;  // -infinity bans the token
};

// How a session picks each token from its logits row (sampler.h). The defaults are greedy.
struct SamplingParams {
  float temperature = 0.0f;         // <= 0: greedy (argmax, lowest id on ties)
  int32_t top_k = 0;                // keep the k most likely; 0 = off
  float top_p = 1.0f;               // keep the smallest set reaching this mass; 1 = off
  float min_p = 0.0f;               // drop tokens below min_p * the top probability; 0 = off
  float repetition_penalty = 1.0f;  // > 1 discourages tokens seen in the window; 1 = off
  float presence_penalty = 0.0f;    // subtracted once from a token seen in the window
  float frequency_penalty = 0.0f;   // subtracted once per occurrence in the window
  int32_t penalty_window = 64;      // last tokens of the context the penalties look at; -1 = all
  std::vector<LogitBias> logit_bias;
  // Each delivered token's log-probability and those of the `logprobs` most likely tokens at its
  // position (GenerationUpdate::logprobs; token_logprobs.h); -1 = none, at most kMaxLogprobs.
  int32_t logprobs = -1;
  // The same for each prompt token after the session's first position
  // (GenerationUpdate::prompt_logprobs): every prompt position is computed, none reused from
  // another session's cells. -1 = none, at most kMaxLogprobs.
  int32_t prompt_logprobs = -1;
};

inline constexpr int32_t kMaxLogprobs = kMaxTopLogprobs;

struct GenConfig {
  int32_t max_new_tokens = 128;  // >= 0; 0 only runs the prompt (NewTokenLimit, no token)
  // The first min_new_tokens tokens end nothing (vLLM's min_tokens): stop tokens are banned from
  // them and a stop string ending inside them stops nothing (it is shown). At most
  // max_new_tokens; not beside a constrained output.
  int32_t min_new_tokens = 0;
  SamplingParams sampling;
  uint64_t seed = 0;  // every random draw is a function of (seed, position) only
  // Tokens that end the generation (delivered, then StopToken). The model's defaults
  // (RunnerOptions::default_stop_tokens) are added unless use_default_stop_tokens is false.
  std::vector<int32_t> stop_tokens;
  bool use_default_stop_tokens = true;
  // Text that ends the generation (StopString) once it appears in the detokenized output; the
  // text is cut before it and a partial match is never emitted. Needs RunnerOptions::text_streams.
  std::vector<std::string> stop_strings;
  // Constrains the output to one JSON object (OpenAI's response_format "json_object"): each
  // token is picked among those that keep the text a prefix of one (batching/json_prefix.h) with
  // at most kJsonMaxWhitespaceRun whitespace bytes in a row between its tokens, and the
  // generation ends (FormatComplete) once the object is whole. Needs RunnerOptions::token_bytes.
  // Tokens that add no text (control tokens, EOS) are never picked.
  bool json_object = false;
  // Constrains the output to one JSON value the schema accepts (OpenAI's response_format
  // "json_schema"; batching/json_schema_prefix.h), as json_object does for any object; the
  // generation ends (FormatComplete) once nothing but whitespace may follow — a whole value that
  // could go on (a top-level number) may end with a stop token instead. Takes json_object's
  // place when set.
  std::shared_ptr<const JsonSchema> json_schema = nullptr;
  // Constrains the whole output to a text the pattern matches (compiled with
  // StringPattern::Target::kWholeText: vLLM's guided_regex, and guided_choice as an alternation of
  // its texts; batching/text_pattern_prefix.h): each token is picked among those that keep the
  // text a prefix of a match, a stop token only where the text matches, and the generation ends
  // (FormatComplete) once nothing may follow. Not beside json_object or json_schema.
  std::shared_ptr<const StringPattern> text_pattern = nullptr;

  // Whether the output is held to a JSON format (json_object or json_schema).
  bool constrained_to_json() const { return json_object || json_schema != nullptr; }
  // Whether each token is picked under a mask (a JSON format or a text pattern).
  bool constrained() const { return constrained_to_json() || text_pattern != nullptr; }
};

// The whitespace a json_object generation may write between two tokens: a newline and an
// indentation of 19 (a model that was not trained to write JSON would otherwise write whitespace
// until max_new_tokens, every byte of it valid JSON).
inline constexpr int32_t kJsonMaxWhitespaceRun = 20;

enum class FinishReason {
  kStopToken,       // a stop token was produced (and delivered)
  kStopString,      // a stop string appeared in the text
  kFormatComplete,  // the JSON value GenConfig::json_object or json_schema asked for is whole,
                    // or the text_pattern's match can take no more
  kNewTokenLimit,   // max_new_tokens were produced
  kCancelled,       // cancel(), the session closed, or the runner shut down
  kFailed,          // refused at submit, an executor failure, or a callback threw
};

inline constexpr std::array<FinishReason, 6> kFinishReasons = {
    FinishReason::kStopToken,     FinishReason::kStopString, FinishReason::kFormatComplete,
    FinishReason::kNewTokenLimit, FinishReason::kCancelled,  FinishReason::kFailed};

// "stop_token", "stop_string", "format_complete", "new_token_limit", "cancelled", "failed".
std::string_view finish_reason_name(FinishReason reason);

// Checks the fields that need no executor: counts and ranges of the sampling parameters, empty
// stop strings. The message names the field.
Status validate_gen_config(const GenConfig& config);

}  // namespace cellm
