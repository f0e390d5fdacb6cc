#include "tokenizer/bpe.h"

#include <queue>

#include "fmt/format.h"
#include "tokenizer/utf8.h"

namespace cellm::tokenizer_internal {
namespace {

bool maps_to_itself(uint8_t byte) {
  return (byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) || byte >= 0xAE;
}

struct ByteMap {
  std::array<uint32_t, 256> to_unicode{};
  std::unordered_map<uint32_t, uint8_t> from_unicode;
  ByteMap() {
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const auto byte = static_cast<uint8_t>(b);
      to_unicode[byte] = maps_to_itself(byte) ? byte : next++;
      from_unicode[to_unicode[byte]] = byte;
    }
  }
};

const ByteMap& byte_map() {
  static const ByteMap kMap;
  return kMap;
}

struct Symbol {
  int32_t id = 0;
  int32_t prev = -1;
  int32_t next = -1;
  bool alive = true;
};

struct Candidate {
  int32_t rank = 0;
  int32_t left = 0;
  int32_t left_id = 0;
  int32_t right_id = 0;
  int32_t result = 0;
};

// Lowest rank first; on equal ranks the leftmost pair.
struct CandidateOrder {
  bool operator()(const Candidate& a, const Candidate& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

}  // namespace

uint32_t byte_to_unicode(uint8_t byte) { return byte_map().to_unicode[byte]; }

int byte_from_unicode(uint32_t code_point) {
  const auto& from = byte_map().from_unicode;
  const auto it = from.find(code_point);
  return it == from.end() ? -1 : it->second;
}

BpeEncoder::BpeEncoder(const Vocab& vocab, const TokenIndex& index) : vocab_(vocab), index_(index) {
  for (int b = 0; b < 256; ++b) {
    std::string& text = byte_text_[static_cast<size_t>(b)];
    append_utf8(byte_to_unicode(static_cast<uint8_t>(b)), &text);
    byte_ids_[static_cast<size_t>(b)] = index.find(text).value_or(kNoToken);
  }
  merges_.reserve(vocab.merges.size());
  std::string joined;
  for (size_t rank = 0; rank < vocab.merges.size(); ++rank) {
    const std::string& merge = vocab.merges[rank];
    const size_t space = merge.find(' ', 1);  // validate_vocab guarantees "left right"
    const std::string_view left(merge.data(), space);
    const std::string_view right(merge.data() + space + 1, merge.size() - space - 1);
    joined.assign(left);
    joined.append(right);
    const Merge value{static_cast<int32_t>(rank), *index.find(joined)};
    merges_.try_emplace(pair_key(*index.find(left), *index.find(right)), value);
  }
}

Status BpeEncoder::encode_word(std::string_view word, std::vector<int32_t>* out) const {
  if (word.empty()) return ok_status();
  if (vocab_.ignore_merges) {
    std::string mapped;
    for (char c : word) mapped.append(byte_text_[static_cast<uint8_t>(c)]);
    if (const std::optional<int32_t> id = index_.find(mapped)) {
      out->push_back(*id);
      return ok_status();
    }
  }

  std::vector<Symbol> symbols(word.size());
  for (size_t i = 0; i < word.size(); ++i) {
    const auto byte = static_cast<uint8_t>(word[i]);
    int32_t id = byte_ids_[byte];
    if (id == kNoToken) id = vocab_.special.unk;
    if (id == kNoToken) {
      return invalid_argument(fmt::format(
          "tokenizer: byte 0x{:02X} has no token and the vocabulary has no unknown token", byte));
    }
    symbols[i] = {id, static_cast<int32_t>(i) - 1,
                  i + 1 < word.size() ? static_cast<int32_t>(i + 1) : -1, true};
  }

  std::priority_queue<Candidate, std::vector<Candidate>, CandidateOrder> queue;
  const auto try_add = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const int32_t left_id = symbols[static_cast<size_t>(left)].id;
    const int32_t right_id = symbols[static_cast<size_t>(right)].id;
    const auto it = merges_.find(pair_key(left_id, right_id));
    if (it == merges_.end()) return;
    queue.push({it->second.rank, left, left_id, right_id, it->second.result});
  };
  for (size_t i = 1; i < symbols.size(); ++i) {
    try_add(static_cast<int32_t>(i - 1), static_cast<int32_t>(i));
  }

  while (!queue.empty()) {
    const Candidate candidate = queue.top();
    queue.pop();
    Symbol& left = symbols[static_cast<size_t>(candidate.left)];
    if (!left.alive || left.id != candidate.left_id || left.next < 0) continue;
    Symbol& right = symbols[static_cast<size_t>(left.next)];
    if (right.id != candidate.right_id) continue;  // stale: a side changed since it was queued
    left.id = candidate.result;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) symbols[static_cast<size_t>(right.next)].prev = candidate.left;
    try_add(left.prev, candidate.left);
    try_add(candidate.left, left.next);
  }

  for (int32_t i = 0; i >= 0; i = symbols[static_cast<size_t>(i)].next) {
    out->push_back(symbols[static_cast<size_t>(i)].id);
  }
  return ok_status();
}

std::string BpeEncoder::decode_token_text(std::string_view token_text) {
  std::string bytes;
  bytes.reserve(token_text.size());
  size_t i = 0;
  while (i < token_text.size()) {
    size_t length = 0;
    uint32_t cp = 0;
    if (scan_utf8(token_text.substr(i), &length, &cp) != Utf8Scan::kValid) {
      bytes.push_back(token_text[i]);
      ++i;
      continue;
    }
    const int byte = byte_from_unicode(cp);
    if (byte >= 0) {
      bytes.push_back(static_cast<char>(byte));
    } else {
      bytes.append(token_text.substr(i, length));
    }
    i += length;
  }
  return bytes;
}

}  // namespace cellm::tokenizer_internal
