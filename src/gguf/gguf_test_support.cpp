#include "gguf/gguf_test_support.h"

#include <algorithm>
#include <unordered_set>

#include "gguf/gguf_writer.h"

namespace cellm::gguf_testing {
namespace {

std::string check_value(const GgufValue& value, int depth) {
  if (depth > 64) return "arrays nested deeper than any valid file allows";
  if (value.summary().empty()) return "empty summary";
  const GgufValue::Array* array = value.as_array();
  if ((value.type() == GgufValueType::kArray) != (array != nullptr)) return "array type mismatch";
  if ((value.type() == GgufValueType::kString) != (value.as_string() != nullptr)) {
    return "string type mismatch";
  }
  if (array == nullptr) return "";
  for (const GgufValue& element : array->elements) {
    if (element.type() != array->element_type) return "array element of the wrong type";
    if (std::string problem = check_value(element, depth + 1); !problem.empty()) return problem;
  }
  return "";
}

std::string check_tensor(const GgufFile& file, const GgufTensorInfo& info,
                         std::span<const uint8_t> bytes) {
  const std::string name = "tensor '" + info.name + "': ";
  if (file.find_tensor(info.name) != &info) return name + "find_tensor does not return it";
  if (info.dims.empty() || info.dims.size() > 4) return name + "dim count outside 1..4";
  const TensorTypeTraits& traits = tensor_type_traits(info.type);
  // A zero dim makes the tensor empty whatever the other dims (which may multiply past 2^64).
  const bool empty = std::find(info.dims.begin(), info.dims.end(), uint64_t{0}) != info.dims.end();
  uint64_t num_elements = empty ? 0 : 1;
  for (size_t d = 0; !empty && d < info.dims.size(); ++d) {
    if (__builtin_mul_overflow(num_elements, info.dims[d], &num_elements)) {
      return name + "element overflow";
    }
  }
  if (num_elements != info.num_elements) return name + "num_elements is not the product of dims";
  if (num_elements > static_cast<uint64_t>(INT64_MAX)) return name + "element count above 2^63";
  if (info.dims[0] % traits.block_size != 0) return name + "row is not whole blocks";
  uint64_t expected_bytes = 0;
  if (__builtin_mul_overflow(num_elements / traits.block_size, uint64_t{traits.block_bytes},
                             &expected_bytes)) {
    return name + "byte size overflow";
  }
  if (expected_bytes != info.size_bytes) return name + "size_bytes disagrees with dims and type";
  if (info.offset_bytes % file.alignment() != 0) return name + "offset not aligned";
  uint64_t begin = 0;
  uint64_t end = 0;
  if (__builtin_add_overflow(file.data_offset_bytes(), info.offset_bytes, &begin) ||
      __builtin_add_overflow(begin, info.size_bytes, &end) || end > bytes.size()) {
    return name + "data outside the bytes";
  }
  const std::span<const uint8_t> data = file.tensor_data(info);
  if (data.size() != info.size_bytes || (!data.empty() && data.data() != bytes.data() + begin)) {
    return name + "tensor_data is not the tensor's bytes";
  }
  return "";
}

GgufValue shrink_value(const GgufValue& value, size_t max_elements) {
  const GgufValue::Array* array = value.as_array();
  if (array == nullptr) return value;
  std::vector<GgufValue> kept;
  for (size_t i = 0; i < array->elements.size() && i < max_elements; ++i) {
    kept.push_back(shrink_value(array->elements[i], max_elements));
  }
  return GgufValue::array(array->element_type, std::move(kept));
}

}  // namespace

std::string check_parsed_file(const GgufFile& file, std::span<const uint8_t> bytes) {
  if (file.version() != 2 && file.version() != 3) return "version is not 2 or 3";
  const uint64_t alignment = file.alignment();
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) return "alignment not a power of 2";
  if (file.data_offset_bytes() > bytes.size()) return "data section starts past the end";
  const bool data_at_end = file.tensors().empty() && file.data_offset_bytes() == bytes.size();
  if (file.data_offset_bytes() % alignment != 0 && !data_at_end) return "data section unaligned";
  std::unordered_set<std::string> keys;
  for (const auto& [key, value] : file.metadata()) {
    if (!keys.insert(key).second) return "duplicate key '" + key + "'";
    if (file.find(key) != &value) return "find('" + key + "') does not return its value";
    if (std::string problem = check_value(value, 0); !problem.empty()) {
      return "key '" + key + "': " + problem;
    }
  }
  if (const GgufValue* a = file.find("general.alignment");
      a != nullptr && a->as_u64() != alignment) {
    return "general.alignment disagrees with alignment()";
  }
  std::vector<const GgufTensorInfo*> by_offset;
  for (const GgufTensorInfo& info : file.tensors()) {
    if (std::string problem = check_tensor(file, info, bytes); !problem.empty()) return problem;
    if (info.size_bytes > 0) by_offset.push_back(&info);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const auto* a, const auto* b) { return a->offset_bytes < b->offset_bytes; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    if (by_offset[i - 1]->offset_bytes + by_offset[i - 1]->size_bytes >
        by_offset[i]->offset_bytes) {
      return "tensors '" + by_offset[i - 1]->name + "' and '" + by_offset[i]->name + "' overlap";
    }
  }
  return "";
}

StatusOr<std::vector<uint8_t>> shrink_gguf(const GgufFile& file, size_t max_array_elements) {
  GgufWriter writer;
  for (const auto& [key, value] : file.metadata()) {
    CELLM_RETURN_IF_ERROR(writer.add_metadata(key, shrink_value(value, max_array_elements)));
  }
  for (const GgufTensorInfo& info : file.tensors()) {
    const std::span<const uint8_t> data = file.tensor_data(info);
    if (info.size_bytes == 0) {  // an empty tensor stays as it is
      CELLM_RETURN_IF_ERROR(writer.add_tensor(info.name, info.type, info.dims, data));
      continue;
    }
    std::vector<uint64_t> dims(info.dims.size(), 1);
    dims[0] = info.dims[0];
    const TensorTypeTraits& traits = tensor_type_traits(info.type);
    const uint64_t row_bytes = info.dims[0] / traits.block_size * traits.block_bytes;
    CELLM_RETURN_IF_ERROR(
        writer.add_tensor(info.name, info.type, std::move(dims), data.first(row_bytes)));
  }
  return writer.write_bytes();
}

}  // namespace cellm::gguf_testing
