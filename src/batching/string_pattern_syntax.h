// The syntax tree of a JSON Schema "pattern" (an ECMA-262 regular expression) and its parser: a
// part of StringPattern (string_pattern.h), apart to keep each file to one job. The parser takes
// the subset whose meaning is a set of strings — characters, escapes, classes, `.`, groups,
// alternation, greedy or lazy quantifiers, `^` and `$` — and refuses by name what is not
// (backreferences, lookaround, word boundaries, Unicode property escapes), and escapes whose
// meaning differs between regex dialects (`\A`, `\Z`, other letters). Characters are code points
// (the `u` flag's reading); sets of them are sorted, disjoint, inclusive ranges.
//
// Who calls it: string_pattern.cpp, and its test. Thread-safety: functions over their arguments.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace cellm::pattern {

inline constexpr uint32_t kMaxCodePoint = 0x10FFFF;

// Sorted, disjoint, non-adjacent inclusive ranges of code points.
using CodePointSet = std::vector<std::pair<uint32_t, uint32_t>>;

// Sorts and merges `ranges` into a CodePointSet.
CodePointSet normalized(CodePointSet ranges);
// Every code point not in `set`.
CodePointSet complement(const CodePointSet& set);

struct SyntaxNode {
  enum class Kind : uint8_t {
    kEmpty,        // matches the empty string
    kSet,          // one code point of `set`
    kConcat,       // children in order
    kAlternation,  // one of the children
    kRepeat,       // children[0], min_count to max_count times (kUnbounded: no limit)
    kStart,        // ^: only at the string's start
    kEnd,          // $: only at the string's end
  };
  static constexpr uint32_t kUnbounded = UINT32_MAX;
  Kind kind = Kind::kEmpty;
  CodePointSet set;
  std::vector<SyntaxNode> children;
  uint32_t min_count = 0;
  uint32_t max_count = 0;
};

// Parses `pattern` (UTF-8). Errors say what is wrong or unsupported and where ("at offset 3").
StatusOr<SyntaxNode> parse_pattern(std::string_view pattern);

}  // namespace cellm::pattern
