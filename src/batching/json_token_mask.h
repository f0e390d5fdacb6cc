// JsonTokenMask: which tokens of a vocabulary keep a constrained generation's text a prefix of a
// value its schema accepts (JsonSchemaPrefix), computed without checking every token: inside a
// string whose characters are free, the tokens that are whole plain characters pass unchecked
// (those of few enough characters where the string's length is bounded) and only the rest are
// checked; inside a string with a pattern, the plain tokens' code points step the pattern's
// automaton (string_pattern.h) from where the string stands, no bytes re-parsed; elsewhere the
// vocabulary's bytes are walked as a trie, each
// shared prefix stepped once and a refused byte cutting off every token under it.
//
// It knows token bytes (RunnerOptions::token_bytes: "" for a token that adds no text, never
// allowed) and the walker; nothing of models, samplers or the engine. Built once per Runner
// (engine.cpp); compute() is called on the sampling pool for each constrained row
// (engine_json.cpp).
//
// It masks a text held to a whole-text pattern too (compute_text: vLLM's guided_regex), with the
// same code-point trie.
//
// Thread-safety: immutable after construction; compute() may run on many threads at once.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "batching/json_schema_prefix.h"
#include "batching/text_pattern_prefix.h"

namespace cellm {

class JsonTokenMask {
 public:
  explicit JsonTokenMask(const std::vector<std::string>& token_bytes);

  // The plain tokens' masks inside strings with a pattern, kept by the pattern's state (and the
  // string's length where the bounds make it matter), so that a generation that comes back to a
  // state gets its mask by a copy. One per generation (its schema outlives it); not thread-safe.
  class PatternMaskCache {
   public:
    static constexpr size_t kMaxEntries = 8;  // about 0.1 MB each for a 100K vocabulary

   private:
    friend class JsonTokenMask;
    struct Entry {
      const StringPattern* pattern;
      int32_t state;
      uint32_t length_key;
      std::vector<uint8_t> allowed;  // [vocab] the plain tokens' part of the mask
    };
    std::vector<Entry> entries_;  // the most recently used last
  };

  // allowed[t] = 1 when token t's bytes are accepted by `json` (as json.accepts would say), else
  // 0; resized to the vocabulary. `cache` (may be null) serves and keeps pattern masks.
  void compute(const JsonSchemaPrefix& json, std::vector<uint8_t>& allowed,
               PatternMaskCache* cache = nullptr) const;
  // One token: whether `json` accepts its (non-empty) bytes.
  bool allows(const JsonSchemaPrefix& json, int32_t token) const;
  // The same two for a text held to a whole-text pattern (vLLM's guided_regex): tokens that add
  // no text are never allowed here (the engine allows stop tokens where the text may end).
  void compute_text(const TextPatternPrefix& text, std::vector<uint8_t>& allowed,
                    PatternMaskCache* cache = nullptr) const;
  bool allows_text(const TextPatternPrefix& text, int32_t token) const;

  size_t vocab_size() const { return token_bytes_.size(); }

 private:
  // A trie node: the tokens whose bytes end here and the edges to longer prefixes.
  struct TrieNode {
    uint32_t first_edge = 0;
    uint32_t num_edges = 0;
    uint32_t first_token = 0;
    uint32_t num_tokens = 0;
  };
  // Tokens by their symbols (bytes or code points): nodes[0] is the root (the empty prefix),
  // a node's edges are edge_symbols / edge_targets [first_edge, + num_edges), ascending.
  template <class Symbol>
  struct Trie {
    std::vector<TrieNode> nodes;
    std::vector<Symbol> edge_symbols;
    std::vector<uint32_t> edge_targets;
    std::vector<int32_t> node_tokens;  // by node
  };
  template <class Symbol, class SizeOf, class SymbolOf>
  static void build_trie(const std::vector<int32_t>& order, SizeOf size_of, SymbolOf symbol_of,
                         Trie<Symbol>& trie);
  using State = JsonSchemaPrefix::State;
  // The tokens under `node` of the byte trie whose bytes so far states[depth] holds; forks[d]
  // holds the other branches' states where byte d began a value of a choice.
  void visit(const JsonSchemaPrefix& json, uint32_t node, size_t depth, std::vector<State>& states,
             std::vector<JsonSchemaPrefix::Forks>& forks, std::vector<uint8_t>& allowed) const;
  void visit_in_pattern(const StringPattern& pattern, uint32_t node, int32_t state, uint32_t length,
                        std::vector<uint8_t>& allowed) const;
  // The plain tokens' part of the mask at a place in a pattern (the others 0), from `cache`
  // where it holds it.
  void plain_in_pattern(const JsonSchemaPrefix::PatternPlace& at, std::vector<uint8_t>& allowed,
                        PatternMaskCache* cache) const;

  std::vector<std::string> token_bytes_;
  std::vector<uint8_t> plain_string_pieces_;  // [vocab] JsonPrefix::plain_string_piece
  std::vector<uint32_t> code_points_;         // [vocab] the UTF-8 characters it begins
  std::vector<int32_t> not_plain_;            // the non-empty tokens that are not
  Trie<uint8_t> bytes_;                       // every non-empty token by its bytes
  Trie<uint32_t> plain_code_points_;          // the plain pieces by their code points
  size_t max_token_bytes_ = 0;
};

}  // namespace cellm
