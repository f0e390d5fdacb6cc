// StringPattern: a JSON Schema string's "pattern" (an ECMA-262 regular expression, which matches
// anywhere in the string unless anchored) together with its minLength / maxLength, compiled into
// a deterministic automaton over code points, so that a walker writing the string one code point
// at a time knows after each one whether the string can still end as one the schema accepts.
//
// The automaton reads the code points a JSON string can hold written as themselves or with a
// two-character escape: every Unicode scalar value but the control characters other than \b, \t,
// \n, \f and \r (those would need a \u escape, which JsonSchemaPrefix does not write inside a
// string with a pattern). Its states are sets of the pattern's NFA states; code points are read
// by class (the ranges no set in the pattern splits). `live(state, length)` is exact: some
// continuation of writable code points reaches an accepting state at a length within the
// bounds. Patterns whose automaton would be too large are refused, as are the parts of the
// syntax that are not sets of strings (string_pattern_syntax.h).
//
// It knows code points, not bytes, JSON or tokens. Built by JsonSchema's compiler; read by
// JsonSchemaPrefix and JsonTokenMask.
//
// Thread-safety: immutable after compile(); any number of threads may read one.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace cellm {

class StringPattern {
 public:
  static constexpr int32_t kDead = -1;
  static constexpr uint32_t kUnbounded = UINT32_MAX;
  static constexpr int32_t kMaxStates = 2000;

  // What the pattern is matched against.
  enum class Target : uint8_t {
    kJsonString,  // a JSON string's value, anywhere in it (JSON Schema's "pattern"), written as
                  // described above
    kWholeText,   // a whole text, from its start to its end (vLLM's guided_regex), any scalar
                  // value written as itself
  };
  // Compiles `pattern` for strings of min_length to max_length code points (kUnbounded: no
  // maximum). Errors say what is unsupported or too large, and where in the pattern.
  static StatusOr<std::shared_ptr<const StringPattern>> compile(
      std::string_view pattern, uint32_t min_length, uint32_t max_length,
      Target target = Target::kJsonString);
  // The strings both `a` and `b` (compiled for the same target) match, of min_length to
  // max_length code points (the lengths `a` and `b` were compiled with are not looked at). Errors
  // say the product is too large.
  static StatusOr<std::shared_ptr<const StringPattern>> intersect(const StringPattern& a,
                                                                  const StringPattern& b,
                                                                  uint32_t min_length,
                                                                  uint32_t max_length);
  // The code points a UTF-8 lead byte may begin, exactly (no overlong forms, no surrogates, none
  // past U+10FFFF), *bits its value bits and *bytes_left the continuation bytes to come; false
  // for a byte that begins no character of two bytes or more.
  static bool utf8_lead(unsigned char byte, uint32_t* lo, uint32_t* hi, uint32_t* bits,
                        uint8_t* bytes_left);

  int32_t start() const { return 0; }
  // The state after `code_point` from a state that is not kDead, or kDead when no string the
  // pattern matches goes on so (or the code point cannot be written).
  int32_t next(int32_t state, uint32_t code_point) const {
    return next_[static_cast<size_t>(state) * num_classes_ + class_of(code_point)];
  }
  // Whether a string at `state` after `length` code points can still be completed into one the
  // pattern matches, of a length within the bounds. False for kDead.
  bool live(int32_t state, uint32_t length) const {
    if (state < 0) return false;
    if (length < min_length_) {
      const size_t j = min_length_ - length;
      return j < num_below_ && bit(below_, j, state);
    }
    if (max_length_ != kUnbounded && length > max_length_) return false;
    const size_t room = max_length_ == kUnbounded ? num_within_ : max_length_ - length;
    return bit(within_, std::min(room, num_within_ - 1), state);
  }
  // Whether live() after `length` code points and more may depend on the length (below
  // min_length, or under a max_length); else it depends on the state alone.
  bool length_matters(uint32_t length) const {
    return length < min_length_ || max_length_ != kUnbounded;
  }
  // Whether the string may end here: the pattern matches and min_length <= length <= max_length.
  bool accepts(int32_t state, uint32_t length) const;
  // Whether some code point in [lo, hi] leads from `state` (after `length` code points) to a
  // live state.
  bool any_live(int32_t state, uint32_t length, uint32_t lo, uint32_t hi) const;
  // Whether the pattern accepts the whole of `utf8` (as a string's value: for kJsonString the
  // pattern may match anywhere in it); false for malformed UTF-8.
  bool matches(std::string_view utf8) const;
  // Whether any string at all is accepted.
  bool matches_something() const { return live(start(), 0); }
  int32_t num_states() const { return static_cast<int32_t>(accepting_.size()); }

 private:
  friend class StringPatternBuilder;
  size_t class_of(uint32_t code_point) const {
    const int32_t page = page_class_[code_point >> 8];
    if (page >= 0) return static_cast<size_t>(page);
    return page_tables_[(static_cast<size_t>(-page - 1) << 8) | (code_point & 0xFF)];
  }
  bool bit(const std::vector<uint64_t>& levels, size_t level, int32_t state) const {
    const size_t word = level * num_words_ + static_cast<size_t>(state) / 64;
    return ((levels[word] >> (static_cast<size_t>(state) % 64)) & 1) != 0;
  }

  std::vector<uint32_t> class_starts_;  // class k: [class_starts_[k], class_starts_[k + 1])
  // class_of's tables: per 256 code points, their one class (>= 0) or -1 - p for the 256
  // classes at page_tables_[256 p, 256 p + 256).
  std::vector<int32_t> page_class_;
  std::vector<uint16_t> page_tables_;
  size_t num_classes_ = 0;
  std::vector<int32_t> next_;  // [num_states, num_classes]: the next state, or kDead
  std::vector<uint8_t> accepting_;
  uint32_t min_length_ = 0;
  uint32_t max_length_ = kUnbounded;
  size_t num_words_ = 0;  // 64-bit words of one level's state bitset
  // within_ level r: the states from which an accepting state is at most r code points away
  // (num_within_ levels; the last holds for every r past it).
  std::vector<uint64_t> within_;
  size_t num_within_ = 0;
  // below_ level j (0 <= j <= min_length): the states from which exactly j code points reach a
  // state live at length min_length.
  std::vector<uint64_t> below_;
  size_t num_below_ = 0;
};

}  // namespace cellm
