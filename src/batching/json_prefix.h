// JsonPrefix: recognizes, one byte at a time, the prefixes of a single JSON text (RFC 8259): after
// each byte it knows whether what was fed can still be extended to a valid JSON text, whether it
// already is one, and how deeply it is nested. It checks the grammar exactly (whitespace, literals,
// number shapes, string escapes, \u surrogate pairs, UTF-8 inside strings) and, when asked, bounds
// runs of whitespace between tokens; nothing else. It knows no tokens, no tokenizer and no model,
// only bytes; it keeps no values, no keys (duplicate keys are not its concern) and no text.
//
// Who calls it: JsonSchemaPrefix (json_schema_prefix.h), the grammar under the engine's
// response-format constraints (json_object and json_schema), which steps it a byte at a time and
// reads its mode; JsonTokenMask asks plain_string_piece() once per token. The state is a few bytes
// (the open containers are bits of one word), so a step costs a handful of branches.
//
// Thread-safety: a value type, trivially copyable; one thread per object (copies are independent).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace cellm {

class JsonPrefix {
 public:
  // object_only: the top-level value must be an object (OpenAI's json_object); else any value.
  // max_whitespace_run: the most whitespace bytes in a row between two tokens (before the value
  // too), at most kMaxWhitespaceRun; larger means no limit. A model that was not trained to write
  // JSON may otherwise write whitespace until its tokens run out (every byte of it valid JSON).
  explicit JsonPrefix(bool object_only = true, int max_whitespace_run = kNoWhitespaceLimit)
      : object_only_(object_only),
        max_whitespace_run_(
            static_cast<uint8_t>(max_whitespace_run >= 0 && max_whitespace_run < kNoWhitespaceLimit
                                     ? max_whitespace_run
                                     : kNoWhitespaceLimit)) {}

  // Feeds one byte: true when what was fed, with it, is still a prefix of some valid JSON text
  // (the top-level value, then only whitespace); false leaves the state unchanged.
  bool feed(unsigned char byte);
  // Feeds every byte of `bytes` on a copy; commits and returns true only if all are accepted
  // (all or nothing). Empty: true.
  bool feed(std::string_view bytes);
  // Whether feed(bytes) would succeed, without changing the state.
  bool accepts(std::string_view bytes) const;
  // Whether what was fed is one whole JSON value (plus optional whitespace after it): nothing more
  // is needed. A top-level number is complete once it can end ("12", not "12." or "-").
  bool complete() const;
  // Nesting depth of open arrays/objects (0 at top level).
  int depth() const { return depth_; }
  // Whether the state is inside a string between two characters (no escape or UTF-8 sequence
  // under way): every plain_string_piece() is accepted there and leaves it there.
  bool between_string_characters() const { return mode_ == Mode::kString; }
  // Whether `bytes` are whole characters a string may hold as they are: valid UTF-8, no '"', no
  // '\\', no control character. (A mask over a vocabulary computes this once per token.)
  static bool plain_string_piece(std::string_view bytes);

  static constexpr int kMaxDepth = 64;            // deeper nesting is refused (feed returns false)
  static constexpr int kNoWhitespaceLimit = 255;  // a max_whitespace_run meaning none

  // Equal states accept exactly the same continuations.
  friend bool operator==(const JsonPrefix&, const JsonPrefix&) = default;

 private:
  // The schema walker reads the mode to learn where a value, key or character begins and ends.
  friend class JsonSchemaPrefix;

  // Where the byte stream stands: between tokens (what may come next), or inside a token. The
  // order matters to step(): the modes between tokens, then inside strings, then the numbers.
  enum class Mode : uint8_t {
    kBeforeTopValue,      // whitespace, then the top-level value
    kBeforeValue,         // after ':' or an array's ',': whitespace, then a value
    kBeforeValueOrClose,  // after '[': whitespace, then a value or ']'
    kBeforeKey,           // after an object's ',': whitespace, then a key
    kBeforeKeyOrClose,    // after '{': whitespace, then a key or '}'
    kBeforeColon,         // after a key: whitespace, then ':'
    kAfterValue,          // whitespace, then ',' or the closing bracket; at the top only whitespace
    kString,              // inside a string, between characters
    kEscape,              // after '\' in a string
    kUnicodeEscape,       // inside \uXXXX: hex_digits_ read so far, their value in code_unit_
    kLowSurrogateBackslash,  // after a high surrogate escape: its low surrogate's '\'
    kLowSurrogateU,          // then its 'u'
    kUtf8Continuation,       // inside a multi-byte UTF-8 character: utf8_remaining_ bytes to come
    kLiteral,                // inside true/false/null: literal_, literal_matched_ bytes so far
    kNumberMinus,            // "-"
    kNumberZero,             // "0" or "-0": a fraction, an exponent or the end may follow
    kNumberInteger,          // "[1-9][0-9]*"
    kNumberDot,              // "." (a digit must follow)
    kNumberFraction,         // ".[0-9]+"
    kNumberExponentMark,     // "e" or "E" (a sign or a digit must follow)
    kNumberExponentSign,     // "e+" or "e-" (a digit must follow)
    kNumberExponent,         // "e[+-]?[0-9]+"
  };
  enum class Literal : uint8_t { kTrue, kFalse, kNull };

  bool step(unsigned char byte);
  bool step_between_tokens(unsigned char byte);
  bool step_in_string(unsigned char byte);
  bool step_in_unicode_escape(unsigned char byte);
  bool step_in_number(unsigned char byte);
  bool begin_value(unsigned char byte);
  bool open_container(bool is_object);
  bool close_container(bool is_object);
  bool innermost_is_object() const;

  uint64_t object_bits_ = 0;  // bit d: the container at depth d+1 is an object (else an array)
  uint8_t depth_ = 0;
  Mode mode_ = Mode::kBeforeTopValue;
  bool object_only_;
  uint8_t max_whitespace_run_;
  uint8_t whitespace_run_ = 0;            // whitespace bytes since the last token's
  bool string_is_key_ = false;            // the open string is an object's key
  bool expecting_low_surrogate_ = false;  // the open \u escape must be a low surrogate
  uint8_t hex_digits_ = 0;
  uint16_t code_unit_ = 0;
  uint8_t utf8_remaining_ = 0;
  uint8_t utf8_next_min_ = 0;  // the range of the next continuation byte
  uint8_t utf8_next_max_ = 0;
  Literal literal_ = Literal::kTrue;
  uint8_t literal_matched_ = 0;
};

// How deep `text` nests arrays and objects, read as JSON (brackets inside strings are not counted;
// the text need not be valid). Code that walks parsed JSON recursively checks it first.
size_t json_nesting_depth(std::string_view text);

}  // namespace cellm
