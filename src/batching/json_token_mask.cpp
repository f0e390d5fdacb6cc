#include "batching/json_token_mask.h"

#include <algorithm>
#include <numeric>
#include <span>

namespace cellm {
namespace {

// Appends the code points of valid UTF-8 `text`.
void append_code_points(const std::string& text, std::vector<uint32_t>& out) {
  for (size_t i = 0; i < text.size();) {
    const auto b = static_cast<unsigned char>(text[i]);
    const size_t extra = b < 0x80 ? 0 : b < 0xE0 ? 1 : b < 0xF0 ? 2 : 3;
    uint32_t v = extra == 0 ? b : b & (0x3Fu >> extra);
    for (size_t k = 1; k <= extra; ++k)
      v = (v << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3Fu);
    out.push_back(v);
    i += extra + 1;
  }
}

}  // namespace

// Fills `trie` from `order` (token ids sorted by their symbols): a node is a run of sorted tokens
// sharing a prefix, its edges the runs sharing one more symbol. Nodes are numbered in the order
// a depth-first walk meets them, so that such a walk reads the nodes forward. size_of(t) is
// token t's number of symbols, symbol_of(t, i) its i-th.
template <class Symbol, class SizeOf, class SymbolOf>
void JsonTokenMask::build_trie(const std::vector<int32_t>& order, SizeOf size_of,
                               SymbolOf symbol_of, Trie<Symbol>& trie) {
  struct Run {
    size_t edge;   // the edge into it (its target set when the node is made); none for the root
    size_t begin;  // [begin, end) of `order`, sharing their first `depth` symbols
    size_t end;
    size_t depth;
  };
  constexpr size_t kNoEdge = SIZE_MAX;
  std::vector<Run> stack = {{kNoEdge, 0, order.size(), 0}};
  std::vector<Run> children;
  while (!stack.empty()) {
    const Run run = stack.back();
    stack.pop_back();
    const auto index = static_cast<uint32_t>(trie.nodes.size());
    if (run.edge != kNoEdge) trie.edge_targets[run.edge] = index;
    TrieNode node;
    size_t i = run.begin;
    node.first_token = static_cast<uint32_t>(trie.node_tokens.size());
    for (; i < run.end && size_of(order[i]) == run.depth; ++i) trie.node_tokens.push_back(order[i]);
    node.num_tokens = static_cast<uint32_t>(trie.node_tokens.size()) - node.first_token;
    node.first_edge = static_cast<uint32_t>(trie.edge_symbols.size());
    children.clear();
    while (i < run.end) {
      const Symbol symbol = symbol_of(order[i], run.depth);
      size_t j = i;
      while (j < run.end && symbol_of(order[j], run.depth) == symbol) ++j;
      children.push_back({trie.edge_symbols.size(), i, j, run.depth + 1});
      trie.edge_symbols.push_back(symbol);
      trie.edge_targets.push_back(0);
      i = j;
    }
    node.num_edges = static_cast<uint32_t>(children.size());
    trie.nodes.push_back(node);
    stack.insert(stack.end(), children.rbegin(), children.rend());  // the first child next
  }
}

JsonTokenMask::JsonTokenMask(const std::vector<std::string>& token_bytes)
    : token_bytes_(token_bytes),
      plain_string_pieces_(token_bytes.size(), 0),
      code_points_(token_bytes.size(), 0) {
  std::vector<int32_t> order;
  std::vector<int32_t> plain;
  std::vector<uint32_t> piece_code_points;  // a plain token's: [piece_starts[t], [t + 1])
  std::vector<uint32_t> piece_starts;
  for (size_t t = 0; t < token_bytes_.size(); ++t) {
    piece_starts.push_back(static_cast<uint32_t>(piece_code_points.size()));
    const std::string& piece = token_bytes_[t];
    if (piece.empty()) continue;
    plain_string_pieces_[t] = JsonPrefix::plain_string_piece(piece) ? 1 : 0;
    for (const char c : piece) code_points_[t] += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    if (plain_string_pieces_[t] == 0) {
      not_plain_.push_back(static_cast<int32_t>(t));
    } else {
      append_code_points(piece, piece_code_points);
      plain.push_back(static_cast<int32_t>(t));
    }
    order.push_back(static_cast<int32_t>(t));
    max_token_bytes_ = std::max(max_token_bytes_, piece.size());
  }
  piece_starts.push_back(static_cast<uint32_t>(piece_code_points.size()));
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return token_bytes_[static_cast<size_t>(a)] < token_bytes_[static_cast<size_t>(b)];
  });
  build_trie<uint8_t>(
      order, [&](int32_t t) { return token_bytes_[static_cast<size_t>(t)].size(); },
      [&](int32_t t, size_t i) {
        return static_cast<uint8_t>(token_bytes_[static_cast<size_t>(t)][i]);
      },
      bytes_);
  const auto code_points_of = [&](int32_t t) {
    const uint32_t* first = piece_code_points.data() + piece_starts[static_cast<size_t>(t)];
    return std::span<const uint32_t>(
        first, piece_starts[static_cast<size_t>(t) + 1] - piece_starts[static_cast<size_t>(t)]);
  };
  std::sort(plain.begin(), plain.end(), [&](int32_t a, int32_t b) {
    const std::span<const uint32_t> x = code_points_of(a);
    const std::span<const uint32_t> y = code_points_of(b);
    return std::lexicographical_compare(x.begin(), x.end(), y.begin(), y.end());
  });
  build_trie<uint32_t>(
      plain, [&](int32_t t) { return code_points_of(t).size(); },
      [&](int32_t t, size_t i) { return code_points_of(t)[i]; }, plain_code_points_);
}

bool JsonTokenMask::allows_text(const TextPatternPrefix& text, int32_t token) const {
  const std::string& piece = token_bytes_[static_cast<size_t>(token)];
  return !piece.empty() && text.accepts(piece);
}

// Plain pieces through the code-point trie; the others (quotes, backslashes and control
// characters are text here, and pieces of characters) one by one.
void JsonTokenMask::compute_text(const TextPatternPrefix& text, std::vector<uint8_t>& allowed,
                                 PatternMaskCache* cache) const {
  if (const std::optional<JsonSchemaPrefix::PatternPlace> at = text.pattern_place()) {
    plain_in_pattern(*at, allowed, cache);
    for (const int32_t t : not_plain_) {
      allowed[static_cast<size_t>(t)] = allows_text(text, t) ? 1 : 0;
    }
    return;
  }
  allowed.resize(token_bytes_.size());  // inside a character: every token checked
  for (size_t t = 0; t < allowed.size(); ++t) {
    allowed[t] = allows_text(text, static_cast<int32_t>(t)) ? 1 : 0;
  }
}

bool JsonTokenMask::allows(const JsonSchemaPrefix& json, int32_t token) const {
  const std::string& piece = token_bytes_[static_cast<size_t>(token)];
  return !piece.empty() && json.accepts(piece);
}

void JsonTokenMask::compute(const JsonSchemaPrefix& json, std::vector<uint8_t>& allowed,
                            PatternMaskCache* cache) const {
  if (const std::optional<JsonSchemaPrefix::PatternPlace> at = json.pattern_place()) {
    plain_in_pattern(*at, allowed, cache);
    for (const int32_t t : not_plain_) allowed[static_cast<size_t>(t)] = allows(json, t) ? 1 : 0;
    return;
  }
  if (const std::optional<uint32_t> room = json.string_room()) {
    if (*room == JsonSchema::kUnbounded) {
      allowed.assign(plain_string_pieces_.begin(), plain_string_pieces_.end());
    } else {
      allowed.resize(token_bytes_.size());
      for (size_t t = 0; t < allowed.size(); ++t) {
        allowed[t] = plain_string_pieces_[t] != 0 && code_points_[t] <= *room ? 1 : 0;
      }
    }
    for (const int32_t t : not_plain_) allowed[static_cast<size_t>(t)] = allows(json, t) ? 1 : 0;
    return;
  }
  allowed.assign(token_bytes_.size(), 0);
  thread_local std::vector<State> states;
  thread_local std::vector<JsonSchemaPrefix::Forks> forks;
  if (states.size() < max_token_bytes_ + 1) states.resize(max_token_bytes_ + 1);
  if (forks.size() < max_token_bytes_ + 1) forks.resize(max_token_bytes_ + 1);
  for (const State& alternative : json.states_) {  // a token is allowed where one takes it
    JsonSchemaPrefix::copy_state(alternative, &states[0]);
    visit(json, 0, 0, states, forks, allowed);
  }
}

// A plain piece is whole characters, none of them '"' or '\\': the walker steps the automaton
// once per code point and takes the piece exactly when the string is live after the last. The
// plain pieces' trie is walked so: a prefix that is not live rules out every token under it (a
// live state's predecessors on its path are live too).
// With a cache, the plain tokens' part is kept by (pattern, state, length key): the length
// matters to live() only below minLength or under a maxLength (pattern.length_matters).
void JsonTokenMask::plain_in_pattern(const JsonSchemaPrefix::PatternPlace& at,
                                     std::vector<uint8_t>& allowed, PatternMaskCache* cache) const {
  const uint32_t length_key = at.pattern->length_matters(at.length) ? at.length : UINT32_MAX;
  const auto same = [&](const PatternMaskCache::Entry& e) {
    return e.pattern == at.pattern && e.state == at.state && e.length_key == length_key;
  };
  std::vector<PatternMaskCache::Entry>* entries = cache != nullptr ? &cache->entries_ : nullptr;
  const auto hit = entries != nullptr ? std::find_if(entries->begin(), entries->end(), same)
                                      : std::vector<PatternMaskCache::Entry>::iterator();
  if (entries != nullptr && hit != entries->end()) {
    std::rotate(hit, hit + 1, entries->end());  // now the most recently used
    allowed = entries->back().allowed;
  } else {
    allowed.assign(token_bytes_.size(), 0);
    visit_in_pattern(*at.pattern, 0, at.state, at.length, allowed);
    if (entries != nullptr) {
      if (entries->size() >= PatternMaskCache::kMaxEntries) entries->erase(entries->begin());
      entries->push_back({at.pattern, at.state, length_key, allowed});
    }
  }
}

// The plain tokens under `node` of the code-point trie, whose prefix so far leaves the pattern at
// `state` after `length` code points (live).
void JsonTokenMask::visit_in_pattern(const StringPattern& pattern, uint32_t node, int32_t state,
                                     uint32_t length, std::vector<uint8_t>& allowed) const {
  const Trie<uint32_t>& trie = plain_code_points_;
  const TrieNode& n = trie.nodes[node];
  for (uint32_t e = n.first_edge; e < n.first_edge + n.num_edges; ++e) {
    const int32_t next = pattern.next(state, trie.edge_symbols[e]);
    if (!pattern.live(next, length + 1)) continue;
    const TrieNode& child = trie.nodes[trie.edge_targets[e]];
    for (uint32_t k = child.first_token; k < child.first_token + child.num_tokens; ++k) {
      allowed[static_cast<size_t>(trie.node_tokens[k])] = 1;
    }
    if (child.num_edges > 0)
      visit_in_pattern(pattern, trie.edge_targets[e], next, length + 1, allowed);
  }
}

// The tokens under `node`, whose bytes so far states[depth] holds (accepted): each edge's byte is
// stepped on a copy; a refused one rules out its whole subtree. Where the byte begins a value of
// a choice, the subtree is walked again from each other branch's state.
void JsonTokenMask::visit(const JsonSchemaPrefix& json, uint32_t node, size_t depth,
                          std::vector<State>& states, std::vector<JsonSchemaPrefix::Forks>& forks,
                          std::vector<uint8_t>& allowed) const {
  const TrieNode& n = bytes_.nodes[node];
  for (uint32_t e = n.first_edge; e < n.first_edge + n.num_edges; ++e) {
    State& next = states[depth + 1];
    JsonSchemaPrefix::Forks& others = forks[depth + 1];
    JsonSchemaPrefix::copy_state(states[depth], &next);
    others.clear();
    if (!json.step(next, bytes_.edge_symbols[e], &others)) continue;
    const uint32_t target = bytes_.edge_targets[e];
    const TrieNode& child = bytes_.nodes[target];
    for (uint32_t k = child.first_token; k < child.first_token + child.num_tokens; ++k) {
      allowed[static_cast<size_t>(bytes_.node_tokens[k])] = 1;
    }
    if (child.num_edges == 0) continue;
    visit(json, target, depth + 1, states, forks, allowed);
    for (size_t f = 0; f < others.size(); ++f) {  // deeper visits use forks[depth + 2] on
      JsonSchemaPrefix::copy_state(others[f], &states[depth + 1]);
      visit(json, target, depth + 1, states, forks, allowed);
    }
  }
}

}  // namespace cellm
