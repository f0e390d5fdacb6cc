// GgufValue: construction, conversions, equality and the short rendering `cellm inspect` prints;
// the value-type facts of gguf_format.h.
#include <bit>
#include <charconv>
#include <limits>

#include "gguf/gguf_file.h"
#include "gguf/gguf_format.h"
#include "gguf/gguf_text.h"

namespace cellm {
namespace {

template <typename T>
std::string shortest(T value) {
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, result.ptr);
}

// "strings", "arrays", "bools", or "u32 values": the noun for an array's elements.
std::string element_noun(GgufValueType type) {
  switch (type) {
    case GgufValueType::kString:
      return "strings";
    case GgufValueType::kArray:
      return "arrays";
    case GgufValueType::kBool:
      return "bools";
    default:
      return std::string(gguf_value_type_name(type)) + " values";
  }
}

}  // namespace

std::string_view gguf_value_type_name(GgufValueType type) {
  switch (type) {
    case GgufValueType::kUint8:
      return "u8";
    case GgufValueType::kInt8:
      return "i8";
    case GgufValueType::kUint16:
      return "u16";
    case GgufValueType::kInt16:
      return "i16";
    case GgufValueType::kUint32:
      return "u32";
    case GgufValueType::kInt32:
      return "i32";
    case GgufValueType::kFloat32:
      return "f32";
    case GgufValueType::kBool:
      return "bool";
    case GgufValueType::kString:
      return "string";
    case GgufValueType::kArray:
      return "array";
    case GgufValueType::kUint64:
      return "u64";
    case GgufValueType::kInt64:
      return "i64";
    case GgufValueType::kFloat64:
      return "f64";
  }
  return "unknown";
}

bool is_gguf_value_type(uint32_t type_id) {
  return type_id <= static_cast<uint32_t>(GgufValueType::kFloat64);
}

uint64_t gguf_min_value_bytes(GgufValueType type) {
  switch (type) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kBool:
      return 1;
    case GgufValueType::kUint16:
    case GgufValueType::kInt16:
      return 2;
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kFloat32:
      return 4;
    case GgufValueType::kUint64:
    case GgufValueType::kInt64:
    case GgufValueType::kFloat64:
    case GgufValueType::kString:
      return 8;
    case GgufValueType::kArray:
      return 12;
  }
  return 1;
}

bool is_gguf_unsigned_type(GgufValueType type) {
  return type == GgufValueType::kUint8 || type == GgufValueType::kUint16 ||
         type == GgufValueType::kUint32 || type == GgufValueType::kUint64;
}

bool is_gguf_signed_type(GgufValueType type) {
  return type == GgufValueType::kInt8 || type == GgufValueType::kInt16 ||
         type == GgufValueType::kInt32 || type == GgufValueType::kInt64;
}

bool is_gguf_float_type(GgufValueType type) {
  return type == GgufValueType::kFloat32 || type == GgufValueType::kFloat64;
}

GgufValue GgufValue::u8(uint8_t v) { return make(GgufValueType::kUint8, uint64_t{v}); }
GgufValue GgufValue::i8(int8_t v) { return make(GgufValueType::kInt8, int64_t{v}); }
GgufValue GgufValue::u16(uint16_t v) { return make(GgufValueType::kUint16, uint64_t{v}); }
GgufValue GgufValue::i16(int16_t v) { return make(GgufValueType::kInt16, int64_t{v}); }
GgufValue GgufValue::u32(uint32_t v) { return make(GgufValueType::kUint32, uint64_t{v}); }
GgufValue GgufValue::i32(int32_t v) { return make(GgufValueType::kInt32, int64_t{v}); }
GgufValue GgufValue::u64(uint64_t v) { return make(GgufValueType::kUint64, v); }
GgufValue GgufValue::i64(int64_t v) { return make(GgufValueType::kInt64, v); }
GgufValue GgufValue::f32(float v) { return make(GgufValueType::kFloat32, double{v}); }
GgufValue GgufValue::f64(double v) { return make(GgufValueType::kFloat64, v); }
GgufValue GgufValue::boolean(bool v) { return make(GgufValueType::kBool, v); }
GgufValue GgufValue::string(std::string v) { return make(GgufValueType::kString, std::move(v)); }

GgufValue GgufValue::array(GgufValueType element_type, std::vector<GgufValue> elements) {
  for (const GgufValue& element : elements) {
    CELLM_CHECK(element.type() == element_type)
        << "GgufValue::array of " << gguf_value_type_name(element_type) << " given a "
        << gguf_value_type_name(element.type()) << " element";
  }
  auto array = std::make_shared<Array>();
  array->element_type = element_type;
  array->elements = std::move(elements);
  return make(GgufValueType::kArray, std::shared_ptr<const Array>(std::move(array)));
}

std::optional<uint64_t> GgufValue::as_u64() const {
  if (is_gguf_unsigned_type(type_)) return std::get<uint64_t>(data_);
  if (is_gguf_signed_type(type_)) {
    const int64_t v = std::get<int64_t>(data_);
    if (v >= 0) return static_cast<uint64_t>(v);
  }
  return std::nullopt;
}

std::optional<int64_t> GgufValue::as_i64() const {
  if (is_gguf_signed_type(type_)) return std::get<int64_t>(data_);
  if (is_gguf_unsigned_type(type_)) {
    const uint64_t v = std::get<uint64_t>(data_);
    if (v <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return static_cast<int64_t>(v);
    }
  }
  return std::nullopt;
}

std::optional<double> GgufValue::as_f64() const {
  if (is_gguf_float_type(type_)) {
    return std::get<double>(data_);
  }
  return std::nullopt;
}

std::optional<bool> GgufValue::as_bool() const {
  if (type_ == GgufValueType::kBool) return std::get<bool>(data_);
  return std::nullopt;
}

const std::string* GgufValue::as_string() const { return std::get_if<std::string>(&data_); }

const GgufValue::Array* GgufValue::as_array() const {
  const auto* array = std::get_if<std::shared_ptr<const Array>>(&data_);
  return array == nullptr ? nullptr : array->get();
}

std::string GgufValue::summary(size_t max_elements) const {
  switch (type_) {
    case GgufValueType::kFloat32:
      return shortest(static_cast<float>(std::get<double>(data_)));
    case GgufValueType::kFloat64:
      return shortest(std::get<double>(data_));
    case GgufValueType::kBool:
      return std::get<bool>(data_) ? "true" : "false";
    case GgufValueType::kString:
      return gguf_quote(std::get<std::string>(data_));
    case GgufValueType::kArray: {
      const Array& array = *as_array();
      std::string out =
          "[" + std::to_string(array.elements.size()) + " " + element_noun(array.element_type);
      const size_t shown = std::min(max_elements, array.elements.size());
      for (size_t i = 0; i < shown; ++i) {
        out += i == 0 ? ": " : ", ";
        // Nested arrays show fewer elements so one line stays one line.
        out += array.elements[i].summary(std::min<size_t>(max_elements, 3));
      }
      if (shown < array.elements.size()) out += shown == 0 ? ": ..." : ", ...";
      return out + "]";
    }
    default:
      return is_gguf_signed_type(type_) ? std::to_string(std::get<int64_t>(data_))
                                        : std::to_string(std::get<uint64_t>(data_));
  }
}

bool operator==(const GgufValue& a, const GgufValue& b) {
  if (a.type_ != b.type_) return false;
  if (is_gguf_float_type(a.type_)) {
    // Bitwise, so NaNs and signed zeros compare as the bytes they were written from.
    return std::bit_cast<uint64_t>(std::get<double>(a.data_)) ==
           std::bit_cast<uint64_t>(std::get<double>(b.data_));
  }
  if (a.type_ == GgufValueType::kArray) {
    const GgufValue::Array& x = *a.as_array();
    const GgufValue::Array& y = *b.as_array();
    return x.element_type == y.element_type && x.elements == y.elements;
  }
  return a.data_ == b.data_;
}

}  // namespace cellm
