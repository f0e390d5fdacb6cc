// SentencePiece-style BPE by score (`tokenizer.ggml.model` = "llama"), as llama.cpp runs it.
//
// The text's spaces become U+2581 ('▁'); the text is split into UTF-8 characters (a byte that
// starts no valid character is one symbol by itself: llama.cpp sizes it by its lead bits and
// swallows what follows, which loses the bytes' round trip; valid text splits the same); then,
// over and over, the adjacent pair whose concatenation is the highest-scoring token (leftmost on
// ties) is merged. Symbols that never formed a token fall back to byte tokens <0xNN>, or to the
// unknown token when the vocabulary has no byte tokens. The space prefix is the caller's
// business (tokenizer.cpp adds it). Internal to the tokenizer library.
// Thread-safety: immutable; encode() may run on many threads at once.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "tokenizer/token_index.h"
#include "tokenizer/vocab.h"

namespace cellm::tokenizer_internal {

inline constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";  // U+2581 '▁'

class SpmEncoder {
 public:
  // `vocab` and `index` must outlive the encoder.
  SpmEncoder(const Vocab& vocab, const TokenIndex& index) : vocab_(vocab), index_(index) {}

  // Appends the ids of `text` (raw text: spaces are escaped here). An error only when a byte
  // has neither a byte token nor an unknown token to fall back to.
  Status encode(std::string_view text, std::vector<int32_t>* out) const;

 private:
  const Vocab& vocab_;
  const TokenIndex& index_;
};

}  // namespace cellm::tokenizer_internal
