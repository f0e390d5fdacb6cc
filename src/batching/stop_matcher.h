// StopMatcher: decides, token by token, whether a generation has hit a stop token or a stop
// string, and which text may be shown so far; TextStream: the seam through which it gets text.
//
// Batching knows no tokenizer. The app supplies a TextStreamFactory (RunnerOptions) built on its
// tokenizer's streaming detokenizer; the Runner makes one TextStream per generation and feeds it
// every delivered token. Stop strings are matched on that text: the matcher holds back the
// longest tail that could still become the start of a stop string, so a partial match is never
// emitted, and on a match it emits the text before the stop string and nothing after. Stop tokens
// are matched on ids (the token itself is delivered; its text, usually empty for control tokens,
// is emitted). Who calls it: the Runner, on the engine thread. Thread-safety: one thread at a
// time.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace cellm {

// Text for one generation's tokens, as they come. Implementations never split a UTF-8 character
// across calls (they hold an incomplete one back).
class TextStream {
 public:
  virtual ~TextStream() = default;
  // The text that `token` completes (possibly empty).
  virtual std::string append(int32_t token) = 0;
  // The text still held back when the generation ends.
  virtual std::string finish() = 0;
};

// One TextStream per generation. `context` is the session's tokens before the generation's first
// new token (a detokenizer may need it, e.g. to know whether a leading space is the text's first
// character). Called on the engine thread.
using TextStreamFactory =
    std::function<std::unique_ptr<TextStream>(std::span<const int32_t> context)>;

class StopMatcher {
 public:
  enum class Outcome { kContinue, kStopToken, kStopString };
  struct Step {
    Outcome outcome = Outcome::kContinue;
    std::string text;  // text that may be shown now
  };

  // `stop_tokens` in any order (duplicates fine); `stop_strings` non-empty strings. `text` may be
  // null when no text is wanted; then stop_strings must be empty (CELLM_CHECK). A stop string
  // that ends in the text of the first `min_tokens` tokens stops nothing: its text is shown (one
  // that began there and ends later stops).
  StopMatcher(std::vector<int32_t> stop_tokens, std::vector<std::string> stop_strings,
              std::unique_ptr<TextStream> text, int32_t min_tokens = 0);

  // One delivered token.
  Step push(int32_t token);
  // The generation ended for another reason (or after a stop token): the text held back.
  std::string finish();

  bool has_text() const { return text_ != nullptr; }

 private:
  // Bytes at the end of held_ that could begin a stop string.
  size_t num_held_back() const;

  std::vector<int32_t> stop_tokens_;  // sorted, unique
  std::vector<std::string> stop_strings_;
  std::unique_ptr<TextStream> text_;
  std::string held_;  // text made but not emitted: no stop string inside, only a possible start
  bool finished_ = false;
  int32_t min_tokens_ = 0;
  int32_t num_tokens_ = 0;  // pushed so far
};

}  // namespace cellm
