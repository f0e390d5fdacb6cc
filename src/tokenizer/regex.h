// Regex: a PCRE2 pattern compiled once (UTF, Unicode properties, JIT when available) and matched
// over UTF-8 text. The tokenizer's only door to PCRE2 (pre-tokenizers, WordPiece splitting).
// Thread-safety: a Regex is immutable and shared freely; a Matcher (scratch space for one
// search at a time) belongs to one thread.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "core/status.h"

namespace cellm::tokenizer_internal {

struct RegexMatch {
  size_t begin = 0;  // byte offsets into the subject
  size_t end = 0;
  int group = 0;  // the lowest-numbered capture group that took part, 0 if none did
};

class Regex {
 public:
  // InvalidArgument naming the pattern, PCRE2's message and the offset on a bad pattern.
  static StatusOr<Regex> compile(std::string_view pattern);

  const std::string& pattern() const;

  class Matcher {
   public:
    explicit Matcher(const Regex& regex);
    Matcher(const Matcher&) = delete;
    Matcher& operator=(const Matcher&) = delete;
    ~Matcher();

    // The first match in `subject` at or after byte `start` (a character boundary). The
    // subject must be valid UTF-8. False when there is none; an error when PCRE2 fails
    // (a resource limit), naming the pattern.
    StatusOr<bool> find(std::string_view subject, size_t start, RegexMatch* match);

   private:
    const Regex& regex_;
    void* match_data_;  // pcre2_match_data*
  };

 private:
  struct Code;
  std::shared_ptr<const Code> code_;
};

}  // namespace cellm::tokenizer_internal
