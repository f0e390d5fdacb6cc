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
    : owner_(std::move(schema)), schema_(owner_.get()) {
  CELLM_CHECK(schema_ != nullptr) << "a JSON schema walker needs a schema";
  static_assert(std::is_trivially_copyable_v<State>);
  state_.syntax = JsonPrefix(/*object_only=*/false, max_whitespace_run);
  state_.active = Active::kNone;
  state_.integer_only = false;
  state_.number_negative = false;
  state_.number_digits = 0;
  state_.number_value = 0;
  state_.number_node = JsonSchema::kNoNode;
  state_.number_fraction = false;
  state_.fraction_nonzero = false;
  state_.fraction_digits = 0;
  state_.value_node = JsonSchema::kNoNode;
  state_.string_node = JsonSchema::kNoNode;
  state_.string_length = 0;
  state_.pattern_state = StringPattern::kDead;
  state_.pattern_code_point = 0;
  state_.pattern_bytes_left = 0;
  state_.lo = state_.hi = state_.offset = 0;
  state_.enum_node = JsonSchema::kNoNode;
  state_.enum_depth = 0;
  state_.num_frames = 0;
}

JsonSchemaPrefix::JsonSchemaPrefix(const JsonSchemaPrefix& other)
    : owner_(other.owner_), schema_(other.schema_) {
  copy_state(other.state_, &state_);
}

JsonSchemaPrefix& JsonSchemaPrefix::operator=(const JsonSchemaPrefix& other) {
  if (this == &other) return *this;
  owner_ = other.owner_;
  schema_ = other.schema_;
  copy_state(other.state_, &state_);
  return *this;
}

// The header and the open frames only: most states use a few of kMaxDepth frames.
void JsonSchemaPrefix::copy_state(const State& from, State* to) {
  std::memcpy(static_cast<void*>(to), &from, offsetof(State, frames));
  // A loop, not a memcpy of a run-time size: a mask copies a state per token checked, most with
  // a frame or two.
  for (int32_t i = 0; i < from.num_frames; ++i) to->frames[i] = from.frames[i];
}

bool JsonSchemaPrefix::feed(std::string_view bytes) {
  State next;
  copy_state(state_, &next);
  for (char c : bytes) {
    if (!step(next, static_cast<unsigned char>(c))) return false;
  }
  copy_state(next, &state_);
  return true;
}

bool JsonSchemaPrefix::accepts(std::string_view bytes) const {
  State next;
  copy_state(state_, &next);
  for (char c : bytes) {
    if (!step(next, static_cast<unsigned char>(c))) return false;
  }
  return true;
}

bool JsonSchemaPrefix::complete() const {
  if (!state_.syntax.complete()) return false;
  // A top-level number is complete before the byte that ends it; an enum's must be whole.
  if (state_.active == Active::kEnum) {
    return schema_->node(state_.enum_node).enum_texts[state_.lo].size() == state_.offset;
  }
  if (state_.active == Active::kNumber) return number_within(state_);
  return true;
}

bool JsonSchemaPrefix::must_end() const {
  if (!complete()) return false;
  if (state_.syntax.mode_ == Mode::kAfterValue) return true;  // whitespace only, at the top
  for (int b = 0; b < 256; ++b) {  // a top-level number (or an enum's): may a byte go on?
    const auto byte = static_cast<unsigned char>(b);
    State next;
    copy_state(state_, &next);
    if (!is_whitespace(byte) && step(next, byte)) return false;
  }
  return true;
}

std::optional<uint32_t> JsonSchemaPrefix::string_room() const {
  if (state_.syntax.mode_ != Mode::kString) return std::nullopt;
  if (state_.active == Active::kString) {
    if (schema_->node(state_.string_node).pattern != nullptr) return std::nullopt;
    const uint32_t most = schema_->node(state_.string_node).max_length;
    return most == JsonSchema::kUnbounded ? most : most - state_.string_length;
  }
  if (state_.active == Active::kKey) {
    const Frame& top = state_.frames[state_.num_frames - 1];
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
bool JsonSchemaPrefix::step(State& s, unsigned char byte) const {
  const Mode before = s.syntax.mode_;
  const bool in_key = s.syntax.string_is_key_;
  const int32_t depth_before = s.syntax.depth_;
  if (!s.syntax.step(byte)) return false;
  if (s.active == Active::kEnum) return step_enum(s, byte, before, depth_before);
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
    return step_between_tokens(s, byte, Mode::kAfterValue);
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
  return step_between_tokens(s, byte, before);
}

bool JsonSchemaPrefix::step_between_tokens(State& s, unsigned char byte, Mode before) const {
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
      return begin_value(s, byte);
    case Mode::kBeforeValueOrClose:
      return byte == ']' ? close_array() : begin_value(s, byte);
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

bool JsonSchemaPrefix::begin_value(State& s, unsigned char byte) const {
  int32_t node = schema_->root();
  const uint8_t type = json_type_of_first_byte(byte);
  const bool opens = type == kJsonObjectBit || type == kJsonArrayBit;
  if (s.num_frames > 0) {
    Frame& top = s.frames[s.num_frames - 1];
    if ((s.syntax.object_bits_ >> (s.num_frames - 1) & 1) != 0) {
      node = s.value_node;
    } else {
      node = schema_->item_node(top.node, top.count);
      ++top.count;
    }
  }
  node = schema_->node_for_type(node, type);
  if (node == JsonSchema::kNoNode) return false;
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

bool JsonSchemaPrefix::step_enum(State& s, unsigned char byte, Mode before,
                                 int32_t depth_before) const {
  const Node& node = schema_->node(s.enum_node);
  const auto whole = [&] { return node.enum_texts[s.lo].size() == s.offset; };
  if (before >= Mode::kNumberMinus && s.syntax.mode_ < Mode::kNumberMinus &&
      depth_before == s.enum_depth) {
    if (!whole()) return false;  // the enum's value, a number, ended before this byte
    s.active = Active::kNone;
    return step_between_tokens(s, byte, Mode::kAfterValue);
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
