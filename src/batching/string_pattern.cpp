#include "batching/string_pattern.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>

#include "batching/string_pattern_syntax.h"
#include "core/check.h"

namespace cellm {

using pattern::CodePointSet;
using pattern::SyntaxNode;

namespace {

constexpr size_t kMaxNfaStates = 100000;
constexpr size_t kMaxTableEntries = size_t{1} << 22;  // DFA states × classes
constexpr size_t kMaxLivenessBits = size_t{1} << 26;  // levels × states
constexpr size_t kMaxLivenessWork = size_t{1} << 28;  // levels × states × classes
constexpr size_t kMaxSubsetWork = size_t{1} << 27;    // NFA states visited building the DFA

// The code points a target may hold: scalar values, and in a JSON string of the control
// characters only those with a two-character escape.
CodePointSet writable_set(StringPattern::Target target) {
  if (target == StringPattern::Target::kWholeText) {
    return {{0, 0xD7FF}, {0xE000, pattern::kMaxCodePoint}};
  }
  return {{0x08, 0x0A}, {0x0C, 0x0D}, {0x20, 0xD7FF}, {0xE000, pattern::kMaxCodePoint}};
}

bool set_contains(const CodePointSet& set, uint32_t c) {
  auto it = std::upper_bound(set.begin(), set.end(), std::make_pair(c, UINT32_MAX));
  if (it == set.begin()) return false;
  --it;
  return c >= it->first && c <= it->second;
}

}  // namespace

// Builds a StringPattern: the NFA (Thompson's construction) from the syntax tree, the DFA by
// subset construction over code-point classes, then the liveness levels.
class StringPatternBuilder {
 public:
  StringPatternBuilder(uint32_t min_length, uint32_t max_length, StringPattern::Target target)
      : target_(target) {
    out_.min_length_ = min_length;
    out_.max_length_ = max_length;
  }

  Status build(const SyntaxNode& root) {
    collect_sets(root);
    const int32_t any = add_set({{0, pattern::kMaxCodePoint}});
    if (!make_classes()) return resource_exhausted("the pattern has too many character ranges");
    // In a JSON string, unanchored: any code points, the pattern, then any code points (the
    // final state loops); a whole text is the pattern alone.
    const bool anywhere = target_ == StringPattern::Target::kJsonString;
    const int32_t before = new_state();
    if (anywhere) {
      nfa_[static_cast<size_t>(before)].set_id = any;
      nfa_[static_cast<size_t>(before)].target = before;
    }
    const Fragment body = fragment(root);
    if (too_large_) return resource_exhausted("the pattern needs too many automaton states");
    final_ = new_state();
    if (anywhere) {
      nfa_[static_cast<size_t>(final_)].set_id = any;
      nfa_[static_cast<size_t>(final_)].target = final_;
    }
    nfa_[static_cast<size_t>(before)].eps.push_back(body.in);
    nfa_[static_cast<size_t>(body.out)].eps.push_back(final_);
    if (Status st = determinize(before); !st.ok()) return st;
    return liveness();
  }

  std::shared_ptr<const StringPattern> take() {
    return std::make_shared<const StringPattern>(std::move(out_));
  }

  // The strings both `a` and `b` match: their automata's product over the classes both split the
  // code points into, the pairs reached from the start pair.
  Status intersect(const StringPattern& a, const StringPattern& b) {
    std::vector<uint32_t> bounds = a.class_starts_;
    bounds.insert(bounds.end(), b.class_starts_.begin(), b.class_starts_.end());
    if (!set_class_tables(std::move(bounds))) {
      return resource_exhausted("the patterns have too many character ranges together");
    }
    const size_t num_classes = out_.num_classes_;
    std::map<std::pair<int32_t, int32_t>, int32_t> index = {{{a.start(), b.start()}, 0}};
    std::vector<std::pair<int32_t, int32_t>> states = {{a.start(), b.start()}};
    for (size_t d = 0; d < states.size(); ++d) {
      const auto [sa, sb] = states[d];
      out_.accepting_.push_back(a.accepting_[static_cast<size_t>(sa)] != 0 &&
                                        b.accepting_[static_cast<size_t>(sb)] != 0
                                    ? 1
                                    : 0);
      for (size_t k = 0; k < num_classes; ++k) {
        const uint32_t c = out_.class_starts_[k];  // a class lies within one class of each
        const int32_t na = a.next(sa, c);
        const int32_t nb = b.next(sb, c);
        int32_t target = StringPattern::kDead;
        if (na >= 0 && nb >= 0) {
          auto [it, added] = index.try_emplace({na, nb}, static_cast<int32_t>(states.size()));
          if (added) {
            if (states.size() >= static_cast<size_t>(StringPattern::kMaxStates) ||
                (states.size() + 1) * num_classes > kMaxTableEntries) {
              return resource_exhausted("the patterns together need more than " +
                                        std::to_string(StringPattern::kMaxStates) +
                                        " automaton states");
            }
            states.emplace_back(na, nb);
          }
          target = it->second;
        }
        out_.next_.push_back(target);
      }
    }
    return liveness();
  }

 private:
  struct NfaState {
    std::vector<int32_t> eps;
    int32_t set_id = -1;    // a code-point edge to `target` on the set's classes
    int32_t target = -1;    // the code-point edge's or the assertion's target
    uint8_t assertion = 0;  // kAtStart or kAtEnd: an edge to `target` taken only there
  };
  static constexpr uint8_t kAtStart = 1;
  static constexpr uint8_t kAtEnd = 2;
  struct Fragment {
    int32_t in;
    int32_t out;  // its eps edges are added by whoever follows
  };

  int32_t add_set(CodePointSet set) {
    sets_.push_back(std::move(set));
    return static_cast<int32_t>(sets_.size()) - 1;
  }

  // Every set of the tree gets an id, in the order fragment() meets them.
  void collect_sets(const SyntaxNode& node) {
    if (node.kind == SyntaxNode::Kind::kSet) set_ids_[&node] = add_set(node.set);
    for (const SyntaxNode& child : node.children) collect_sets(child);
  }

  // Classes: the ranges between every boundary of every set and of the writable set. False when
  // there are too many.
  bool make_classes() {
    std::vector<uint32_t> bounds = {0, pattern::kMaxCodePoint + 1};
    const CodePointSet writable = writable_set(target_);
    for (const CodePointSet* set : {&writable}) {
      for (const auto& [lo, hi] : *set) bounds.insert(bounds.end(), {lo, hi + 1});
    }
    for (const CodePointSet& set : sets_) {
      for (const auto& [lo, hi] : set) bounds.insert(bounds.end(), {lo, hi + 1});
    }
    if (!set_class_tables(std::move(bounds))) return false;
    const std::vector<uint32_t>& starts = out_.class_starts_;
    writable_class_.resize(out_.num_classes_);
    for (size_t k = 0; k < out_.num_classes_; ++k) {
      writable_class_[k] = set_contains(writable, starts[k]) ? 1 : 0;
    }
    set_classes_.assign(sets_.size(), {});
    for (size_t s = 0; s < sets_.size(); ++s) {
      std::vector<uint8_t>& has = set_classes_[s];
      has.resize(out_.num_classes_);
      for (size_t k = 0; k < out_.num_classes_; ++k) has[k] = set_contains(sets_[s], starts[k]);
    }
    return true;
  }

  // The classes between `bounds` (any order, duplicates fine; 0 and 0x110000 among them) and
  // class_of's page tables. False when there are too many.
  bool set_class_tables(std::vector<uint32_t> bounds) {
    std::sort(bounds.begin(), bounds.end());
    bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());
    out_.class_starts_ = bounds;  // the last entry, 0x110000, ends the last class
    out_.num_classes_ = bounds.size() - 1;
    if (out_.num_classes_ > UINT16_MAX) return false;
    const auto search = [&](uint32_t c) {
      return static_cast<size_t>(std::upper_bound(bounds.begin(), bounds.end(), c) -
                                 bounds.begin() - 1);
    };
    const uint32_t num_pages = (pattern::kMaxCodePoint + 1) >> 8;
    out_.page_class_.resize(num_pages);
    for (uint32_t page = 0; page < num_pages; ++page) {
      const size_t first = search(page << 8);
      if (first == search((page << 8) | 0xFF)) {
        out_.page_class_[page] = static_cast<int32_t>(first);
        continue;
      }
      out_.page_class_[page] = -1 - static_cast<int32_t>(out_.page_tables_.size() >> 8);
      for (uint32_t c = page << 8; c <= ((page << 8) | 0xFF); ++c) {
        out_.page_tables_.push_back(static_cast<uint16_t>(search(c)));
      }
    }
    return true;
  }

  int32_t new_state() {
    if (nfa_.size() >= kMaxNfaStates) {
      too_large_ = true;
      return 0;
    }
    nfa_.emplace_back();
    return static_cast<int32_t>(nfa_.size()) - 1;
  }
  void link(int32_t from, int32_t to) {
    if (!too_large_) nfa_[static_cast<size_t>(from)].eps.push_back(to);
  }

  Fragment fragment(const SyntaxNode& node) {
    if (too_large_) return {0, 0};
    switch (node.kind) {
      case SyntaxNode::Kind::kEmpty: {
        const int32_t s = new_state();
        return {s, s};
      }
      case SyntaxNode::Kind::kSet:
      case SyntaxNode::Kind::kStart:
      case SyntaxNode::Kind::kEnd: {
        const int32_t in = new_state();
        const int32_t out = new_state();
        if (too_large_) return {0, 0};
        NfaState& s = nfa_[static_cast<size_t>(in)];
        s.target = out;
        if (node.kind == SyntaxNode::Kind::kSet) {
          s.set_id = set_ids_.at(&node);
        } else {
          s.assertion = node.kind == SyntaxNode::Kind::kStart ? kAtStart : kAtEnd;
        }
        return {in, out};
      }
      case SyntaxNode::Kind::kConcat: {
        Fragment whole = fragment(node.children[0]);
        for (size_t i = 1; i < node.children.size(); ++i) {
          const Fragment next = fragment(node.children[i]);
          link(whole.out, next.in);
          whole.out = next.out;
        }
        return whole;
      }
      case SyntaxNode::Kind::kAlternation: {
        const int32_t in = new_state();
        const int32_t out = new_state();
        for (const SyntaxNode& child : node.children) {
          const Fragment branch = fragment(child);
          link(in, branch.in);
          link(branch.out, out);
        }
        return {in, out};
      }
      case SyntaxNode::Kind::kRepeat: {
        const SyntaxNode& child = node.children[0];
        const int32_t in = new_state();
        int32_t out = in;
        for (uint32_t i = 0; i < node.min_count && !too_large_; ++i) {
          const Fragment copy = fragment(child);
          link(out, copy.in);
          out = copy.out;
        }
        if (node.max_count == SyntaxNode::kUnbounded) {
          const Fragment loop = fragment(child);
          const int32_t end = new_state();
          link(out, loop.in);
          link(out, end);
          link(loop.out, loop.in);
          link(loop.out, end);
          return {in, end};
        }
        const int32_t end = new_state();
        for (uint32_t i = node.min_count; i < node.max_count && !too_large_; ++i) {
          const Fragment copy = fragment(child);  // optional: skip to the end, or take it
          link(out, end);
          link(out, copy.in);
          out = copy.out;
        }
        link(out, end);
        return {in, end};
      }
    }
    return {0, 0};
  }

  // The states reachable from `seeds` by empty edges (and assertion edges where allowed), sorted.
  std::vector<int32_t> closure(const std::vector<int32_t>& seeds, bool at_start, bool at_end) {
    ++generation_;
    if (mark_.size() < nfa_.size()) mark_.resize(nfa_.size(), 0);
    std::vector<int32_t> stack;
    std::vector<int32_t> out;
    for (const int32_t s : seeds) {
      if (mark_[static_cast<size_t>(s)] != generation_) {
        mark_[static_cast<size_t>(s)] = generation_;
        stack.push_back(s);
      }
    }
    while (!stack.empty()) {
      const int32_t s = stack.back();
      stack.pop_back();
      out.push_back(s);
      ++work_;
      const NfaState& n = nfa_[static_cast<size_t>(s)];
      const auto visit = [&](int32_t t) {
        if (mark_[static_cast<size_t>(t)] != generation_) {
          mark_[static_cast<size_t>(t)] = generation_;
          stack.push_back(t);
        }
      };
      for (const int32_t t : n.eps) visit(t);
      if ((n.assertion == kAtStart && at_start) || (n.assertion == kAtEnd && at_end)) {
        visit(n.target);
      }
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  Status determinize(int32_t first) {
    std::map<std::vector<int32_t>, int32_t> index;  // a later state's NFA set → its number
    std::vector<std::vector<int32_t>> states = {closure({first}, /*at_start=*/true, false)};
    // The start state is never shared: its `^` edges were taken, a later equal set's are not.
    const size_t num_classes = out_.num_classes_;
    for (size_t d = 0; d < states.size(); ++d) {
      const std::vector<int32_t> set = states[d];
      const bool is_start = d == 0;
      const std::vector<int32_t> ending = closure(set, is_start, /*at_end=*/true);
      out_.accepting_.push_back(std::binary_search(ending.begin(), ending.end(), final_) ? 1 : 0);
      for (size_t k = 0; k < num_classes; ++k) {
        int32_t target = StringPattern::kDead;
        if (writable_class_[k] != 0) {
          std::vector<int32_t> moved;
          work_ += set.size();
          if (work_ > kMaxSubsetWork) {
            return resource_exhausted("the pattern is too complex to enforce");
          }
          for (const int32_t s : set) {
            const NfaState& n = nfa_[static_cast<size_t>(s)];
            if (n.set_id >= 0 && set_classes_[static_cast<size_t>(n.set_id)][k] != 0) {
              moved.push_back(n.target);
            }
          }
          if (!moved.empty()) {
            std::vector<int32_t> next = closure(moved, false, false);
            auto [it, added] = index.try_emplace(next, static_cast<int32_t>(states.size()));
            if (added) {
              if (states.size() >= static_cast<size_t>(StringPattern::kMaxStates) ||
                  (states.size() + 1) * num_classes > kMaxTableEntries) {
                return resource_exhausted("the pattern needs more than " +
                                          std::to_string(StringPattern::kMaxStates) +
                                          " automaton states");
              }
              states.push_back(std::move(next));
            }
            target = it->second;
          }
        }
        out_.next_.push_back(target);
      }
    }
    return ok_status();
  }

  // within_ and below_ (string_pattern.h), by backward steps over the transition table.
  Status liveness() {
    const size_t num_states = out_.accepting_.size();
    const size_t words = (num_states + 63) / 64;
    const size_t num_classes = out_.num_classes_;
    out_.num_words_ = words;
    // One backward step: the states with a code point into `level`.
    const auto step_back = [&](const uint64_t* level, uint64_t* into) {
      for (size_t d = 0; d < num_states; ++d) {
        for (size_t k = 0; k < num_classes; ++k) {
          const int32_t t = out_.next_[d * num_classes + k];
          if (t >= 0 && ((level[static_cast<size_t>(t) / 64] >> (t % 64)) & 1) != 0) {
            into[d / 64] |= uint64_t{1} << (d % 64);
            break;
          }
        }
      }
    };
    std::vector<uint64_t>& within = out_.within_;
    within.assign(words, 0);
    for (size_t d = 0; d < num_states; ++d) {
      if (out_.accepting_[d] != 0) within[d / 64] |= uint64_t{1} << (d % 64);
    }
    size_t levels = 1;
    while (levels <= num_states) {
      if ((levels + 1) * num_states * num_classes > kMaxLivenessWork) {
        return resource_exhausted("the pattern is too complex to enforce");
      }
      within.resize((levels + 1) * words);
      uint64_t* next = within.data() + levels * words;
      const uint64_t* last = within.data() + (levels - 1) * words;
      std::copy(last, last + words, next);
      step_back(last, next);
      if (std::equal(next, next + words, last)) break;
      ++levels;
    }
    within.resize(levels * words);
    out_.num_within_ = levels;
    // A state that can never reach an accepting one is as good as none: next() says kDead.
    for (int32_t& t : out_.next_) {
      if (t >= 0 && !out_.bit(within, levels - 1, t)) t = StringPattern::kDead;
    }

    const size_t below_levels = static_cast<size_t>(out_.min_length_) + 1;
    if (below_levels * words * 64 > kMaxLivenessBits ||
        below_levels * num_states * num_classes > kMaxLivenessWork) {
      return resource_exhausted("\"minLength\" is too large beside \"pattern\"");
    }
    std::vector<uint64_t>& below = out_.below_;
    below.assign(below_levels * words, 0);
    out_.num_below_ = 0;  // live() at min_length reads no below_ level
    for (size_t d = 0; d < num_states; ++d) {
      if (out_.live(static_cast<int32_t>(d), out_.min_length_)) {
        below[d / 64] |= uint64_t{1} << (d % 64);
      }
    }
    for (size_t j = 1; j < below_levels; ++j) {
      step_back(below.data() + (j - 1) * words, below.data() + j * words);
    }
    out_.num_below_ = below_levels;
    return ok_status();
  }

  StringPattern::Target target_;
  StringPattern out_;
  std::vector<NfaState> nfa_;
  std::vector<CodePointSet> sets_;
  std::map<const SyntaxNode*, int32_t> set_ids_;
  std::vector<std::vector<uint8_t>> set_classes_;  // [set][class]: the class lies in the set
  std::vector<uint8_t> writable_class_;
  int32_t final_ = -1;
  bool too_large_ = false;
  size_t work_ = 0;  // NFA states visited so far (kMaxSubsetWork)
  std::vector<uint32_t> mark_;
  uint32_t generation_ = 0;
};

StatusOr<std::shared_ptr<const StringPattern>> StringPattern::intersect(const StringPattern& a,
                                                                        const StringPattern& b,
                                                                        uint32_t min_length,
                                                                        uint32_t max_length) {
  StringPatternBuilder builder(min_length, max_length, Target::kJsonString);
  if (Status st = builder.intersect(a, b); !st.ok()) return st;
  return builder.take();
}

bool StringPattern::accepts(int32_t state, uint32_t length) const {
  return state >= 0 && accepting_[static_cast<size_t>(state)] != 0 && length >= min_length_ &&
         (max_length_ == kUnbounded || length <= max_length_);
}

bool StringPattern::matches(std::string_view utf8) const {
  int32_t state = start();
  uint32_t length = 0;
  for (size_t i = 0; i < utf8.size() && state >= 0; ++length) {
    const auto byte = static_cast<unsigned char>(utf8[i++]);
    uint32_t code_point = byte;
    if (byte >= 0x80) {
      uint32_t lo = 0, hi = 0;
      uint8_t bytes_left = 0;
      if (!utf8_lead(byte, &lo, &hi, &code_point, &bytes_left)) return false;
      for (; bytes_left > 0; --bytes_left) {
        if (i == utf8.size() || (static_cast<unsigned char>(utf8[i]) & 0xC0) != 0x80) return false;
        code_point = (code_point << 6) | (static_cast<unsigned char>(utf8[i++]) & 0x3F);
      }
      if (code_point < lo || code_point > hi) return false;
    }
    state = next(state, code_point);
  }
  return accepts(state, length);
}

bool StringPattern::any_live(int32_t state, uint32_t length, uint32_t lo, uint32_t hi) const {
  if (state < 0 || lo > hi) return false;
  for (size_t k = class_of(lo); k < num_classes_ && class_starts_[k] <= hi; ++k) {
    if (live(next_[static_cast<size_t>(state) * num_classes_ + k], length + 1)) return true;
  }
  return false;
}

bool StringPattern::utf8_lead(unsigned char byte, uint32_t* lo, uint32_t* hi, uint32_t* bits,
                              uint8_t* bytes_left) {
  if (byte < 0xC2 || byte > 0xF4) return false;
  if (byte <= 0xDF) {
    *bytes_left = 1;
    *bits = byte & 0x1Fu;
    *lo = *bits << 6;
    *hi = *lo | 0x3F;
  } else if (byte <= 0xEF) {
    *bytes_left = 2;
    *bits = byte & 0x0Fu;
    *lo = byte == 0xE0 ? 0x800 : *bits << 12;
    *hi = byte == 0xED ? 0xD7FF : (*bits << 12) | 0xFFF;
  } else {
    *bytes_left = 3;
    *bits = byte & 0x07u;
    *lo = byte == 0xF0 ? 0x10000 : *bits << 18;
    *hi = byte == 0xF4 ? 0x10FFFF : (*bits << 18) | 0x3FFFF;
  }
  return true;
}

StatusOr<std::shared_ptr<const StringPattern>> StringPattern::compile(std::string_view pattern,
                                                                      uint32_t min_length,
                                                                      uint32_t max_length,
                                                                      Target target) {
  StatusOr<SyntaxNode> syntax = pattern::parse_pattern(pattern);
  if (!syntax.ok()) return syntax.status();
  StringPatternBuilder builder(min_length, max_length, target);
  if (Status st = builder.build(*syntax); !st.ok()) return st;
  return builder.take();
}

}  // namespace cellm
