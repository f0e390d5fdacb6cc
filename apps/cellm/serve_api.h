// The OpenAI-compatible wire format of `cellm serve`: a request body to a ServeRequest (plain
// data: the prompt as text, token ids or chat turns, and the GenConfig it asks for), and the
// response bodies and server-sent events back.
//
// Pure functions over JSON text; no sockets, no tokenizer, no Runner (serve_http.h joins them).
// serve_api.cpp parses, serve_response.cpp formats.
// What a request may say: the fields of OpenAI's /v1/completions and /v1/chat/completions that
// cellm can honour (several prompts and `n` choices each included), plus vLLM's top_k, min_p,
// repetition_penalty, ignore_eos and return_token_ids, tools (serve_tools.h: tools, tool_choice,
// parallel_tool_calls; assistant messages' tool_calls and tool messages), assistant messages'
// reasoning_content, vLLM's chat_template_kwargs (enable_thinking only), add_generation_prompt
// and continue_final_message, vLLM's structured
// outputs (guided_json,
// guided_regex, guided_choice), log-probabilities (completions' "logprobs": n, chat's
// "logprobs": true with "top_logprobs": n; n at most kMaxLogprobs), and completions' "echo" (with
// logprobs, the prompt tokens' too). A field cellm cannot honour with a value that matters
// (best_of > 1, suffix, guided_grammar) is refused by name rather than
// ignored;
// fields that change nothing (user, metadata) are ignored. Every refusal is InvalidArgument naming
// the field. Who calls it: serve_http.cpp and the request fuzzer. Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "batching/gen_config.h"
#include "cmd_text.h"
#include "core/status.h"
#include "serve_reasoning.h"
#include "serve_tools.h"

namespace cellm::app {

enum class ServeEndpoint {
  kCompletions,      // POST /v1/completions: "prompt"
  kChatCompletions,  // POST /v1/chat/completions: "messages"
};

// The most choices one request may ask for: prompts × n.
inline constexpr int32_t kMaxServeChoices = 64;

// One prompt of a completions request: text, or token ids taken as given (no BOS added).
struct ServePrompt {
  std::optional<std::string> text;
  std::vector<int32_t> tokens;  // when there is no text
};

struct ServeRequest {
  ServeEndpoint endpoint = ServeEndpoint::kCompletions;
  std::string model;  // as asked; empty when not given
  // The prompts: completions' "prompt" (one, or a list), or chat completions' "messages".
  std::vector<ServePrompt> prompts;  // completions: at least one
  std::vector<ChatTurn> messages;    // chat completions: at least one
  // Choices per prompt (choice k is prompt k / n's); with a seed, choice k samples with seed + k.
  int32_t n = 1;
  // Tokens to generate; none: OpenAI's defaults (16 for a completion, as many as the session's
  // context leaves for a chat completion).
  std::optional<int32_t> max_tokens;
  // Sampling, penalties, stop strings, ignore_eos (use_default_stop_tokens off). The seed is
  // in `seed`: none asks the server for a fresh one.
  GenConfig config;
  std::optional<uint64_t> seed;
  bool stream = false;
  bool stream_include_usage = false;  // stream_options.include_usage
  bool return_token_ids = false;      // prompt_token_ids and each choice's token_ids
  // Completions: each choice's text (and log-probabilities) begins with its prompt's; with
  // logprobs, config.sampling.prompt_logprobs asks the engine for the prompt's. Chat (vLLM's
  // echo): each answer's content begins with the final message's where that is the assistant's
  // (an answer continued: continue_final_message), text only.
  bool echo = false;
  // Chat: the functions the model may call and how (tools.syntax is the server's to set, from
  // the model's chat template).
  ServeTools tools;
  // Chat: how the prompt ends — vLLM's add_generation_prompt and continue_final_message (the
  // final message an assistant's answer the model goes on writing; the response holds only what
  // it writes) — and chat_template_kwargs' enable_thinking (formats with a thinking switch —
  // qwen3 — open the answer with an empty thinking block when it is off; the others ignore it).
  ChatPromptOptions chat_prompt;
  // Chat: how the answer's thinking is told apart (the server's to set: --reasoning-parser).
  ReasoningParser reasoning = ReasoningParser::kNone;
};

// The request in `body` for `endpoint`; InvalidArgument naming the field for anything else
// (malformed JSON, a wrong type, a value out of range, an unsupported option).
StatusOr<ServeRequest> parse_serve_request(std::string_view body, ServeEndpoint endpoint);

// Prompts in a request: one for chat, prompts.size() for completions.
size_t num_prompts(const ServeRequest& request);

// POST /tokenize: one prompt ("prompt" or "messages", as the completion endpoints take them).
struct TokenizeRequest {
  ServeRequest prompt;
  bool add_special_tokens = true;  // false: no BOS before a text prompt
};
StatusOr<TokenizeRequest> parse_tokenize_request(std::string_view body);
// POST /detokenize: {"tokens": [ids]}.
StatusOr<std::vector<int32_t>> parse_detokenize_request(std::string_view body);

// One token and its log-probability as a response shows them: the token as its bytes (its piece;
// maybe not UTF-8 on its own, replaced where JSON needs text).
struct ServeLogprob {
  std::string token;
  // -infinity is sent as -9999.0, as vLLM does; none (null) for an echoed prompt's first token.
  std::optional<float> logprob;
};

// A generated token's log-probability and the most likely tokens' at its position.
struct ServeTokenLogprobs {
  ServeLogprob sampled;
  std::vector<ServeLogprob> top;  // best first
};

// What one choice (one generation) produced.
struct ServeChoice {
  // With tool calls read: the content, the calls' text left out; with a reasoning parser, the
  // answer after its thinking.
  std::string text;
  std::optional<std::string> reasoning;   // the thinking, where the answer thought
  std::vector<ServeToolCall> tool_calls;  // finish_reason shows as "tool_calls" where any
  FinishReason finish_reason = FinishReason::kFailed;
  std::vector<int32_t> tokens;
  // One per token when the request asked for log-probabilities (config.sampling.logprobs >= 0),
  // after one per prompt token with echo.
  std::vector<ServeTokenLogprobs> logprobs;
};

// What a request produced, for the response.
struct ServeResult {
  std::string id;  // "cmpl-..." or "chatcmpl-..."
  int64_t created_s = 0;
  std::string model;
  std::vector<std::vector<int32_t>> prompt_tokens;  // [num_prompts]
  // [num_prompts] with echo: as echoed (a chat's: its final assistant message's, or "")
  std::vector<std::string> prompt_texts;
  std::vector<ServeChoice> choices;  // [num_prompts × n]; choice k of prompt k / n
};

// OpenAI's finish_reason: "stop" (a stop token or string), "length", "cancelled".
std::string_view openai_finish_reason(FinishReason reason);
// A choice's: "tool_calls" where it made calls (and was not cancelled), else its reason's.
std::string_view openai_finish_reason(const ServeChoice& choice);

// The whole response of a request that did not stream. Token ids, when asked: each choice's
// `token_ids`, and its prompt's `prompt_token_ids` on the choice (completions) or once on the
// response (chat), as vLLM gives them. Log-probabilities, when asked, in each endpoint's OpenAI
// shape: completions' {tokens, token_logprobs, top_logprobs, text_offset} (offsets of each
// token's bytes in the choice's generated text), chat's {content: [{token, logprob, bytes,
// top_logprobs}]}.
nlohmann::ordered_json completion_response_json(const ServeRequest& request,
                                                const ServeResult& result);

// One server-sent event's JSON for choice `index`: a text delta (and the token ids it came from,
// when asked), or, with `finish_reason`, the choice's last chunk. A choice's first chunk carries
// the role (chat) or its prompt's token ids (when asked). With log-probabilities asked for, the
// entries of result.choices[index].logprobs from `first_logprob` on (those not sent before).
nlohmann::ordered_json completion_chunk_json(const ServeRequest& request, const ServeResult& result,
                                             size_t index, std::string_view text_delta,
                                             const std::vector<int32_t>& token_delta, bool first,
                                             std::optional<FinishReason> finish_reason,
                                             size_t first_logprob = 0);

// A chat choice's thinking as a chunk: a reasoning_content delta.
nlohmann::ordered_json reasoning_chunk_json(const ServeRequest& request, const ServeResult& result,
                                            size_t index, std::string_view reasoning_delta,
                                            bool first);

// A chat choice's calls as one chunk: a tool_calls delta, each call whole with its index.
nlohmann::ordered_json tool_calls_chunk_json(const ServeRequest& request, const ServeResult& result,
                                             size_t index);

// The chunk after the last one when stream_options.include_usage: no choices, the usage.
nlohmann::ordered_json usage_chunk_json(const ServeRequest& request, const ServeResult& result);

// "data: <json>\n\n"; sse_done() is "data: [DONE]\n\n".
std::string sse_event(const nlohmann::ordered_json& data);
std::string sse_done();

// OpenAI's error body: {"error": {"message", "type", "code"}}, type from the status code.
nlohmann::ordered_json error_json(const Status& status);
// 400 for InvalidArgument and OutOfRange, 404 NotFound, 503 ResourceExhausted and Cancelled,
// 500 otherwise.
int http_status_for(const Status& status);

// The answer to a request the HTTP layer refused before any route's handler ran — `status` 404
// (no route), 413 (a body larger than the server accepts), 400 (a request it could not read) — or
// to a known route asked with another method (`allowed_method` not empty: 405, which the caller
// sends with an Allow header): the status and OpenAI's error body.
struct HttpRefusal {
  int status = 500;
  nlohmann::ordered_json body;
};
HttpRefusal http_refusal(int status, std::string_view method, std::string_view path,
                         bool has_body_length, std::string_view allowed_method);

}  // namespace cellm::app
