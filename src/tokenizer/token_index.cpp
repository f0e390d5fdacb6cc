#include "tokenizer/token_index.h"

#include "fmt/format.h"

namespace cellm::tokenizer_internal {

TokenIndex::TokenIndex(const Vocab& vocab) {
  ids_.reserve(vocab.tokens.size());
  for (int32_t id = 0; id < vocab.num_tokens(); ++id) {
    const std::string& text = vocab.tokens[static_cast<size_t>(id)];
    ids_[text] = id;
    max_token_length_bytes_ = std::max(max_token_length_bytes_, text.size());
  }
  for (int byte = 0; byte < 256; ++byte) {
    const std::string hex = fmt::format("<0x{:02X}>", byte);
    const char one[1] = {static_cast<char>(byte)};
    if (auto id = find(hex)) {
      byte_tokens_[static_cast<size_t>(byte)] = *id;
    } else if (auto single = find(std::string_view(one, 1))) {
      byte_tokens_[static_cast<size_t>(byte)] = *single;
    } else {
      byte_tokens_[static_cast<size_t>(byte)] = kNoToken;
    }
  }
}

}  // namespace cellm::tokenizer_internal
