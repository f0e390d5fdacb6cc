// Pre-tokenizers of byte-level BPE vocabularies: `tokenizer.ggml.pre` → regular expressions.
//
// A pre-tokenizer is a list of patterns applied in sequence, as llama.cpp and Hugging Face's
// `Sequence` of `Split` pre-tokenizers do: each pattern splits every piece left by the previous
// one into its matches and the gaps between them (gaps are kept as pieces of their own); each
// piece is matched in isolation, so anchors and lookarounds never see past it. Patterns run with
// PCRE2 (UTF, Unicode properties, JIT). The table is data: adding a `pre` value is one row in
// pretokenizer.cpp. Knows text and regexes, not tokens.
// Thread-safety: a compiled PreTokenizer is immutable; split() may run on many threads at once.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "tokenizer/regex.h"

namespace cellm {

struct PreTokenizerSpec {
  std::vector<std::string_view> names;     // `tokenizer.ggml.pre` values that select it
  std::vector<std::string_view> patterns;  // PCRE2 syntax, applied in order
  bool ignore_merges = false;              // a piece that is a token is emitted whole (llama3)
  bool add_bos = false;                    // the vocabulary's default for add_bos_token
};

// The spec named `pre`, or nullptr. "default" is the pattern set llama.cpp uses for BPE files
// without a `pre` key (gpt-neox, baichuan-era files).
const PreTokenizerSpec* find_pre_tokenizer(std::string_view pre);
// Every accepted name, sorted (for error messages).
std::vector<std::string_view> pre_tokenizer_names();

// One byte range of the text given to split().
struct TextPiece {
  size_t offset = 0;
  size_t length = 0;
};

class PreTokenizer {
 public:
  // Compiles the patterns; InvalidArgument naming the pattern and PCRE2's message on failure.
  static StatusOr<PreTokenizer> compile(const std::vector<std::string_view>& patterns);
  static StatusOr<PreTokenizer> compile(const PreTokenizerSpec& spec) {
    return compile(spec.patterns);
  }

  // Splits `text`, which must be valid UTF-8 (callers sanitize first), into pieces that cover it
  // in order. An error only when PCRE2 itself fails (resource limits), naming the pattern.
  Status split(std::string_view text, std::vector<TextPiece>* pieces) const;

 private:
  std::vector<tokenizer_internal::Regex> patterns_;
};

}  // namespace cellm
