// Reasoning models' thinking apart from their answer, as vLLM's reasoning parsers give it: with
// `cellm serve --reasoning-parser`, a chat completion's text between <think> and </think> is the
// message's `reasoning_content`, what follows </think> its `content` (read for tool calls after
// that). Two parsers, as vLLM names them:
//   qwen3        (Qwen3, QwQ) thinking is an answer that begins with <think> (spaces before it
//                allowed); an answer without it is all content.
//   deepseek_r1  (DeepSeek-R1 and its distills, whose template opens <think> in the prompt) the
//                answer begins thinking, with or without a <think> of its own.
// Thinking that never reaches </think> (cut by the length) is all reasoning. Output held to a
// format (JSON, a regular expression) is not split: the format applies from the first token.
// Knows no tokenizer and no sockets. Who calls it: serve_exchange.cpp. Thread-safety: functions
// over values; a ReasoningStream belongs to one choice.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace cellm::app {

enum class ReasoningParser { kNone, kQwen3, kDeepSeekR1 };

// "qwen3", "deepseek_r1" (or "none"); nullopt for another name.
std::optional<ReasoningParser> reasoning_parser_from_name(std::string_view name);

struct ReasoningSplit {
  std::optional<std::string> reasoning;  // none: the answer did not think
  std::string content;
};

// The whole text split by `parser` (kNone: all content).
ReasoningSplit split_reasoning(ReasoningParser parser, std::string_view text);

// split_reasoning over a text that arrives in pieces: each push() returns the reasoning and the
// content that can be told apart so far (a tag's first characters wait for the next piece);
// finish() the rest. Pushed and finished pieces add up to split_reasoning's of the whole text.
class ReasoningStream {
 public:
  explicit ReasoningStream(ReasoningParser parser) : parser_(parser) {}
  struct Pieces {
    std::string reasoning;
    std::string content;
  };
  Pieces push(std::string_view delta);
  Pieces finish();

 private:
  enum class Phase { kStart, kThinking, kAnswer };
  Pieces advance(bool last);

  ReasoningParser parser_;
  Phase phase_ = Phase::kStart;
  std::string pending_;  // text not yet told apart
};

}  // namespace cellm::app
