// JsonSchemaPrefix: recognizes, one byte at a time, the prefixes of the JSON texts a JsonSchema
// (json_schema.h) accepts. The grammar is JsonPrefix's (exactly RFC 8259, whitespace runs
// bounded); on top it walks the schema: which types a value may take, which keys an object may
// still get and which it must get before '}', how many items an array may hold, how long a string
// may be, and which texts an enum allows. Every prefix it accepts can still be completed into a
// text the schema accepts (the compiler refuses what would make that untrue), so a constrained
// generation never finds every token refused. Where a union's branches take a value's type alike
// (JsonSchema::Node::choices) it walks one alternative per branch the value still fits, at most
// kMaxAlternatives at once (alternatives that reach the same place are merged; past the limit the
// later ones are dropped, which leaves every accepted prefix completable).
//
// It knows bytes and the compiled schema; no tokens, no tokenizer, no model. Who calls it: the
// engine's response-format constraint (engine_json.cpp) — accepts(bytes) for candidate tokens at
// every generated token, feed() for the one sampled.
//
// Thread-safety: a value type; one thread per object (copies are independent and share the
// immutable schema).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "batching/json_prefix.h"
#include "batching/json_schema.h"

namespace cellm {

class JsonSchemaPrefix {
 public:
  JsonSchemaPrefix(std::shared_ptr<const JsonSchema> schema, int max_whitespace_run);
  JsonSchemaPrefix(const JsonSchemaPrefix& other);
  JsonSchemaPrefix& operator=(const JsonSchemaPrefix& other);

  // Feeds every byte of `bytes`; commits and returns true only if all are accepted (all or
  // nothing). Empty: true.
  bool feed(std::string_view bytes);
  // Whether feed(bytes) would succeed, without changing the state.
  bool accepts(std::string_view bytes) const;
  // Whether what was fed is one whole value the schema accepts (plus optional whitespace).
  bool complete() const;
  // Whether it must end here: complete, and nothing but whitespace may follow (false for a
  // top-level number that may take more digits: "1" of "12").
  bool must_end() const;
  // Inside a string between two characters, where any plain characters may come (a value
  // string without an enum or a pattern, or a key of an object that declares no names): how many
  // more code points it may take (JsonSchema::kUnbounded: no limit). Every
  // JsonPrefix::plain_string_piece() of at most that many code points is accepted there and
  // leaves it there. nullopt elsewhere. (Alternatives: the most room one of them has.)
  std::optional<uint32_t> string_room() const;
  // Inside a string with a pattern, between two characters: the pattern, its automaton's state
  // and the code points written so far. A JsonPrefix::plain_string_piece() is accepted there
  // exactly when the pattern's live() holds after its code points. nullopt elsewhere.
  struct PatternPlace {
    const StringPattern* pattern;
    int32_t state;
    uint32_t length;
  };
  std::optional<PatternPlace> pattern_place() const;
  // The alternatives walked at once: 1 but inside a value of a choice that fits several
  // branches so far.
  size_t num_alternatives() const { return states_.size(); }

  static constexpr int kMaxDepth = JsonPrefix::kMaxDepth;
  static constexpr size_t kMaxAlternatives = 16;

 private:
  // The mask steps copies of the state through the vocabulary's trie, a byte at a time.
  friend class JsonTokenMask;
  using Mode = JsonPrefix::Mode;
  // An open object or array.
  struct Frame {
    int32_t node;    // the schema node it is checked against
    uint32_t count;  // array: items begun; object: keys ended
    uint64_t seen;   // object: the bits of the properties it has
  };
  // What is being written inside the innermost container (or at the top).
  enum class Active : uint8_t { kNone, kKey, kString, kNumber, kEnum };
  struct State {
    JsonPrefix syntax;
    Active active;
    bool integer_only;      // kNumber: no fraction, no exponent
    bool number_negative;   // kNumber with integer bounds: a '-' was written
    uint8_t number_digits;  // ... the digits written, at most 19, and their value
    uint64_t number_value;
    int32_t number_node;      // kNumber: the number's node (its bounds)
    bool number_fraction;     // ... with decimal bounds: a '.' was written
    bool fraction_nonzero;    // ... and a digit after it other than '0'
    uint8_t fraction_digits;  // ... and how many digits after it
    int32_t value_node;       // object: the node of the value after the key that ended
    int32_t string_node;      // kString: the string's node (its length bounds)
    uint32_t string_length;   // kString: code points begun so far
    int32_t pattern_state;    // kString with a pattern: its automaton's state (string_pattern.h)
    uint32_t pattern_code_point;  // ... a UTF-8 character's bits so far
    uint8_t pattern_bytes_left;   // ... and how many of its bytes are to come
    uint32_t lo;                  // kKey: properties [lo, hi) match the key so far; kEnum: texts
    uint32_t hi;
    uint32_t offset;     // kKey, kEnum: bytes matched
    int32_t enum_node;   // kEnum: the node whose texts are matched
    int32_t enum_depth;  // kEnum: the syntax depth the value began at
    int32_t num_frames;
    Frame frames[kMaxDepth];  // [0, num_frames) open containers; the rest unused
  };
  // The other branches' states where a byte begins a value of a choice (step's `forks`).
  using Forks = std::vector<State>;
  static void copy_state(const State& from, State* to);
  // Whether two states are at the same place (between values: the same syntax, frames and
  // pending value node); false inside a value.
  static bool same_place(const State& a, const State& b);
  // Appends `s` to `states` unless one is at its place or there are kMaxAlternatives.
  static void add_alternative(std::vector<State>& states, const State& s);
  // Steps every alternative of `states` over `bytes`; false (states garbage) when none is left.
  bool advance(std::vector<State>& states, std::string_view bytes) const;
  bool state_accepts(const State& s, std::string_view bytes) const;
  bool state_complete(const State& s) const;
  std::optional<uint32_t> state_string_room(const State& s) const;

  // Applies one byte to `s`; on false `s` is garbage (callers step a copy). Where the byte begins
  // a value of a choice, `s` takes the first branch it fits and `forks` gets the others.
  bool step(State& s, unsigned char byte, Forks* forks) const;
  bool step_between_tokens(State& s, unsigned char byte, Mode before, Forks* forks) const;
  bool step_key(State& s, unsigned char byte, Mode before) const;
  // A byte inside a string with a pattern (json_schema_prefix_pattern.cpp).
  bool step_pattern_string(State& s, unsigned char byte, Mode before,
                           const StringPattern& pattern) const;
  bool step_enum(State& s, unsigned char byte, Mode before, int32_t depth_before,
                 Forks* forks) const;
  bool begin_value(State& s, unsigned char byte, Forks* forks) const;
  // begin_value once the value's node (not a union or a choice) is known.
  bool begin_node(State& s, unsigned char byte, int32_t node) const;
  bool end_key(State& s) const;
  bool can_take_key(const Frame& frame) const;
  bool property_available(const Frame& frame, uint32_t index) const;
  // Whether the object's next key must be one of its missing required properties (as many keys
  // are left under maxProperties as required ones are missing).
  bool only_required_keys(const Frame& frame) const;
  bool additional_allowed(const Frame& frame) const;
  // Integer bounds: whether digits can still be appended to (or the number can end with) what
  // was written so as to land within the node's range.
  bool integer_can_reach(const State& s) const;
  // The same for numbers that may have fractions (whole-number bounds, no exponent).
  bool decimal_can_reach(const State& s) const;
  // Whether the number written so far lies within its node's bounds (either kind).
  bool number_within(const State& s) const;

  std::shared_ptr<const JsonSchema> owner_;
  const JsonSchema* schema_;
  std::vector<State> states_;  // the alternatives, at least one
};

}  // namespace cellm
