// StreamingDetokenizer: turns generated token ids, one at a time, into text that is safe to
// print: only whole UTF-8 characters, and nothing that might turn out to be the start of a stop
// string.
//
// push(id) appends the token's piece (with the same first-token rule as Tokenizer::decode) and
// returns the text that became final. Bytes of a character split across tokens wait for the
// rest; a byte that can never become valid UTF-8 is emitted as U+FFFD (so the output is always
// valid UTF-8, and for ids whose full decode is valid UTF-8 the pieces concatenate to exactly
// Tokenizer::decode). With stop strings, the longest tail that is a prefix of one of them is held
// back until it is ruled out; when a stop string appears, the text before it is returned,
// stopped() turns true and everything after is dropped. finish() flushes what is held (an
// incomplete character becomes U+FFFD).
// For a continuation after a prompt (generated tokens), pass strip_leading_space = false: the
// first generated token's space is real text there.
// Who calls it: the runner and `cellm generate` while streaming. Thread-safety: one owner; the
// Tokenizer it reads may be shared.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "tokenizer/tokenizer.h"

namespace cellm {

class StreamingDetokenizer {
 public:
  // `tokenizer` must outlive this object. Empty stop strings are ignored.
  explicit StreamingDetokenizer(const Tokenizer& tokenizer, DecodeOptions options = {},
                                std::vector<std::string> stop_strings = {});

  // The text made final by this token (often empty). InvalidArgument for an id out of range.
  // After a stop string was seen, returns "" for every further token.
  StatusOr<std::string> push(int32_t id);

  // Everything still held back; the stream is over (a later push starts no new first token).
  std::string finish();

  bool stopped() const { return stopped_; }
  // The stop string that ended the stream; empty while not stopped.
  const std::string& matched_stop_string() const { return matched_stop_; }

 private:
  // Moves the complete characters of pending_bytes_ to held_text_ (bad bytes as U+FFFD);
  // `at_end`: an incomplete tail counts as bad too.
  void drain_bytes(bool at_end);
  // Returns the part of held_text_ that is final, checking the stop strings.
  std::string release_text(bool at_end);

  const Tokenizer& tokenizer_;
  DecodeOptions options_;
  std::vector<std::string> stop_strings_;
  bool first_token_ = true;
  bool stopped_ = false;
  std::string matched_stop_;
  std::string pending_bytes_;  // decoded bytes not yet known to form whole characters
  std::string held_text_;      // valid UTF-8 not yet released (a possible stop-string start)
};

}  // namespace cellm
