// JsonSchemaPrefix inside a string with a pattern (json_schema_prefix.h): the pattern's
// automaton (string_pattern.h) steps once per code point, when its last byte is fed; a byte that
// begins or continues a character is taken only if some code point it may still become keeps the
// string live, so that every prefix taken can be completed.
#include <array>

#include "batching/json_schema_prefix.h"

namespace cellm {
namespace {

// The code point of a two-character escape's second byte (the grammar checked it), or -1 for
// 'u': a string with a pattern is written without \u escapes.
int64_t escaped_code_point(unsigned char byte) {
  switch (byte) {
    case 'b':
      return '\b';
    case 'f':
      return '\f';
    case 'n':
      return '\n';
    case 'r':
      return '\r';
    case 't':
      return '\t';
    case 'u':
      return -1;
    default:
      return byte;  // '"', '\\', '/'
  }
}

constexpr std::array<uint32_t, 8> kEscapable = {'"', '\\', '/', '\b', '\f', '\n', '\r', '\t'};

}  // namespace

std::optional<JsonSchemaPrefix::PatternPlace> JsonSchemaPrefix::pattern_place() const {
  if (states_.size() != 1) return std::nullopt;
  const State& s = states_[0];
  if (s.syntax.mode_ != Mode::kString || s.active != Active::kString) return std::nullopt;
  const StringPattern* pattern = schema_->node(s.string_node).pattern.get();
  if (pattern == nullptr) return std::nullopt;
  return PatternPlace{pattern, s.pattern_state, s.string_length};
}

bool JsonSchemaPrefix::step_pattern_string(State& s, unsigned char byte, Mode before,
                                           const StringPattern& pattern) const {
  const auto complete = [&](uint32_t code_point) {  // the character's last byte
    s.pattern_state = pattern.next(s.pattern_state, code_point);
    return pattern.live(s.pattern_state, s.string_length);
  };
  switch (before) {
    case Mode::kString: {
      if (byte == '"') {
        s.active = Active::kNone;
        return pattern.accepts(s.pattern_state, s.string_length);
      }
      const uint32_t length = s.string_length++;  // a character begins
      if (byte == '\\') {
        for (const uint32_t c : kEscapable) {
          if (pattern.live(pattern.next(s.pattern_state, c), length + 1)) return true;
        }
        return false;
      }
      if (byte < 0x80) return complete(byte);
      uint32_t lo = 0;
      uint32_t hi = 0;  // the grammar took the byte: it leads a character
      StringPattern::utf8_lead(byte, &lo, &hi, &s.pattern_code_point, &s.pattern_bytes_left);
      return pattern.any_live(s.pattern_state, length, lo, hi);
    }
    case Mode::kEscape: {
      const int64_t c = escaped_code_point(byte);
      return c >= 0 && complete(static_cast<uint32_t>(c));
    }
    case Mode::kUtf8Continuation: {
      s.pattern_code_point = (s.pattern_code_point << 6) | (byte & 0x3Fu);
      if (--s.pattern_bytes_left == 0) return complete(s.pattern_code_point);
      const unsigned shift = 6u * s.pattern_bytes_left;
      const uint32_t lo = s.pattern_code_point << shift;
      return pattern.any_live(s.pattern_state, s.string_length - 1, lo,
                              lo | ((uint32_t{1} << shift) - 1));
    }
    default:
      return false;  // inside a \u escape: never begun here
  }
}

}  // namespace cellm
