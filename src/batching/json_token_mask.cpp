#include "batching/json_token_mask.h"

#include <algorithm>
#include <numeric>

namespace cellm {

JsonTokenMask::JsonTokenMask(const std::vector<std::string>& token_bytes)
    : token_bytes_(token_bytes),
      plain_string_pieces_(token_bytes.size(), 0),
      code_points_(token_bytes.size(), 0) {
  std::vector<int32_t> order;
  for (size_t t = 0; t < token_bytes_.size(); ++t) {
    const std::string& piece = token_bytes_[t];
    if (piece.empty()) continue;
    plain_string_pieces_[t] = JsonPrefix::plain_string_piece(piece) ? 1 : 0;
    for (const char c : piece) code_points_[t] += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    if (plain_string_pieces_[t] == 0) not_plain_.push_back(static_cast<int32_t>(t));
    order.push_back(static_cast<int32_t>(t));
    max_token_bytes_ = std::max(max_token_bytes_, piece.size());
  }
  // The trie, breadth first over the tokens sorted by their bytes: a node is a run of sorted
  // tokens sharing a prefix, its edges the runs sharing one more byte.
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return token_bytes_[static_cast<size_t>(a)] < token_bytes_[static_cast<size_t>(b)];
  });
  struct Run {
    uint32_t node;
    size_t begin;  // [begin, end) of `order`, sharing their first `depth` bytes
    size_t end;
    size_t depth;
  };
  nodes_.emplace_back();
  std::vector<Run> runs = {{0, 0, order.size(), 0}};
  for (size_t r = 0; r < runs.size(); ++r) {
    const Run run = runs[r];
    const auto bytes_of = [&](size_t i) -> const std::string& {
      return token_bytes_[static_cast<size_t>(order[i])];
    };
    size_t i = run.begin;
    nodes_[run.node].first_token = static_cast<uint32_t>(node_tokens_.size());
    for (; i < run.end && bytes_of(i).size() == run.depth; ++i) node_tokens_.push_back(order[i]);
    nodes_[run.node].num_tokens =
        static_cast<uint32_t>(node_tokens_.size()) - nodes_[run.node].first_token;
    nodes_[run.node].first_edge = static_cast<uint32_t>(edge_bytes_.size());
    while (i < run.end) {
      const char byte = bytes_of(i)[run.depth];
      size_t j = i;
      while (j < run.end && bytes_of(j)[run.depth] == byte) ++j;
      const auto child = static_cast<uint32_t>(nodes_.size());
      nodes_.emplace_back();
      edge_bytes_.push_back(static_cast<uint8_t>(byte));
      edge_targets_.push_back(child);
      runs.push_back({child, i, j, run.depth + 1});
      i = j;
    }
    nodes_[run.node].num_edges =
        static_cast<uint32_t>(edge_bytes_.size()) - nodes_[run.node].first_edge;
  }
}

bool JsonTokenMask::allows(const JsonSchemaPrefix& json, int32_t token) const {
  const std::string& piece = token_bytes_[static_cast<size_t>(token)];
  return !piece.empty() && json.accepts(piece);
}

void JsonTokenMask::compute(const JsonSchemaPrefix& json, std::vector<uint8_t>& allowed) const {
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
  if (states.size() < max_token_bytes_ + 1) states.resize(max_token_bytes_ + 1);
  JsonSchemaPrefix::copy_state(json.state_, &states[0]);
  visit(json, 0, 0, states, allowed);
}

// The tokens under `node`, whose bytes so far states[depth] holds (accepted): each edge's byte is
// stepped on a copy; a refused one rules out its whole subtree.
void JsonTokenMask::visit(const JsonSchemaPrefix& json, uint32_t node, size_t depth,
                          std::vector<State>& states, std::vector<uint8_t>& allowed) const {
  const TrieNode& n = nodes_[node];
  for (uint32_t e = n.first_edge; e < n.first_edge + n.num_edges; ++e) {
    State& next = states[depth + 1];
    JsonSchemaPrefix::copy_state(states[depth], &next);
    if (!json.step(next, edge_bytes_[e])) continue;
    const TrieNode& child = nodes_[edge_targets_[e]];
    for (uint32_t k = child.first_token; k < child.first_token + child.num_tokens; ++k) {
      allowed[static_cast<size_t>(node_tokens_[k])] = 1;
    }
    if (child.num_edges > 0) visit(json, edge_targets_[e], depth + 1, states, allowed);
  }
}

}  // namespace cellm
