// TokenIndex: token text → id over a Vocab that outlives it (the views point into its strings),
// plus the byte-fallback ids. Internal to the tokenizer library; built once per Tokenizer.
// Thread-safety: immutable after build.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>
#include <unordered_map>

#include "tokenizer/vocab.h"

namespace cellm::tokenizer_internal {

class TokenIndex {
 public:
  // `vocab` must stay where it is while the index lives. A text that appears twice maps to its
  // last id (as llama.cpp does).
  explicit TokenIndex(const Vocab& vocab);

  std::optional<int32_t> find(std::string_view text) const {
    const auto it = ids_.find(text);
    if (it == ids_.end()) return std::nullopt;
    return it->second;
  }
  // The id of byte token "<0xXX>", or else of the one-byte text, or kNoToken.
  int32_t byte_token(uint8_t byte) const { return byte_tokens_[byte]; }
  size_t max_token_length_bytes() const { return max_token_length_bytes_; }

 private:
  std::unordered_map<std::string_view, int32_t> ids_;
  std::array<int32_t, 256> byte_tokens_{};
  size_t max_token_length_bytes_ = 0;
};

}  // namespace cellm::tokenizer_internal
