#include "tokenizer/special_tokens.h"

#include <algorithm>

namespace cellm::tokenizer_internal {
namespace {

bool is_ascii_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

bool contains(const std::vector<int32_t>& ids, int32_t id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

// True when [offset, offset + length) shares a byte with one of `ranges` (sorted, disjoint).
bool overlaps(std::span<const Fragment> ranges, size_t offset, size_t length) {
  const auto after = std::upper_bound(
      ranges.begin(), ranges.end(), offset,
      [](size_t at, const Fragment& range) { return at < range.offset + range.length; });
  return after != ranges.end() && after->offset < offset + length;
}

}  // namespace

SpecialTokenSplitter::SpecialTokenSplitter(const Vocab& vocab) : vocab_(vocab) {
  for (int32_t id = 0; id < vocab.num_tokens(); ++id) {
    const TokenType type = vocab.type(id);
    if (type != TokenType::kControl && type != TokenType::kUnknown &&
        type != TokenType::kUserDefined) {
      continue;
    }
    if (vocab.tokens[static_cast<size_t>(id)].empty()) continue;  // would match everywhere
    candidates_.push_back({id, type == TokenType::kUserDefined, contains(vocab.lstrip_ids, id),
                           contains(vocab.rstrip_ids, id)});
  }
  std::stable_sort(candidates_.begin(), candidates_.end(),
                   [&](const Candidate& a, const Candidate& b) {
                     return vocab.tokens[static_cast<size_t>(a.id)].size() >
                            vocab.tokens[static_cast<size_t>(b.id)].size();
                   });
  terminal_.push_back(-1);  // the root
  for (size_t i = 0; i < candidates_.size(); ++i) {
    const std::string& text = vocab.tokens[static_cast<size_t>(candidates_[i].id)];
    first_byte_[static_cast<uint8_t>(text[0])] = true;
    int32_t node = 0;
    for (char c : text) {
      const uint64_t key = (static_cast<uint64_t>(node) << 8) | static_cast<uint8_t>(c);
      auto [it, inserted] = edges_.try_emplace(key, static_cast<int32_t>(terminal_.size()));
      if (inserted) terminal_.push_back(-1);
      node = it->second;
    }
    if (terminal_[static_cast<size_t>(node)] < 0) {
      terminal_[static_cast<size_t>(node)] = static_cast<int32_t>(i);
    }
  }
}

void SpecialTokenSplitter::find_present(std::string_view text, bool parse_special,
                                        std::vector<bool>* present) const {
  present->assign(candidates_.size(), false);
  for (size_t start = 0; start < text.size(); ++start) {
    if (!first_byte_[static_cast<uint8_t>(text[start])]) continue;
    int32_t node = 0;
    for (size_t i = start; i < text.size(); ++i) {
      const uint64_t key = (static_cast<uint64_t>(node) << 8) | static_cast<uint8_t>(text[i]);
      const auto it = edges_.find(key);
      if (it == edges_.end()) break;
      node = it->second;
      const int32_t candidate = terminal_[static_cast<size_t>(node)];
      if (candidate >= 0 && (parse_special || candidates_[static_cast<size_t>(candidate)].always)) {
        (*present)[static_cast<size_t>(candidate)] = true;
      }
    }
  }
}

void SpecialTokenSplitter::partition(std::string_view text, bool parse_special,
                                     std::vector<Fragment>* out,
                                     std::span<const Fragment> plain) const {
  out->clear();
  if (text.empty()) return;
  out->push_back({kNoToken, 0, text.size()});
  std::vector<bool> present;
  find_present(text, parse_special, &present);
  std::vector<Fragment> next;
  for (size_t c = 0; c < candidates_.size(); ++c) {
    if (!present[c]) continue;
    const Candidate& candidate = candidates_[c];
    const std::string& token = vocab_.tokens[static_cast<size_t>(candidate.id)];
    next.clear();
    for (const Fragment& fragment : *out) {
      if (fragment.token != kNoToken) {
        next.push_back(fragment);
        continue;
      }
      size_t base = fragment.offset;
      size_t length = fragment.length;
      size_t from = base;  // where the search resumes: past matches inside `plain`
      while (length > 0) {
        const size_t match = text.substr(0, base + length).find(token, from);
        if (match == std::string_view::npos) {
          next.push_back({kNoToken, base, length});
          break;
        }
        if (!candidate.always && overlaps(plain, match, token.size())) {
          from = match + 1;
          continue;
        }
        size_t left_length = match - base;
        if (candidate.lstrip) {
          while (left_length > 0 && is_ascii_space(text[base + left_length - 1])) --left_length;
        }
        if (left_length > 0) next.push_back({kNoToken, base, left_length});
        next.push_back({candidate.id, match, token.size()});
        size_t right = match + token.size();
        const size_t end = base + length;
        if (candidate.rstrip) {
          while (right < end && is_ascii_space(text[right])) ++right;
        }
        base = right;
        length = end - right;
        from = base;
      }
    }
    out->swap(next);
  }
}

}  // namespace cellm::tokenizer_internal
