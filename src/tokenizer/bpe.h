// Byte-level BPE (`tokenizer.ggml.model` = "gpt2"): GPT-2's byte-to-unicode mapping and merges
// by rank, over one pre-token at a time.
//
// Each byte of a pre-token starts as the token of its mapped character; then the adjacent pair
// with the lowest merge rank (leftmost on ties) is merged until no pair has a rank. Merges are
// looked up by the ids of the pair (both parts and the result are tokens: validate_vocab checks
// that). Pre-tokenization is pretokenizer.h's job. Internal to the tokenizer library.
// Thread-safety: immutable after build; encode_word() may run on many threads at once.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "tokenizer/token_index.h"
#include "tokenizer/vocab.h"

namespace cellm::tokenizer_internal {

// GPT-2's bytes_to_unicode: printable Latin-1 bytes map to themselves, the other 68 bytes to
// U+0100.. in byte order. Returns the code point for `byte`.
uint32_t byte_to_unicode(uint8_t byte);
// The inverse over code points; -1 for a code point that no byte maps to.
int byte_from_unicode(uint32_t code_point);

class BpeEncoder {
 public:
  // `vocab` and `index` must outlive the encoder; the vocabulary must have passed
  // validate_vocab.
  BpeEncoder(const Vocab& vocab, const TokenIndex& index);

  // Appends the ids of one pre-token (raw bytes). An error only when a byte has no token and the
  // vocabulary has no unknown token.
  Status encode_word(std::string_view word, std::vector<int32_t>* out) const;

  // The text a normal token stands for: its characters mapped back to bytes (a character outside
  // the mapping is kept as its UTF-8).
  static std::string decode_token_text(std::string_view token_text);

 private:
  struct Merge {
    int32_t rank = 0;
    int32_t result = 0;
  };
  static uint64_t pair_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }

  const Vocab& vocab_;
  const TokenIndex& index_;
  std::array<int32_t, 256> byte_ids_{};         // token of each byte's mapped character
  std::array<std::string, 256> byte_text_;      // UTF-8 of each byte's mapped character
  std::unordered_map<uint64_t, Merge> merges_;  // (left id, right id) -> lowest rank, result
};

}  // namespace cellm::tokenizer_internal
