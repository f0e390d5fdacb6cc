#include "batching/json_prefix.h"

#include <algorithm>
#include <array>
#include <type_traits>

namespace cellm {
namespace {

static_assert(std::is_trivially_copyable_v<JsonPrefix>);
static_assert(JsonPrefix::kMaxDepth <= 64, "the open containers are the bits of a uint64_t");

constexpr std::array<std::string_view, 3> kLiteralTexts = {"true", "false", "null"};

bool is_whitespace(unsigned char byte) {
  return byte == ' ' || byte == '\t' || byte == '\n' || byte == '\r';
}

bool is_digit(unsigned char byte) { return byte >= '0' && byte <= '9'; }

// The value of a hex digit, or -1.
int hex_value(unsigned char byte) {
  if (is_digit(byte)) return byte - '0';
  if (byte >= 'a' && byte <= 'f') return byte - 'a' + 10;
  if (byte >= 'A' && byte <= 'F') return byte - 'A' + 10;
  return -1;
}

}  // namespace

bool JsonPrefix::feed(unsigned char byte) {
  JsonPrefix next = *this;
  if (!next.step(byte)) return false;
  *this = next;
  return true;
}

bool JsonPrefix::feed(std::string_view bytes) {
  JsonPrefix next = *this;
  for (char c : bytes) {
    if (!next.step(static_cast<unsigned char>(c))) return false;
  }
  *this = next;
  return true;
}

bool JsonPrefix::accepts(std::string_view bytes) const {
  JsonPrefix next = *this;
  for (char c : bytes) {
    if (!next.step(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

bool JsonPrefix::plain_string_piece(std::string_view bytes) {
  JsonPrefix inside(/*object_only=*/false);
  inside.mode_ = Mode::kString;
  for (char c : bytes) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte == '"' || byte == '\\' || !inside.step(byte)) return false;
  }
  return inside.mode_ == Mode::kString;
}

bool JsonPrefix::complete() const {
  if (depth_ != 0) return false;
  switch (mode_) {
    case Mode::kAfterValue:
    case Mode::kNumberZero:
    case Mode::kNumberInteger:
    case Mode::kNumberFraction:
    case Mode::kNumberExponent:
      return true;
    default:
      return false;
  }
}

// Applies one byte to this state; on false the state is garbage (callers step a copy).
bool JsonPrefix::step(unsigned char byte) {
  if (mode_ >= Mode::kNumberMinus) return step_in_number(byte);  // the number modes come last
  if (mode_ == Mode::kLiteral) {
    const std::string_view text = kLiteralTexts[static_cast<size_t>(literal_)];
    if (byte != static_cast<unsigned char>(text[literal_matched_])) return false;
    if (++literal_matched_ == text.size()) mode_ = Mode::kAfterValue;
    return true;
  }
  if (mode_ == Mode::kUnicodeEscape) return step_in_unicode_escape(byte);
  if (mode_ >= Mode::kString) return step_in_string(byte);  // the other modes inside a string
  return step_between_tokens(byte);
}

bool JsonPrefix::step_between_tokens(unsigned char byte) {
  if (is_whitespace(byte)) {
    if (max_whitespace_run_ != kNoWhitespaceLimit && whitespace_run_ >= max_whitespace_run_) {
      return false;
    }
    whitespace_run_ = static_cast<uint8_t>(whitespace_run_ + (whitespace_run_ < 254 ? 1 : 0));
    return true;
  }
  whitespace_run_ = 0;
  switch (mode_) {
    case Mode::kBeforeTopValue:
      if (object_only_ && byte != '{') return false;
      return begin_value(byte);
    case Mode::kBeforeValue:
      return begin_value(byte);
    case Mode::kBeforeValueOrClose:
      return byte == ']' ? close_container(false) : begin_value(byte);
    case Mode::kBeforeKey:
    case Mode::kBeforeKeyOrClose:
      if (byte == '}' && mode_ == Mode::kBeforeKeyOrClose) return close_container(true);
      if (byte != '"') return false;
      mode_ = Mode::kString;
      string_is_key_ = true;
      return true;
    case Mode::kBeforeColon:
      if (byte != ':') return false;
      mode_ = Mode::kBeforeValue;
      return true;
    case Mode::kAfterValue:
      if (depth_ == 0) return false;  // the top-level value is done: only whitespace may follow
      if (byte == ',') {
        mode_ = innermost_is_object() ? Mode::kBeforeKey : Mode::kBeforeValue;
        return true;
      }
      if (byte == '}') return close_container(true);
      if (byte == ']') return close_container(false);
      return false;
    default:
      return false;
  }
}

bool JsonPrefix::begin_value(unsigned char byte) {
  switch (byte) {
    case '{':
      return open_container(true);
    case '[':
      return open_container(false);
    case '"':
      mode_ = Mode::kString;
      string_is_key_ = false;
      return true;
    case '-':
      mode_ = Mode::kNumberMinus;
      return true;
    case '0':
      mode_ = Mode::kNumberZero;
      return true;
    case 't':
    case 'f':
    case 'n':
      mode_ = Mode::kLiteral;
      literal_ = byte == 't' ? Literal::kTrue : byte == 'f' ? Literal::kFalse : Literal::kNull;
      literal_matched_ = 1;
      return true;
    default:
      if (byte < '1' || byte > '9') return false;
      mode_ = Mode::kNumberInteger;
      return true;
  }
}

bool JsonPrefix::open_container(bool is_object) {
  if (depth_ >= kMaxDepth) return false;
  if (is_object) object_bits_ |= uint64_t{1} << depth_;
  ++depth_;
  mode_ = is_object ? Mode::kBeforeKeyOrClose : Mode::kBeforeValueOrClose;
  return true;
}

bool JsonPrefix::close_container(bool is_object) {
  if (depth_ == 0 || innermost_is_object() != is_object) return false;
  --depth_;
  object_bits_ &= ~(uint64_t{1} << depth_);
  mode_ = Mode::kAfterValue;
  return true;
}

bool JsonPrefix::innermost_is_object() const {
  return depth_ > 0 && ((object_bits_ >> (depth_ - 1)) & 1) != 0;
}

bool JsonPrefix::step_in_string(unsigned char byte) {
  switch (mode_) {
    case Mode::kEscape:
      switch (byte) {
        case '"':
        case '\\':
        case '/':
        case 'b':
        case 'f':
        case 'n':
        case 'r':
        case 't':
          mode_ = Mode::kString;
          return true;
        case 'u':
          mode_ = Mode::kUnicodeEscape;
          expecting_low_surrogate_ = false;
          hex_digits_ = 0;
          code_unit_ = 0;
          return true;
        default:
          return false;
      }
    case Mode::kLowSurrogateBackslash:
      if (byte != '\\') return false;
      mode_ = Mode::kLowSurrogateU;
      return true;
    case Mode::kLowSurrogateU:
      if (byte != 'u') return false;
      mode_ = Mode::kUnicodeEscape;
      expecting_low_surrogate_ = true;
      hex_digits_ = 0;
      code_unit_ = 0;
      return true;
    case Mode::kUtf8Continuation:
      if (byte < utf8_next_min_ || byte > utf8_next_max_) return false;
      utf8_next_min_ = 0x80;
      utf8_next_max_ = 0xBF;
      if (--utf8_remaining_ == 0) mode_ = Mode::kString;
      return true;
    default:
      break;
  }
  // Mode::kString: a character begins.
  if (byte == '"') {
    mode_ = string_is_key_ ? Mode::kBeforeColon : Mode::kAfterValue;
    return true;
  }
  if (byte == '\\') {
    mode_ = Mode::kEscape;
    return true;
  }
  if (byte < 0x20) return false;  // control characters must be escaped
  if (byte < 0x80) return true;
  // A UTF-8 leading byte (RFC 3629): no overlong forms, no surrogates, nothing above U+10FFFF.
  uint8_t remaining = 0;
  uint8_t next_min = 0x80;
  uint8_t next_max = 0xBF;
  if (byte >= 0xC2 && byte <= 0xDF) {
    remaining = 1;
  } else if (byte >= 0xE0 && byte <= 0xEF) {
    remaining = 2;
    if (byte == 0xE0) next_min = 0xA0;  // below: overlong
    if (byte == 0xED) next_max = 0x9F;  // above: U+D800-U+DFFF, the UTF-16 surrogates
  } else if (byte >= 0xF0 && byte <= 0xF4) {
    remaining = 3;
    if (byte == 0xF0) next_min = 0x90;  // below: overlong
    if (byte == 0xF4) next_max = 0x8F;  // above: beyond U+10FFFF
  } else {
    return false;  // a continuation byte, C0/C1 (overlong) or F5-FF (beyond U+10FFFF)
  }
  mode_ = Mode::kUtf8Continuation;
  utf8_remaining_ = remaining;
  utf8_next_min_ = next_min;
  utf8_next_max_ = next_max;
  return true;
}

// \uXXXX. Surrogates are checked as early as the digits decide them: after a high surrogate
// (D800-DBFF) the next escape must be a low one (DC00-DFFF); a low one alone is refused.
bool JsonPrefix::step_in_unicode_escape(unsigned char byte) {
  const int digit = hex_value(byte);
  if (digit < 0) return false;
  code_unit_ = static_cast<uint16_t>((code_unit_ << 4) | digit);
  ++hex_digits_;
  if (hex_digits_ == 1 && expecting_low_surrogate_ && digit != 0xD) return false;
  if (hex_digits_ == 2) {
    const bool low_surrogate = code_unit_ >= 0xDC && code_unit_ <= 0xDF;
    if (low_surrogate != expecting_low_surrogate_) return false;
  } else if (hex_digits_ == 4) {
    const bool high_surrogate = code_unit_ >= 0xD800 && code_unit_ <= 0xDBFF;
    mode_ = high_surrogate ? Mode::kLowSurrogateBackslash : Mode::kString;
  }
  return true;
}

bool JsonPrefix::step_in_number(unsigned char byte) {
  const bool digit = is_digit(byte);
  switch (mode_) {
    case Mode::kNumberMinus:
      if (!digit) return false;
      mode_ = byte == '0' ? Mode::kNumberZero : Mode::kNumberInteger;
      return true;
    case Mode::kNumberDot:
      if (!digit) return false;
      mode_ = Mode::kNumberFraction;
      return true;
    case Mode::kNumberExponentMark:
      if (byte == '+' || byte == '-') {
        mode_ = Mode::kNumberExponentSign;
        return true;
      }
      [[fallthrough]];
    case Mode::kNumberExponentSign:
      if (!digit) return false;
      mode_ = Mode::kNumberExponent;
      return true;
    case Mode::kNumberInteger:
    case Mode::kNumberZero:
    case Mode::kNumberFraction:
      if (digit && mode_ != Mode::kNumberZero) return true;
      if (byte == '.' && mode_ != Mode::kNumberFraction) {
        mode_ = Mode::kNumberDot;
        return true;
      }
      if (byte == 'e' || byte == 'E') {
        mode_ = Mode::kNumberExponentMark;
        return true;
      }
      break;
    case Mode::kNumberExponent:
      if (digit) return true;
      break;
    default:
      return false;
  }
  // The number can end here; the byte that ends it is the next token's (or whitespace).
  mode_ = Mode::kAfterValue;
  return step_between_tokens(byte);
}

size_t json_nesting_depth(std::string_view text) {
  size_t depth = 0;
  size_t deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;  // the escaped character cannot end the string
      if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

}  // namespace cellm
