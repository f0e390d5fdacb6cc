#include "batching/text_pattern_prefix.h"

#include <algorithm>
#include <utility>

#include "core/check.h"

namespace cellm {

TextPatternPrefix::TextPatternPrefix(std::shared_ptr<const StringPattern> pattern)
    : pattern_(std::move(pattern)) {
  CELLM_CHECK(pattern_ != nullptr) << "a text pattern walker needs a pattern";
  state_.automaton = pattern_->start();
}

bool TextPatternPrefix::feed(std::string_view bytes) {
  State next = state_;
  for (const char c : bytes) {
    if (!step(next, static_cast<unsigned char>(c))) return false;
  }
  state_ = next;
  return true;
}

bool TextPatternPrefix::accepts(std::string_view bytes) const {
  State next = state_;
  for (const char c : bytes) {
    if (!step(next, static_cast<unsigned char>(c))) return false;
  }
  return true;
}

bool TextPatternPrefix::complete() const {
  return state_.bytes_left == 0 && pattern_->accepts(state_.automaton, state_.length);
}

bool TextPatternPrefix::must_end() const {
  return complete() && !pattern_->any_live(state_.automaton, state_.length, 0, 0x10FFFF);
}

std::optional<JsonSchemaPrefix::PatternPlace> TextPatternPrefix::pattern_place() const {
  if (state_.bytes_left != 0) return std::nullopt;
  return JsonSchemaPrefix::PatternPlace{pattern_.get(), state_.automaton, state_.length};
}

// Applies one byte to `s`; on false `s` is garbage (callers step a copy).
bool TextPatternPrefix::step(State& s, unsigned char byte) const {
  const StringPattern& p = *pattern_;
  if (s.bytes_left == 0) {
    const uint32_t length = s.length++;  // a character begins
    if (byte < 0x80) {
      s.automaton = p.next(s.automaton, byte);
      return p.live(s.automaton, s.length);
    }
    if (!StringPattern::utf8_lead(byte, &s.lo, &s.hi, &s.bits, &s.bytes_left)) return false;
    return p.any_live(s.automaton, length, s.lo, s.hi);
  }
  if ((byte & 0xC0) != 0x80) return false;
  s.bits = (s.bits << 6) | (byte & 0x3Fu);
  --s.bytes_left;
  const unsigned shift = 6u * s.bytes_left;
  // The code points this byte leaves, within those the lead byte allowed (an empty range: an
  // overlong form, a surrogate or past U+10FFFF).
  const uint32_t lo = std::max(s.lo, s.bits << shift);
  const uint32_t hi = std::min(s.hi, (s.bits << shift) | ((uint32_t{1} << shift) - 1));
  if (lo > hi) return false;
  if (s.bytes_left == 0) {
    s.automaton = p.next(s.automaton, s.bits);
    return p.live(s.automaton, s.length);
  }
  s.lo = lo;
  s.hi = hi;
  return p.any_live(s.automaton, s.length - 1, lo, hi);
}

}  // namespace cellm
