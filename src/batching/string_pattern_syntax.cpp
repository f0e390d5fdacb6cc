#include "batching/string_pattern_syntax.h"

#include <algorithm>
#include <optional>
#include <string>

namespace cellm::pattern {
namespace {

constexpr uint32_t kMaxRepeat = 1000;  // larger counts are refused (the automaton would be huge)
constexpr int kMaxGroupDepth = 64;     // deeper nesting is refused, not recursed without end

CodePointSet single(uint32_t c) { return {{c, c}}; }

// ECMA-262's classes: \d, \w, \s (WhiteSpace and LineTerminator), and what `.` leaves out.
CodePointSet digit_set() { return {{'0', '9'}}; }
CodePointSet word_set() { return normalized({{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}); }
CodePointSet space_set() {
  return normalized({{0x09, 0x0D},
                     {0x20, 0x20},
                     {0xA0, 0xA0},
                     {0x1680, 0x1680},
                     {0x2000, 0x200A},
                     {0x2028, 0x2029},
                     {0x202F, 0x202F},
                     {0x205F, 0x205F},
                     {0x3000, 0x3000},
                     {0xFEFF, 0xFEFF}});
}
CodePointSet line_terminators() {
  return normalized({{0x0A, 0x0A}, {0x0D, 0x0D}, {0x2028, 0x2029}});
}

int hex_value(uint32_t c) {
  if (c >= '0' && c <= '9') return static_cast<int>(c - '0');
  if (c >= 'a' && c <= 'f') return static_cast<int>(c - 'a' + 10);
  if (c >= 'A' && c <= 'F') return static_cast<int>(c - 'A' + 10);
  return -1;
}

bool is_ascii_alnum(uint32_t c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

class Parser {
 public:
  explicit Parser(std::vector<uint32_t> text) : text_(std::move(text)) {}

  StatusOr<SyntaxNode> parse() {
    StatusOr<SyntaxNode> node = disjunction(0);
    if (!node.ok()) return node;
    if (pos_ < text_.size()) return fail("an unmatched ')'");
    return node;
  }

 private:
  Status fail(const std::string& what) const { return fail_at(pos_, what); }
  Status fail_at(size_t offset, const std::string& what) const {
    return invalid_argument(what + " at offset " + std::to_string(offset));
  }
  bool at_end() const { return pos_ >= text_.size(); }
  uint32_t peek(size_t ahead = 0) const {
    return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : UINT32_MAX;
  }

  StatusOr<SyntaxNode> disjunction(int depth) {
    if (depth > kMaxGroupDepth) return fail("groups nested deeper than 64");
    SyntaxNode alternation;
    alternation.kind = SyntaxNode::Kind::kAlternation;
    while (true) {
      StatusOr<SyntaxNode> branch = alternative(depth);
      if (!branch.ok()) return branch;
      alternation.children.push_back(std::move(*branch));
      if (peek() != '|') break;
      ++pos_;
    }
    if (alternation.children.size() == 1) return std::move(alternation.children[0]);
    return alternation;
  }

  StatusOr<SyntaxNode> alternative(int depth) {
    SyntaxNode concat;
    concat.kind = SyntaxNode::Kind::kConcat;
    while (!at_end() && peek() != '|' && peek() != ')') {
      StatusOr<SyntaxNode> term = this->term(depth);
      if (!term.ok()) return term;
      concat.children.push_back(std::move(*term));
    }
    if (concat.children.empty()) return SyntaxNode{};
    if (concat.children.size() == 1) return std::move(concat.children[0]);
    return concat;
  }

  // A {n}, {n,} or {n,m} at pos_: its counts and length, or nullopt when the text there is not
  // one (then '{' is a plain character, as ECMA-262's Annex B reads it).
  struct Braces {
    uint64_t min_count;
    uint64_t max_count;  // UINT64_MAX: unbounded
    size_t length;
  };
  std::optional<Braces> braces() const {
    if (peek() != '{') return std::nullopt;
    size_t i = pos_ + 1;
    const auto number = [&](uint64_t* value) {
      const size_t first = i;
      *value = 0;
      while (i < text_.size() && text_[i] >= '0' && text_[i] <= '9') {
        *value = std::min<uint64_t>(*value * 10 + (text_[i] - '0'), uint64_t{1} << 40);
        ++i;
      }
      return i > first;
    };
    Braces b{};
    if (!number(&b.min_count)) return std::nullopt;
    b.max_count = b.min_count;
    if (i < text_.size() && text_[i] == ',') {
      ++i;
      if (!number(&b.max_count)) b.max_count = UINT64_MAX;
    }
    if (i >= text_.size() || text_[i] != '}') return std::nullopt;
    b.length = i + 1 - pos_;
    return b;
  }

  StatusOr<SyntaxNode> term(int depth) {
    const uint32_t c = peek();
    SyntaxNode atom;
    if (c == '^' || c == '$') {
      ++pos_;
      atom.kind = c == '^' ? SyntaxNode::Kind::kStart : SyntaxNode::Kind::kEnd;
      if (peek() == '*' || peek() == '+' || peek() == '?' || braces()) {
        return fail("a quantifier after an assertion");
      }
      return atom;
    }
    if (c == '*' || c == '+' || c == '?' || braces()) return fail("nothing to repeat");
    if (c == '(') {
      const size_t at = pos_;
      ++pos_;
      if (peek() == '?') {
        if (peek(1) == ':') {
          pos_ += 2;
        } else if (peek(1) == '<' && peek(2) != '=' && peek(2) != '!') {
          pos_ += 2;
          while (!at_end() && peek() != '>') ++pos_;
          if (at_end()) return fail("an unterminated group name");
          ++pos_;
        } else if (peek(1) == '=' || peek(1) == '!' || peek(1) == '<') {
          return fail_at(at, "lookaround assertions are not supported");
        } else {
          return fail_at(at, "an invalid group");
        }
      }
      StatusOr<SyntaxNode> inner = disjunction(depth + 1);
      if (!inner.ok()) return inner;
      if (peek() != ')') return fail("an unterminated group");
      ++pos_;
      atom = std::move(*inner);
    } else if (c == '[') {
      ++pos_;
      StatusOr<CodePointSet> set = char_class();
      if (!set.ok()) return set.status();
      atom.kind = SyntaxNode::Kind::kSet;
      atom.set = std::move(*set);
    } else if (c == '.') {
      ++pos_;
      atom.kind = SyntaxNode::Kind::kSet;
      atom.set = complement(line_terminators());
    } else if (c == '\\') {
      ++pos_;
      StatusOr<CodePointSet> set = escape(/*in_class=*/false);
      if (!set.ok()) return set.status();
      atom.kind = SyntaxNode::Kind::kSet;
      atom.set = std::move(*set);
    } else {
      ++pos_;
      atom.kind = SyntaxNode::Kind::kSet;
      atom.set = single(c);
    }
    return quantified(std::move(atom));
  }

  StatusOr<SyntaxNode> quantified(SyntaxNode atom) {
    uint64_t min_count = 1;
    uint64_t max_count = 1;
    const uint32_t c = peek();
    if (c == '*' || c == '+' || c == '?') {
      ++pos_;
      min_count = c == '+' ? 1 : 0;
      max_count = c == '?' ? 1 : UINT64_MAX;
    } else if (const std::optional<Braces> b = braces()) {
      pos_ += b->length;
      min_count = b->min_count;
      max_count = b->max_count;
      if (max_count < min_count) return fail("a repeat whose maximum is below its minimum");
      if (min_count > kMaxRepeat || (max_count != UINT64_MAX && max_count > kMaxRepeat)) {
        return fail("a repeat count above 1000");
      }
    } else {
      return atom;
    }
    if (peek() == '?') ++pos_;  // lazy: the same strings
    if (peek() == '*' || peek() == '+' || peek() == '?' || braces())
      return fail("nothing to repeat");
    SyntaxNode repeat;
    repeat.kind = SyntaxNode::Kind::kRepeat;
    repeat.min_count = static_cast<uint32_t>(min_count);
    repeat.max_count =
        max_count == UINT64_MAX ? SyntaxNode::kUnbounded : static_cast<uint32_t>(max_count);
    repeat.children.push_back(std::move(atom));
    return repeat;
  }

  // Four hex digits at pos_, consumed; nullopt (nothing consumed) if not there.
  std::optional<uint32_t> hex4() {
    uint32_t v = 0;
    for (size_t k = 0; k < 4; ++k) {
      const int h = hex_value(peek(k));
      if (h < 0) return std::nullopt;
      v = v * 16 + static_cast<uint32_t>(h);
    }
    pos_ += 4;
    return v;
  }

  // After a '\': the set it stands for.
  StatusOr<CodePointSet> escape(bool in_class) {
    const size_t at = pos_ - 1;  // the '\\'
    const auto fail = [&](const std::string& what) { return fail_at(at, what); };
    if (at_end()) return fail("a '\\' at the end");
    const uint32_t c = peek();
    ++pos_;
    switch (c) {
      case 'd':
        return digit_set();
      case 'D':
        return complement(digit_set());
      case 'w':
        return word_set();
      case 'W':
        return complement(word_set());
      case 's':
        return space_set();
      case 'S':
        return complement(space_set());
      case 't':
        return single('\t');
      case 'n':
        return single('\n');
      case 'r':
        return single('\r');
      case 'v':
        return single('\v');
      case 'f':
        return single('\f');
      case 'b':
        if (in_class) return single('\b');
        return fail("word boundaries (\\b) are not supported");
      case 'B':
        return fail("word boundaries (\\B) are not supported");
      case '0':
        if (peek() >= '0' && peek() <= '9') return fail("octal escapes are not supported");
        return single(0);
      case 'c': {
        const uint32_t letter = peek();
        if (!((letter >= 'a' && letter <= 'z') || (letter >= 'A' && letter <= 'Z'))) {
          return fail("\\c without a control letter");
        }
        ++pos_;
        return single(letter % 32);
      }
      case 'x': {
        const int hi = hex_value(peek());
        const int lo = hex_value(peek(1));
        if (hi < 0 || lo < 0) return fail("\\x without two hex digits");
        pos_ += 2;
        return single(static_cast<uint32_t>(hi * 16 + lo));
      }
      case 'u': {
        if (peek() == '{') {
          ++pos_;
          uint32_t v = 0;
          size_t digits = 0;
          while (hex_value(peek()) >= 0) {
            v = std::min<uint32_t>(v * 16 + static_cast<uint32_t>(hex_value(peek())),
                                   kMaxCodePoint + 1);
            ++pos_;
            ++digits;
          }
          if (digits == 0 || peek() != '}' || v > kMaxCodePoint) return fail("an invalid \\u{...}");
          ++pos_;
          return single(v);
        }
        const std::optional<uint32_t> unit = hex4();
        if (!unit) return fail("\\u without four hex digits");
        // A surrogate pair written as two escapes is one code point.
        if (*unit >= 0xD800 && *unit <= 0xDBFF && peek() == '\\' && peek(1) == 'u') {
          const size_t saved = pos_;
          pos_ += 2;
          const std::optional<uint32_t> low = hex4();
          if (low && *low >= 0xDC00 && *low <= 0xDFFF) {
            return single(0x10000 + ((*unit - 0xD800) << 10) + (*low - 0xDC00));
          }
          pos_ = saved;
        }
        return single(*unit);
      }
      case 'k':
        return fail("backreferences are not supported");
      case 'p':
      case 'P':
        return fail("Unicode property escapes are not supported");
      default:
        break;
    }
    if (c >= '1' && c <= '9') return fail("backreferences are not supported");
    if (is_ascii_alnum(c) || c == '_') {
      return fail(std::string("the escape \\") + static_cast<char>(c) + " is not supported");
    }
    return single(c);  // an escaped punctuation or other character stands for itself
  }

  // After '[': the set of the class up to its ']'.
  StatusOr<CodePointSet> char_class() {
    const bool negated = peek() == '^';
    if (negated) ++pos_;
    CodePointSet ranges;
    // One class atom: a code point, or a set (a class escape such as \d) as `set`.
    struct ClassAtom {
      bool is_set;
      uint32_t code_point;
      CodePointSet set;
    };
    const auto class_atom = [&]() -> StatusOr<ClassAtom> {
      const uint32_t c = peek();
      ++pos_;
      if (c != '\\') return ClassAtom{false, c, {}};
      if (peek() == '-') {
        ++pos_;
        return ClassAtom{false, '-', {}};
      }
      StatusOr<CodePointSet> set = escape(/*in_class=*/true);
      if (!set.ok()) return set.status();
      if (set->size() == 1 && (*set)[0].first == (*set)[0].second) {
        return ClassAtom{false, (*set)[0].first, {}};
      }
      return ClassAtom{true, 0, std::move(*set)};
    };
    const auto add = [&](const ClassAtom& a) {
      if (a.is_set) {
        ranges.insert(ranges.end(), a.set.begin(), a.set.end());
      } else {
        ranges.emplace_back(a.code_point, a.code_point);
      }
    };
    while (true) {
      if (at_end()) return fail("an unterminated character class");
      if (peek() == ']') {
        ++pos_;
        break;
      }
      StatusOr<ClassAtom> first = class_atom();
      if (!first.ok()) return first.status();
      if (peek() == '-' && peek(1) != ']' && pos_ + 1 < text_.size()) {
        ++pos_;  // a range, unless an end is a set: then '-' is itself (Annex B)
        StatusOr<ClassAtom> last = class_atom();
        if (!last.ok()) return last.status();
        if (first->is_set || last->is_set) {
          add(*first);
          ranges.emplace_back('-', '-');
          add(*last);
          continue;
        }
        if (last->code_point < first->code_point) return fail("a class range out of order");
        ranges.emplace_back(first->code_point, last->code_point);
        continue;
      }
      add(*first);
    }
    CodePointSet set = normalized(std::move(ranges));
    return negated ? complement(set) : set;
  }

  std::vector<uint32_t> text_;
  size_t pos_ = 0;
};

// The code points of UTF-8 `text`, or nullopt when it is not valid UTF-8.
std::optional<std::vector<uint32_t>> decode_utf8(std::string_view text) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < text.size();) {
    const auto b = static_cast<unsigned char>(text[i]);
    int extra = 0;
    uint32_t v = 0;
    if (b < 0x80) {
      v = b;
    } else if (b >= 0xC2 && b <= 0xDF) {
      extra = 1;
      v = b & 0x1Fu;
    } else if (b >= 0xE0 && b <= 0xEF) {
      extra = 2;
      v = b & 0x0Fu;
    } else if (b >= 0xF0 && b <= 0xF4) {
      extra = 3;
      v = b & 0x07u;
    } else {
      return std::nullopt;
    }
    if (i + static_cast<size_t>(extra) >= text.size()) return std::nullopt;
    for (int k = 1; k <= extra; ++k) {
      const auto cont = static_cast<unsigned char>(text[i + static_cast<size_t>(k)]);
      if ((cont & 0xC0) != 0x80) return std::nullopt;
      v = (v << 6) | (cont & 0x3Fu);
    }
    const uint32_t smallest[] = {0, 0x80, 0x800, 0x10000};
    if (v < smallest[extra] || v > kMaxCodePoint || (v >= 0xD800 && v <= 0xDFFF)) {
      return std::nullopt;
    }
    out.push_back(v);
    i += static_cast<size_t>(extra) + 1;
  }
  return out;
}

}  // namespace

CodePointSet normalized(CodePointSet ranges) {
  std::sort(ranges.begin(), ranges.end());
  CodePointSet out;
  for (const auto& [lo, hi] : ranges) {
    if (!out.empty() && lo <= out.back().second + 1) {
      out.back().second = std::max(out.back().second, hi);
    } else {
      out.emplace_back(lo, hi);
    }
  }
  return out;
}

CodePointSet complement(const CodePointSet& set) {
  CodePointSet out;
  uint32_t next = 0;
  for (const auto& [lo, hi] : set) {
    if (lo > next) out.emplace_back(next, lo - 1);
    next = hi + 1;
  }
  if (next <= kMaxCodePoint) out.emplace_back(next, kMaxCodePoint);
  return out;
}

StatusOr<SyntaxNode> parse_pattern(std::string_view pattern) {
  std::optional<std::vector<uint32_t>> text = decode_utf8(pattern);
  if (!text) return invalid_argument("the pattern is not valid UTF-8");
  return Parser(std::move(*text)).parse();
}

}  // namespace cellm::pattern
