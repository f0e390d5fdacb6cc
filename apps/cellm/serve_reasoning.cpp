// Reasoning apart from the answer (serve_reasoning.h).
#include "serve_reasoning.h"

#include <algorithm>

namespace cellm::app {
namespace {

constexpr std::string_view kOpen = "<think>";
constexpr std::string_view kClose = "</think>";

// How many of `text`'s last bytes begin `tag` (a tag that may be completed by the next piece).
size_t partial_tag_at_end(std::string_view text, std::string_view tag) {
  for (size_t k = std::min(tag.size() - 1, text.size()); k > 0; --k) {
    if (text.ends_with(tag.substr(0, k))) return k;
  }
  return 0;
}

}  // namespace

std::optional<ReasoningParser> reasoning_parser_from_name(std::string_view name) {
  if (name == "none") return ReasoningParser::kNone;
  if (name == "qwen3") return ReasoningParser::kQwen3;
  if (name == "deepseek_r1") return ReasoningParser::kDeepSeekR1;
  return std::nullopt;
}

ReasoningSplit split_reasoning(ReasoningParser parser, std::string_view text) {
  ReasoningStream stream(parser);
  ReasoningStream::Pieces whole = stream.push(text);
  ReasoningStream::Pieces rest = stream.finish();
  whole.reasoning += rest.reasoning;
  whole.content += rest.content;
  ReasoningSplit split;
  split.content = std::move(whole.content);
  // Whether the answer thought: deepseek_r1 always does; qwen3 when it opened <think>.
  const size_t first = text.find_first_not_of(" \t\r\n");
  const bool opened = first != std::string_view::npos && text.substr(first).starts_with(kOpen);
  if (parser == ReasoningParser::kDeepSeekR1 || (parser == ReasoningParser::kQwen3 && opened)) {
    split.reasoning = std::move(whole.reasoning);
  }
  return split;
}

ReasoningStream::Pieces ReasoningStream::push(std::string_view delta) {
  pending_.append(delta);
  return advance(/*last=*/false);
}

ReasoningStream::Pieces ReasoningStream::finish() { return advance(/*last=*/true); }

ReasoningStream::Pieces ReasoningStream::advance(bool last) {
  Pieces out;
  if (parser_ == ReasoningParser::kNone) {
    out.content.swap(pending_);
    return out;
  }
  if (phase_ == Phase::kStart) {
    // Spaces, then maybe <think>: wait until it is known.
    const size_t first = pending_.find_first_not_of(" \t\r\n");
    const std::string_view rest =
        first == std::string::npos ? std::string_view() : std::string_view(pending_).substr(first);
    if (!last &&
        (first == std::string::npos || (rest.size() < kOpen.size() && kOpen.starts_with(rest)))) {
      return out;
    }
    if (rest.starts_with(kOpen)) {
      pending_.erase(0, first + kOpen.size());  // the tag and the spaces before it go
      phase_ = Phase::kThinking;
    } else {
      phase_ = parser_ == ReasoningParser::kDeepSeekR1 ? Phase::kThinking : Phase::kAnswer;
    }
  }
  if (phase_ == Phase::kThinking) {
    const size_t close = pending_.find(kClose);
    if (close == std::string::npos) {
      const size_t keep = last ? 0 : partial_tag_at_end(pending_, kClose);
      out.reasoning = pending_.substr(0, pending_.size() - keep);
      pending_.erase(0, pending_.size() - keep);
      return out;
    }
    out.reasoning = pending_.substr(0, close);
    pending_.erase(0, close + kClose.size());
    phase_ = Phase::kAnswer;
  }
  out.content += pending_;
  pending_.clear();
  return out;
}

}  // namespace cellm::app
