// GgufFile: typed metadata getters. Integers convert between widths when the value fits;
// floats accept f32 or f64; every refusal names the key, its actual type and the expected one.
#include <cmath>
#include <limits>

#include "gguf/gguf_file.h"
#include "gguf/gguf_format.h"
#include "gguf/gguf_text.h"

namespace cellm {
namespace {

// "u32", or "array of string" for arrays.
std::string type_text(const GgufValue& value) {
  if (const GgufValue::Array* array = value.as_array()) {
    return "array of " + std::string(gguf_value_type_name(array->element_type));
  }
  return std::string(gguf_value_type_name(value.type()));
}

bool is_integer_type(GgufValueType type) {
  return is_gguf_unsigned_type(type) || is_gguf_signed_type(type);
}

template <typename T>
std::optional<T> fit_integer(const GgufValue& value) {
  if constexpr (std::is_unsigned_v<T>) {
    const std::optional<uint64_t> v = value.as_u64();
    if (v && *v <= std::numeric_limits<T>::max()) return static_cast<T>(*v);
  } else {
    const std::optional<int64_t> v = value.as_i64();
    if (v && *v >= std::numeric_limits<T>::min() && *v <= std::numeric_limits<T>::max()) {
      return static_cast<T>(*v);
    }
  }
  return std::nullopt;
}

// f32 or f64 narrowed to float; nullopt for finite values beyond float's range.
std::optional<float> fit_float(const GgufValue& value) {
  const double v = *value.as_f64();
  if (std::isfinite(v) && std::fabs(v) > std::numeric_limits<float>::max()) return std::nullopt;
  return static_cast<float>(v);
}

// "<path>: gguf: key 'k' <problem>" (the path only when the file was opened from one).
Status key_error(const GgufFile& file, StatusCode code, std::string_view key,
                 const std::string& problem) {
  std::string message = file.path().empty() ? "" : file.path() + ": ";
  message += "gguf: key " + gguf_quote(key, 128) + " " + problem;
  return Status(code, std::move(message));
}

StatusOr<const GgufValue*> lookup(const GgufFile& file, std::string_view key) {
  const GgufValue* value = file.find(key);
  if (value == nullptr) return key_error(file, StatusCode::kNotFound, key, "not found");
  return value;
}

Status wrong_type(const GgufFile& file, std::string_view key, const GgufValue& value,
                  std::string_view expected) {
  return key_error(file, StatusCode::kDataLoss, key,
                   "has type " + type_text(value) + ", expected " + std::string(expected));
}

// `where` is empty for a scalar, " element 7" for an array element.
Status does_not_fit(const GgufFile& file, std::string_view key, const std::string& where,
                    const GgufValue& value, std::string_view expected) {
  return key_error(file, StatusCode::kDataLoss, key,
                   where + "value " + value.summary() + " (" + type_text(value) +
                       ") does not fit " + std::string(expected));
}

template <typename T>
StatusOr<T> get_integer(const GgufFile& file, std::string_view key, std::string_view expected) {
  CELLM_ASSIGN_OR_RETURN(const GgufValue* value, lookup(file, key));
  if (!is_integer_type(value->type())) return wrong_type(file, key, *value, expected);
  const std::optional<T> fitted = fit_integer<T>(*value);
  if (!fitted) return does_not_fit(file, key, "", *value, expected);
  return *fitted;
}

// The elements of an array of the given kind; `accepts` says which element types qualify.
template <typename Accepts>
StatusOr<const GgufValue::Array*> get_array(const GgufFile& file, std::string_view key,
                                            std::string_view expected, Accepts accepts) {
  CELLM_ASSIGN_OR_RETURN(const GgufValue* value, lookup(file, key));
  const GgufValue::Array* array = value->as_array();
  if (array == nullptr || !accepts(array->element_type)) {
    return wrong_type(file, key, *value, expected);
  }
  return array;
}

template <typename T>
StatusOr<std::vector<T>> get_integer_array(const GgufFile& file, std::string_view key,
                                           std::string_view expected, std::string_view element) {
  CELLM_ASSIGN_OR_RETURN(const GgufValue::Array* array,
                         get_array(file, key, expected, is_integer_type));
  std::vector<T> out;
  out.reserve(array->elements.size());
  for (size_t i = 0; i < array->elements.size(); ++i) {
    const std::optional<T> fitted = fit_integer<T>(array->elements[i]);
    if (!fitted) {
      return does_not_fit(file, key, "element " + std::to_string(i) + " ", array->elements[i],
                          element);
    }
    out.push_back(*fitted);
  }
  return out;
}

}  // namespace

StatusOr<uint32_t> GgufFile::get_u32(std::string_view key) const {
  return get_integer<uint32_t>(*this, key, "u32");
}

StatusOr<uint64_t> GgufFile::get_u64(std::string_view key) const {
  return get_integer<uint64_t>(*this, key, "u64");
}

StatusOr<int32_t> GgufFile::get_i32(std::string_view key) const {
  return get_integer<int32_t>(*this, key, "i32");
}

StatusOr<float> GgufFile::get_f32(std::string_view key) const {
  CELLM_ASSIGN_OR_RETURN(const GgufValue* value, lookup(*this, key));
  if (!is_gguf_float_type(value->type())) return wrong_type(*this, key, *value, "f32");
  const std::optional<float> fitted = fit_float(*value);
  if (!fitted) return does_not_fit(*this, key, "", *value, "f32");
  return *fitted;
}

StatusOr<bool> GgufFile::get_bool(std::string_view key) const {
  CELLM_ASSIGN_OR_RETURN(const GgufValue* value, lookup(*this, key));
  if (value->type() != GgufValueType::kBool) return wrong_type(*this, key, *value, "bool");
  return *value->as_bool();
}

StatusOr<std::string> GgufFile::get_string(std::string_view key) const {
  CELLM_ASSIGN_OR_RETURN(const GgufValue* value, lookup(*this, key));
  if (value->type() != GgufValueType::kString) return wrong_type(*this, key, *value, "string");
  return *value->as_string();
}

StatusOr<std::vector<std::string>> GgufFile::get_string_array(std::string_view key) const {
  CELLM_ASSIGN_OR_RETURN(const GgufValue::Array* array,
                         get_array(*this, key, "array of string", [](GgufValueType type) {
                           return type == GgufValueType::kString;
                         }));
  std::vector<std::string> out;
  out.reserve(array->elements.size());
  for (const GgufValue& element : array->elements) out.push_back(*element.as_string());
  return out;
}

StatusOr<std::vector<float>> GgufFile::get_f32_array(std::string_view key) const {
  CELLM_ASSIGN_OR_RETURN(const GgufValue::Array* array,
                         get_array(*this, key, "array of f32", is_gguf_float_type));
  std::vector<float> out;
  out.reserve(array->elements.size());
  for (size_t i = 0; i < array->elements.size(); ++i) {
    const std::optional<float> fitted = fit_float(array->elements[i]);
    if (!fitted) {
      return does_not_fit(*this, key, "element " + std::to_string(i) + " ", array->elements[i],
                          "f32");
    }
    out.push_back(*fitted);
  }
  return out;
}

StatusOr<std::vector<int32_t>> GgufFile::get_i32_array(std::string_view key) const {
  return get_integer_array<int32_t>(*this, key, "array of i32", "i32");
}

StatusOr<std::vector<uint32_t>> GgufFile::get_u32_array(std::string_view key) const {
  return get_integer_array<uint32_t>(*this, key, "array of u32", "u32");
}

}  // namespace cellm
