#include "gguf/gguf_value_reader.h"

#include <vector>

#include "gguf/gguf_text.h"

namespace cellm {
namespace {

// Where a value sits, for messages: the key's value itself or element i of an enclosing place.
// Built on the stack as the reader descends; rendered only when an error is reported.
struct Place {
  uint64_t key_index;
  std::string_view key;
  uint64_t* elements_left;        // the file's array element budget
  const Place* parent = nullptr;  // null: the key's value itself
  uint64_t element = 0;           // index inside the parent array
};

std::string describe(const Place& place) {
  if (place.parent == nullptr) {
    return "the value of key #" + std::to_string(place.key_index) + " " + gguf_quote(place.key);
  }
  std::string out = "element " + std::to_string(place.element);
  for (const Place* p = place.parent; p->parent != nullptr; p = p->parent) {
    out += " of element " + std::to_string(p->element);
  }
  return out + " of key #" + std::to_string(place.key_index) + " " + gguf_quote(place.key);
}

template <typename T>
StatusOr<T> read_scalar(GgufCursor& cursor, const Place& place) {
  T value;
  if (!cursor.read(&value)) return gguf_truncated(cursor, describe(place));
  return value;
}

StatusOr<GgufValue> read_value(GgufCursor& cursor, uint32_t type_id, const Place& place, int depth);

StatusOr<GgufValue> read_array(GgufCursor& cursor, const Place& place, int depth) {
  if (depth >= kGgufMaxArrayDepth) {
    return data_loss("gguf: arrays nested more than " + std::to_string(kGgufMaxArrayDepth) +
                     " deep at offset " + std::to_string(cursor.offset()) + " in " +
                     describe(place));
  }
  uint32_t element_type_id = 0;
  if (!cursor.read(&element_type_id)) {
    return gguf_truncated(cursor, "the element type of " + describe(place));
  }
  if (!is_gguf_value_type(element_type_id)) {
    return data_loss("gguf: unknown array element type " + std::to_string(element_type_id) +
                     " at offset " + std::to_string(cursor.offset() - 4) + " in " +
                     describe(place));
  }
  const auto element_type = static_cast<GgufValueType>(element_type_id);
  uint64_t count = 0;
  if (!cursor.read(&count))
    return gguf_truncated(cursor, "the element count of " + describe(place));
  // Refuse before allocating: every element needs at least its minimum encoded size.
  if (count > cursor.remaining() / gguf_min_value_bytes(element_type)) {
    return data_loss("gguf: array of " + std::to_string(count) + " " +
                     std::string(gguf_value_type_name(element_type)) + " elements at offset " +
                     std::to_string(cursor.offset() - 8) + " in " + describe(place) +
                     " runs past the end of the file (" + std::to_string(cursor.remaining()) +
                     " bytes left)");
  }
  if (count > *place.elements_left) {
    return resource_exhausted("gguf: array of " + std::to_string(count) + " elements at offset " +
                              std::to_string(cursor.offset() - 8) + " in " + describe(place) +
                              " exceeds cellm's limit of " +
                              std::to_string(kGgufMaxMetadataElements) +
                              " metadata array elements per file");
  }
  *place.elements_left -= count;
  std::vector<GgufValue> elements;
  elements.reserve(count);
  for (uint64_t i = 0; i < count; ++i) {
    const Place element_place{place.key_index, place.key, place.elements_left, &place, i};
    CELLM_ASSIGN_OR_RETURN(GgufValue element,
                           read_value(cursor, element_type_id, element_place, depth + 1));
    elements.push_back(std::move(element));
  }
  return GgufValue::array(element_type, std::move(elements));
}

StatusOr<GgufValue> read_value(GgufCursor& cursor, uint32_t type_id, const Place& place,
                               int depth) {
  switch (static_cast<GgufValueType>(type_id)) {
    case GgufValueType::kUint8: {
      CELLM_ASSIGN_OR_RETURN(uint8_t v, read_scalar<uint8_t>(cursor, place));
      return GgufValue::u8(v);
    }
    case GgufValueType::kInt8: {
      CELLM_ASSIGN_OR_RETURN(int8_t v, read_scalar<int8_t>(cursor, place));
      return GgufValue::i8(v);
    }
    case GgufValueType::kUint16: {
      CELLM_ASSIGN_OR_RETURN(uint16_t v, read_scalar<uint16_t>(cursor, place));
      return GgufValue::u16(v);
    }
    case GgufValueType::kInt16: {
      CELLM_ASSIGN_OR_RETURN(int16_t v, read_scalar<int16_t>(cursor, place));
      return GgufValue::i16(v);
    }
    case GgufValueType::kUint32: {
      CELLM_ASSIGN_OR_RETURN(uint32_t v, read_scalar<uint32_t>(cursor, place));
      return GgufValue::u32(v);
    }
    case GgufValueType::kInt32: {
      CELLM_ASSIGN_OR_RETURN(int32_t v, read_scalar<int32_t>(cursor, place));
      return GgufValue::i32(v);
    }
    case GgufValueType::kUint64: {
      CELLM_ASSIGN_OR_RETURN(uint64_t v, read_scalar<uint64_t>(cursor, place));
      return GgufValue::u64(v);
    }
    case GgufValueType::kInt64: {
      CELLM_ASSIGN_OR_RETURN(int64_t v, read_scalar<int64_t>(cursor, place));
      return GgufValue::i64(v);
    }
    case GgufValueType::kFloat32: {
      CELLM_ASSIGN_OR_RETURN(float v, read_scalar<float>(cursor, place));
      return GgufValue::f32(v);
    }
    case GgufValueType::kFloat64: {
      CELLM_ASSIGN_OR_RETURN(double v, read_scalar<double>(cursor, place));
      return GgufValue::f64(v);
    }
    case GgufValueType::kBool: {
      CELLM_ASSIGN_OR_RETURN(uint8_t v, read_scalar<uint8_t>(cursor, place));
      if (v > 1) {
        return data_loss("gguf: bool byte " + std::to_string(v) + " at offset " +
                         std::to_string(cursor.offset() - 1) + " in " + describe(place) +
                         " is neither 0 nor 1");
      }
      return GgufValue::boolean(v == 1);
    }
    case GgufValueType::kString: {
      CELLM_ASSIGN_OR_RETURN(std::string_view text,
                             read_gguf_string(cursor, [&] { return describe(place); }));
      return GgufValue::string(std::string(text));
    }
    case GgufValueType::kArray:
      return read_array(cursor, place, depth);
  }
  return data_loss("gguf: unknown value type " + std::to_string(type_id) + " for " +
                   describe(place) + " at offset " + std::to_string(cursor.offset()));
}

}  // namespace

Status gguf_string_past_end(const GgufCursor& cursor, uint64_t length, std::string_view what) {
  return data_loss("gguf: string length " + std::to_string(length) + " at offset " +
                   std::to_string(cursor.offset() - 8) + " (" + std::string(what) +
                   ") runs past the end of the file (" + std::to_string(cursor.remaining()) +
                   " bytes left)");
}

StatusOr<GgufValue> read_gguf_value(GgufCursor& cursor, uint32_t type_id, uint64_t key_index,
                                    std::string_view key, uint64_t* elements_left) {
  return read_value(cursor, type_id, Place{key_index, key, elements_left}, 0);
}

}  // namespace cellm
