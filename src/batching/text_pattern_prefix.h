// TextPatternPrefix: recognizes, one byte at a time, the prefixes of the texts a whole-text
// StringPattern (string_pattern.h, Target::kWholeText) matches: the output constraint of
// vLLM's guided_regex and guided_choice. Bytes must form UTF-8 (checked exactly: no overlong
// forms, no surrogates); the automaton steps when a character's last byte comes, and a byte that
// begins or continues one is taken only if some code point it may still become keeps the text
// live, so every prefix taken can be completed into a match.
//
// It knows bytes and the pattern; no tokens, no tokenizer, no model. Who calls it: the engine's
// text constraint (engine_json.cpp) — accepts(bytes) for candidate tokens at every generated
// token, feed() for the one sampled — and JsonTokenMask's compute_text.
//
// Thread-safety: a value type; one thread per object (copies are independent and share the
// immutable pattern).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>

#include "batching/json_schema_prefix.h"
#include "batching/string_pattern.h"

namespace cellm {

class TextPatternPrefix {
 public:
  explicit TextPatternPrefix(std::shared_ptr<const StringPattern> pattern);

  // Feeds every byte of `bytes`; commits and returns true only if all are accepted (all or
  // nothing). Empty: true.
  bool feed(std::string_view bytes);
  // Whether feed(bytes) would succeed, without changing the state.
  bool accepts(std::string_view bytes) const;
  // Whether the text so far is one the pattern matches: it may end here.
  bool complete() const;
  // Whether it must end here: it matches, and no character may follow.
  bool must_end() const;
  // Between two characters: the automaton's state and the code points so far (a plain piece's
  // code points are then accepted exactly when the pattern's live() holds after them). nullopt
  // inside a character.
  std::optional<JsonSchemaPrefix::PatternPlace> pattern_place() const;

 private:
  struct State {
    int32_t automaton = 0;  // StringPattern state
    uint32_t length = 0;    // code points begun
    uint32_t bits = 0;      // a character's value bits so far
    uint32_t lo = 0;        // ... and the code points it may still become
    uint32_t hi = 0;
    uint8_t bytes_left = 0;  // ... and its bytes to come
  };
  bool step(State& s, unsigned char byte) const;

  std::shared_ptr<const StringPattern> pattern_;
  State state_;
};

}  // namespace cellm
