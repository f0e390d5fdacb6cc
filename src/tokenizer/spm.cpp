#include "tokenizer/spm.h"

#include <queue>
#include <string>

#include "fmt/format.h"
#include "tokenizer/utf8.h"

namespace cellm::tokenizer_internal {
namespace {

struct Symbol {
  size_t offset = 0;  // into the escaped text
  size_t length = 0;  // 0 once merged into its left neighbour
  int32_t prev = -1;
  int32_t next = -1;
};

struct Bigram {
  float score = 0;
  int32_t left = 0;
  int32_t right = 0;
  size_t length = 0;  // bytes of left + right when queued: a stale entry no longer matches
};

// Highest score first; on equal scores the leftmost pair.
struct BigramOrder {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

}  // namespace

Status SpmEncoder::encode(std::string_view raw, std::vector<int32_t>* out) const {
  std::string text;
  text.reserve(raw.size() + raw.size() / 2);
  for (char c : raw) {
    if (c == ' ') {
      text.append(kSpaceMarker);
    } else {
      text.push_back(c);
    }
  }

  std::vector<Symbol> symbols;
  symbols.reserve(text.size());
  for (size_t offset = 0; offset < text.size();) {
    // One symbol per character; a byte that starts no valid character is a symbol of its own
    // (llama.cpp sizes every symbol by its lead byte, so a bad byte swallowed the space marker
    // after it and the text came back with '▁' in place of the space).
    size_t length = 1;
    uint32_t code_point = 0;
    if (scan_utf8(std::string_view(text).substr(offset), &length, &code_point) !=
        Utf8Scan::kValid) {
      length = 1;
    }
    const auto index = static_cast<int32_t>(symbols.size());
    symbols.push_back({offset, length, index - 1, -1});
    offset += length;
    if (offset < text.size()) symbols.back().next = index + 1;
  }

  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
  const auto try_add = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = symbols[static_cast<size_t>(left)];
    const Symbol& r = symbols[static_cast<size_t>(right)];
    const std::string_view pair(text.data() + l.offset, l.length + r.length);
    const std::optional<int32_t> id = index_.find(pair);
    if (!id) return;
    queue.push({vocab_.score(*id), left, right, pair.size()});
  };
  for (size_t i = 1; i < symbols.size(); ++i) {
    try_add(static_cast<int32_t>(i - 1), static_cast<int32_t>(i));
  }

  while (!queue.empty()) {
    const Bigram bigram = queue.top();
    queue.pop();
    Symbol& left = symbols[static_cast<size_t>(bigram.left)];
    Symbol& right = symbols[static_cast<size_t>(bigram.right)];
    if (left.length == 0 || right.length == 0 || left.length + right.length != bigram.length) {
      continue;  // one side changed since this pair was queued
    }
    left.length += right.length;
    right.length = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[static_cast<size_t>(right.next)].prev = bigram.left;
    try_add(left.prev, bigram.left);
    try_add(bigram.left, left.next);
  }

  for (int32_t i = symbols.empty() ? -1 : 0; i >= 0; i = symbols[static_cast<size_t>(i)].next) {
    const Symbol& symbol = symbols[static_cast<size_t>(i)];
    const std::string_view piece(text.data() + symbol.offset, symbol.length);
    if (const std::optional<int32_t> id = index_.find(piece)) {
      out->push_back(*id);
      continue;
    }
    // Only single characters reach here: every merge formed a token.
    for (char c : piece) {
      int32_t id = index_.byte_token(static_cast<uint8_t>(c));
      if (id == kNoToken) id = vocab_.special.unk;
      if (id == kNoToken) {
        return invalid_argument(fmt::format(
            "tokenizer: byte 0x{:02X} has no token and the vocabulary has no unknown token",
            static_cast<uint8_t>(c)));
      }
      out->push_back(id);
    }
  }
  return ok_status();
}

}  // namespace cellm::tokenizer_internal
