#include "batching/json_schema_prefix.h"

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/check.h"

namespace cellm {
namespace {

using Node = JsonSchema::Node;

bool is_whitespace(unsigned char byte) {
  return byte == ' ' || byte == '\t' || byte == '\n' || byte == '\r';
}

// Byte `offset` of a text as a sort key: a text that ends there sorts before every byte.
int byte_at(const std::string& text, uint32_t offset) {
  return offset < text.size() ? static_cast<unsigned char>(text[offset]) : -1;
}

// Narrows [lo, hi) — sorted texts sharing their first `offset` bytes — to those whose byte at
// `offset` is `byte` (a contiguous run).
template <class TextOf>
std::pair<uint32_t, uint32_t> narrow(uint32_t lo, uint32_t hi, uint32_t offset, unsigned char byte,
                                     TextOf text_of) {
  uint32_t first = lo;
  uint32_t count = hi - lo;
  while (count > 0) {  // first with byte_at >= byte
    const uint32_t half = count / 2;
    if (byte_at(text_of(first + half), offset) < byte) {
      first += half + 1;
      count -= half + 1;
    } else {
      count = half;
    }
  }
  uint32_t last = first;
  while (last < hi && byte_at(text_of(last), offset) == byte) ++last;
  return {first, last};
}

}  // namespace

JsonSchemaPrefix::JsonSchemaPrefix(std::shared_ptr<const JsonSchema> schema, int max_whitespace_run)
    : owner_(std::move(schema)), schema_(owner_.get()), states_(1) {
  CELLM_CHECK(schema_ != nullptr) << "a JSON schema walker needs a schema";
  static_assert(std::is_trivially_copyable_v<State>);
  State& s = states_[0];
  s.syntax = JsonPrefix(/*object_only=*/false, max_whitespace_run);
  s.active = Active::kNone;
  s.integer_only = false;
  s.number_negative = false;
  s.number_digits = 0;
  s.number_value = 0;
  s.number_node = JsonSchema::kNoNode;
  s.number_fraction = false;
  s.fraction_nonzero = false;
  s.fraction_digits = 0;
  s.value_node = JsonSchema::kNoNode;
  s.string_node = JsonSchema::kNoNode;
  s.string_length = 0;
  s.pattern_state = StringPattern::kDead;
  s.pattern_code_point = 0;
  s.pattern_bytes_left = 0;
  s.lo = s.hi = s.offset = 0;
  s.enum_node = JsonSchema::kNoNode;
  s.enum_depth = 0;
  s.num_frames = 0;
}

JsonSchemaPrefix::JsonSchemaPrefix(const JsonSchemaPrefix& other)
    : owner_(other.owner_), schema_(other.schema_), states_(other.states_.size()) {
  for (size_t i = 0; i < states_.size(); ++i) copy_state(other.states_[i], &states_[i]);
}

JsonSchemaPrefix& JsonSchemaPrefix::operator=(const JsonSchemaPrefix& other) {
  if (this == &other) return *this;
  owner_ = other.owner_;
  schema_ = other.schema_;
  states_.resize(other.states_.size());
  for (size_t i = 0; i < states_.size(); ++i) copy_state(other.states_[i], &states_[i]);
  return *this;
}

// The header and the open frames only: most states use a few of kMaxDepth frames.
void JsonSchemaPrefix::copy_state(const State& from, State* to) {
  std::memcpy(static_cast<void*>(to), &from, offsetof(State, frames));
  // A loop, not a memcpy of a run-time size: a mask copies a state per token checked, most with
  // a frame or two.
  for (int32_t i = 0; i < from.num_frames; ++i) to->frames[i] = from.frames[i];
}

bool JsonSchemaPrefix::same_place(const State& a, const State& b) {
  if (a.active != Active::kNone || b.active != Active::kNone) return false;
  if (!(a.syntax == b.syntax) || a.value_node != b.value_node || a.num_frames != b.num_frames) {
    return false;
  }
  for (int32_t i = 0; i < a.num_frames; ++i) {
    const Frame& x = a.frames[i];
    const Frame& y = b.frames[i];
    if (x.node != y.node || x.count != y.count || x.seen != y.seen) return false;
  }
  return true;
}

void JsonSchemaPrefix::add_alternative(std::vector<State>& states, const State& s) {
  if (states.size() >= kMaxAlternatives) return;
  for (const State& t : states) {
    if (same_place(t, s)) return;
  }
  states.emplace_back();
  copy_state(s, &states.back());
}

bool JsonSchemaPrefix::advance(std::vector<State>& states, std::string_view bytes) const {
  std::vector<State> next;
  Forks forks;
  for (const char c : bytes) {
    next.clear();
    for (State& s : states) {
      forks.clear();
      if (step(s, static_cast<unsigned char>(c), &forks)) add_alternative(next, s);
      for (const State& f : forks) add_alternative(next, f);
    }
    if (next.empty()) return false;
    states.swap(next);
  }
  return true;
}

bool JsonSchemaPrefix::feed(std::string_view bytes) {
  std::vector<State> next = states_;
  if (!advance(next, bytes)) return false;
  states_ = std::move(next);
  return true;
}

bool JsonSchemaPrefix::accepts(std::string_view bytes) const {
  // The alternatives are independent: the bytes are taken where one of them takes them.
  return std::any_of(states_.begin(), states_.end(),
                     [&](const State& s) { return state_accepts(s, bytes); });
}

bool JsonSchemaPrefix::state_accepts(const State& s, std::string_view bytes) const {
  State next;  // stepped in place until a choice forks it
  copy_state(s, &next);
  thread_local Forks forks;
  forks.clear();
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (!step(next, static_cast<unsigned char>(bytes[i]), &forks)) return false;
    if (!forks.empty()) {
      std::vector<State> all;
      add_alternative(all, next);
      for (const State& f : forks) add_alternative(all, f);
      return advance(all, bytes.substr(i + 1));
    }
  }
  return true;
}

bool JsonSchemaPrefix::state_complete(const State& s) const {
  if (!s.syntax.complete()) return false;
  // A top-level number is complete before the byte that ends it; an enum's must be whole.
  if (s.active == Active::kEnum) {
    return schema_->node(s.enum_node).enum_texts[s.lo].size() == s.offset;
  }
  if (s.active == Active::kNumber) return number_within(s);
  return true;
}

bool JsonSchemaPrefix::complete() const {
  return std::any_of(states_.begin(), states_.end(),
                     [&](const State& s) { return state_complete(s); });
}

bool JsonSchemaPrefix::must_end() const {
  if (!complete()) return false;
  Forks forks;
  for (const State& s : states_) {
    if (s.syntax.mode_ == Mode::kAfterValue) continue;  // whitespace only, at the top
    for (int b = 0; b < 256; ++b) {  // a top-level number (or an enum's): may a byte go on?
      const auto byte = static_cast<unsigned char>(b);
      State next;
      copy_state(s, &next);
      forks.clear();
      if (!is_whitespace(byte) && step(next, byte, &forks)) return false;
    }
  }
  return true;
}

std::optional<uint32_t> JsonSchemaPrefix::string_room() const {
  // Alternatives: a plain piece is taken where one of them has room for it.
  std::optional<uint32_t> most;
  for (const State& s : states_) {
    const std::optional<uint32_t> room = state_string_room(s);
    if (!room.has_value()) return std::nullopt;
    most = std::max(most.value_or(0), *room);
  }
  return most;
}

std::optional<uint32_t> JsonSchemaPrefix::state_string_room(const State& s) const {
  if (s.syntax.mode_ != Mode::kString) return std::nullopt;
  if (s.active == Active::kString) {
    if (schema_->node(s.string_node).pattern != nullptr) return std::nullopt;
    const uint32_t most = schema_->node(s.string_node).max_length;
    return most == JsonSchema::kUnbounded ? most : most - s.string_length;
  }
  if (s.active == Active::kKey) {
    const Frame& top = s.frames[s.num_frames - 1];
    if (schema_->node(top.node).properties.empty() && additional_allowed(top)) {
      return JsonSchema::kUnbounded;
    }
  }
  return std::nullopt;
}

bool JsonSchemaPrefix::only_required_keys(const Frame& frame) const {
  const Node& node = schema_->node(frame.node);
  if (node.max_properties == JsonSchema::kUnbounded) return false;
  const auto missing = static_cast<uint32_t>(std::popcount(node.required & ~frame.seen));
  return node.max_properties - frame.count <= missing;
}

bool JsonSchemaPrefix::additional_allowed(const Frame& frame) const {
  return schema_->node(frame.node).additional != JsonSchema::kNoNode && !only_required_keys(frame);
}

bool JsonSchemaPrefix::property_available(const Frame& frame, uint32_t index) const {
  const Node& node = schema_->node(frame.node);
  if (((frame.seen >> index) & 1) != 0 || node.properties[index].node == JsonSchema::kNoNode) {
    return false;
  }
  return ((node.required >> index) & 1) != 0 || !only_required_keys(frame);
}

bool JsonSchemaPrefix::can_take_key(const Frame& frame) const {
  const Node& node = schema_->node(frame.node);
  if (frame.count >= node.max_properties) return false;
  if (additional_allowed(frame)) return true;
  for (uint32_t i = 0; i < node.properties.size(); ++i) {
    if (property_available(frame, i)) return true;
  }
  return false;
}

// Applies one byte to `s`; on false `s` is garbage (callers step a copy).
bool JsonSchemaPrefix::step(State& s, unsigned char byte, Forks* forks) const {
  const Mode before = s.syntax.mode_;
  const bool in_key = s.syntax.string_is_key_;
  const int32_t depth_before = s.syntax.depth_;
  if (!s.syntax.step(byte)) return false;
  if (s.active == Active::kEnum) return step_enum(s, byte, before, depth_before, forks);
  if (before >= Mode::kNumberMinus) {
    if (s.syntax.mode_ >= Mode::kNumberMinus) {
      if (!s.integer_only) {
        if (!schema_->node(s.number_node).has_decimal_bounds) return true;
        if (byte == 'e' || byte == 'E') return false;  // bounded numbers have no exponent
        if (byte == '.') {
          s.number_fraction = true;
        } else if (s.number_fraction) {
          s.fraction_nonzero = s.fraction_nonzero || byte != '0';
          ++s.fraction_digits;
        } else {
          s.number_value = s.number_value * 10 + static_cast<uint64_t>(byte - '0');
          ++s.number_digits;
        }
        return decimal_can_reach(s);
      }
      if (byte < '0' || byte > '9') return false;  // no fraction, no exponent
      if (s.number_digits >= 19) return !schema_->node(s.number_node).has_integer_bounds;
      s.number_value = s.number_value * 10 + static_cast<uint64_t>(byte - '0');
      ++s.number_digits;
      return integer_can_reach(s);
    }
    if (!number_within(s)) return false;  // the number ended before this byte
    s.active = Active::kNone;
    return step_between_tokens(s, byte, Mode::kAfterValue, forks);
  }
  if (before == Mode::kLiteral) return true;  // its type was checked at its first byte
  if (before >= Mode::kString) {              // the modes inside a string
    if (in_key) return step_key(s, byte, before);
    const Node& node = schema_->node(s.string_node);
    if (node.pattern != nullptr) return step_pattern_string(s, byte, before, *node.pattern);
    if (before != Mode::kString) return true;  // inside an escape or a UTF-8 character
    if (byte == '"') {
      s.active = Active::kNone;
      return s.string_length >= node.min_length;
    }
    if (s.string_length >= node.max_length) return false;  // a character begins
    ++s.string_length;
    return true;
  }
  return step_between_tokens(s, byte, before, forks);
}

bool JsonSchemaPrefix::step_between_tokens(State& s, unsigned char byte, Mode before,
                                           Forks* forks) const {
  if (is_whitespace(byte)) return true;
  Frame* top = s.num_frames > 0 ? &s.frames[s.num_frames - 1] : nullptr;
  const auto close_object = [&] {
    const Node& node = schema_->node(top->node);
    --s.num_frames;
    return (top->seen & node.required) == node.required && top->count >= node.min_properties;
  };
  const auto close_array = [&] {
    const Node& node = schema_->node(top->node);
    --s.num_frames;
    return top->count >= node.min_items;
  };
  switch (before) {
    case Mode::kBeforeTopValue:
    case Mode::kBeforeValue:
      return begin_value(s, byte, forks);
    case Mode::kBeforeValueOrClose:
      return byte == ']' ? close_array() : begin_value(s, byte, forks);
    case Mode::kBeforeKey:
    case Mode::kBeforeKeyOrClose:
      if (byte == '}') return close_object();
      if (!can_take_key(*top)) return false;  // byte is '"'
      s.active = Active::kKey;
      s.lo = 0;
      s.hi = static_cast<uint32_t>(schema_->node(top->node).properties.size());
      s.offset = 0;
      return true;
    case Mode::kBeforeColon:
      return true;  // ':'
    case Mode::kAfterValue:
      if (byte == '}') return close_object();
      if (byte == ']') return close_array();
      // ',': another key, or another item
      if ((s.syntax.object_bits_ >> (s.num_frames - 1) & 1) != 0) return can_take_key(*top);
      return schema_->item_node(top->node, top->count) != JsonSchema::kNoNode;
    default:
      return false;
  }
}

bool JsonSchemaPrefix::begin_value(State& s, unsigned char byte, Forks* forks) const {
  int32_t node = schema_->root();
  const uint8_t type = json_type_of_first_byte(byte);
  if (s.num_frames > 0) {
    Frame& top = s.frames[s.num_frames - 1];
    if ((s.syntax.object_bits_ >> (s.num_frames - 1) & 1) != 0) {
      node = s.value_node;
      s.value_node = JsonSchema::kNoNode;  // used: states between values compare equal
    } else {
      node = schema_->item_node(top.node, top.count);
      ++top.count;
    }
  }
  node = schema_->node_for_type(node, type);
  if (node == JsonSchema::kNoNode) return false;
  const std::vector<int32_t>& choices = schema_->node(node).choices;
  if (choices.empty()) return begin_node(s, byte, node);
  // A choice: the first branch the byte can begin continues in `s`, the others in `forks`.
  State before;
  copy_state(s, &before);
  bool begun = false;
  for (const int32_t choice : choices) {
    State& t = begun ? (forks->emplace_back(), forks->back()) : s;
    if (begun) copy_state(before, &t);
    if (begin_node(t, byte, choice)) {
      begun = true;
    } else if (begun) {
      forks->pop_back();
    } else {
      copy_state(before, &s);
    }
  }
  return begun;
}

bool JsonSchemaPrefix::begin_node(State& s, unsigned char byte, int32_t node) const {
  const uint8_t type = json_type_of_first_byte(byte);
  const bool opens = type == kJsonObjectBit || type == kJsonArrayBit;
  const Node& n = schema_->node(node);
  if (n.has_enum) {
    const auto [lo, hi] = narrow(0, static_cast<uint32_t>(n.enum_texts.size()), 0, byte,
                                 [&](uint32_t i) -> const std::string& { return n.enum_texts[i]; });
    if (lo == hi) return false;
    s.active = Active::kEnum;
    s.enum_node = node;
    s.lo = lo;
    s.hi = hi;
    s.offset = 1;
    s.enum_depth = s.syntax.depth_ - (opens ? 1 : 0);
    return true;
  }
  if (opens) {
    if (s.num_frames >= kMaxDepth) return false;
    s.frames[s.num_frames++] = Frame{node, 0, 0};
    s.active = Active::kNone;
  } else if (type == kJsonStringBit) {
    s.active = Active::kString;
    s.string_node = node;
    s.string_length = 0;
    s.pattern_state = n.pattern != nullptr ? n.pattern->start() : StringPattern::kDead;
    s.pattern_bytes_left = 0;
  } else if (type == kJsonNumberBit) {
    s.active = Active::kNumber;
    s.integer_only = n.integer_only;
    s.number_node = node;
    s.number_negative = byte == '-';
    s.number_digits = byte == '-' ? 0 : 1;
    s.number_value = byte == '-' ? 0 : static_cast<uint64_t>(byte - '0');
    s.number_fraction = false;
    s.fraction_nonzero = false;
    s.fraction_digits = 0;
    return n.integer_only ? integer_can_reach(s) : decimal_can_reach(s);
  } else {
    s.active = Active::kNone;  // true, false, null: the grammar checks the rest
  }
  return true;
}

bool JsonSchemaPrefix::step_key(State& s, unsigned char byte, Mode before) const {
  Frame& top = s.frames[s.num_frames - 1];
  const Node& node = schema_->node(top.node);
  if (before == Mode::kString && byte == '"') return end_key(s);
  // Keys are matched as written: an escape could spell a known name another way.
  if (before == Mode::kString && byte == '\\') return node.properties.empty();
  if (s.lo < s.hi) {
    const auto [lo, hi] = narrow(s.lo, s.hi, s.offset, byte, [&](uint32_t i) -> const std::string& {
      return node.properties[i].name;
    });
    s.lo = lo;
    s.hi = hi;
  }
  ++s.offset;
  if (additional_allowed(top)) return true;
  for (uint32_t i = s.lo; i < s.hi; ++i) {
    if (property_available(top, i)) return true;
  }
  return false;
}

bool JsonSchemaPrefix::end_key(State& s) const {
  Frame& top = s.frames[s.num_frames - 1];
  const Node& node = schema_->node(top.node);
  s.active = Active::kNone;
  if (s.lo < s.hi && node.properties[s.lo].name.size() == s.offset) {
    if (!property_available(top, s.lo)) return false;  // a duplicate, or a property never allowed
    top.seen |= uint64_t{1} << s.lo;
    ++top.count;
    s.value_node = node.properties[s.lo].node;
    return true;
  }
  if (!additional_allowed(top)) return false;
  ++top.count;
  s.value_node = node.additional;
  return true;
}

bool JsonSchemaPrefix::step_enum(State& s, unsigned char byte, Mode before, int32_t depth_before,
                                 Forks* forks) const {
  const Node& node = schema_->node(s.enum_node);
  const auto whole = [&] { return node.enum_texts[s.lo].size() == s.offset; };
  if (before >= Mode::kNumberMinus && s.syntax.mode_ < Mode::kNumberMinus &&
      depth_before == s.enum_depth) {
    if (!whole()) return false;  // the enum's value, a number, ended before this byte
    s.active = Active::kNone;
    return step_between_tokens(s, byte, Mode::kAfterValue, forks);
  }
  const auto [lo, hi] = narrow(s.lo, s.hi, s.offset, byte, [&](uint32_t i) -> const std::string& {
    return node.enum_texts[i];
  });
  if (lo == hi) return false;
  s.lo = lo;
  s.hi = hi;
  ++s.offset;
  if (s.syntax.depth_ == s.enum_depth && s.syntax.mode_ == Mode::kAfterValue) {
    if (!whole()) return false;  // the value ended with this byte
    s.active = Active::kNone;
  }
  return true;
}

}  // namespace cellm
