// SpecialTokenSplitter: finds special-token text inside the input before any encoder sees it,
// the way llama.cpp's tokenizer_st_partition does.
//
// Candidates are the control, unknown and user-defined tokens, longest text first (ties by id).
// Each candidate in turn splits every remaining plain-text fragment at its occurrences (leftmost
// first, no overlaps). User-defined tokens are always split out (Hugging Face matches added
// tokens before the model runs); control and unknown tokens only when parsing special tokens was
// asked for. A token with lstrip / rstrip also swallows the ASCII whitespace beside it.
// Internal to the tokenizer library. Thread-safety: immutable; partition() is const.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/vocab.h"

namespace cellm::tokenizer_internal {

// A byte range of plain text (token == kNoToken) or one special token.
struct Fragment {
  int32_t token = kNoToken;
  size_t offset = 0;
  size_t length = 0;
};

class SpecialTokenSplitter {
 public:
  // `vocab` must outlive the splitter.
  explicit SpecialTokenSplitter(const Vocab& vocab);

  // Splits `text` into plain-text fragments and special tokens. `plain` (sorted, not
  // overlapping byte ranges of text, token == kNoToken) is text whose control and unknown tokens
  // stay plain text even with parse_special — a chat message inside its template: there only
  // user-defined tokens are split out, and no token whose text overlaps it is.
  void partition(std::string_view text, bool parse_special, std::vector<Fragment>* out,
                 std::span<const Fragment> plain = {}) const;

 private:
  struct Candidate {
    int32_t id;
    bool always;  // user-defined: split out even without parse_special
    bool lstrip;
    bool rstrip;
  };
  // Marks in `present` (indexed like candidates_) the candidates that occur somewhere in text.
  void find_present(std::string_view text, bool parse_special, std::vector<bool>* present) const;

  const Vocab& vocab_;
  std::vector<Candidate> candidates_;  // in matching order
  // A byte trie of the candidates' texts, to learn in one pass which of them occur at all.
  std::unordered_map<uint64_t, int32_t> edges_;  // (node << 8 | byte) -> child node
  std::vector<int32_t> terminal_;                // node -> index into candidates_, or -1
  bool first_byte_[256] = {};
};

}  // namespace cellm::tokenizer_internal
