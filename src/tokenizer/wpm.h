// WordPiece (`tokenizer.ggml.model` = "bert"): BERT's basic tokenization, then greedy
// longest-match-first pieces.
//
// Normalization as Hugging Face's BertNormalizer with lowercase (which also strips accents):
// control characters (category C, but not \t \n \r) and U+FFFD are dropped, every code point is
// decomposed (NFD), nonspacing marks are dropped and the rest lowercased (wpm_fold.h). Words are
// then split at whitespace, and every punctuation character (Unicode P, or ASCII symbols) and
// CJK ideograph becomes a word of its own. A word is matched against the vocabulary as llama.cpp's
// converter stores it: "▁word" for a word start, the bare piece for a "##" continuation. A word
// with a character no piece covers, or longer than 100 characters, becomes [UNK].
// Differences from llama.cpp, which follow Hugging Face instead: full decomposition (llama.cpp
// keeps only the first code point, losing Hangul jamo), combining marks in the input are dropped,
// \v and \f are dropped rather than split at, and the 100-character word limit.
// Internal to the tokenizer library. Thread-safety: immutable; encode() may run on many threads.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "tokenizer/regex.h"
#include "tokenizer/token_index.h"
#include "tokenizer/vocab.h"

namespace cellm::tokenizer_internal {

// NFD + drop nonspacing marks + lowercase, code point by code point; `text` must be valid UTF-8.
std::string wpm_fold(std::string_view text);

class WpmEncoder {
 public:
  // `vocab` and `index` must outlive the encoder.
  static StatusOr<WpmEncoder> create(const Vocab& vocab, const TokenIndex& index);

  // BERT's basic tokenization of `text` (any bytes; invalid UTF-8 is replaced by U+FFFD first).
  StatusOr<std::vector<std::string>> split_words(std::string_view text) const;

  // Appends the ids of `text`.
  Status encode(std::string_view text, std::vector<int32_t>* out) const;

 private:
  WpmEncoder(const Vocab& vocab, const TokenIndex& index, Regex classes)
      : vocab_(&vocab), index_(&index), classes_(std::move(classes)) {}

  const Vocab* vocab_;
  const TokenIndex* index_;
  Regex classes_;  // groups: 1 dropped, 2 whitespace, 3 single-character word, 4 word characters
};

}  // namespace cellm::tokenizer_internal
