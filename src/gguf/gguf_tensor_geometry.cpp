#include "gguf/gguf_tensor_geometry.h"

namespace cellm {

StatusOr<TensorGeometry> tensor_geometry(TensorType type, std::span<const uint64_t> dims) {
  if (dims.empty()) return invalid_argument("has no dims (GGUF tensors have 1 to 4)");
  if (dims.size() > kGgufMaxDims) {
    return invalid_argument("has " + std::to_string(dims.size()) + " dims (at most " +
                            std::to_string(kGgufMaxDims) + ")");
  }
  bool any_zero = false;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] > kGgufMaxDim) {
      return invalid_argument("dim " + std::to_string(i) + " is " + std::to_string(dims[i]) +
                              ", above 2^63-1");
    }
    any_zero = any_zero || dims[i] == 0;
  }
  StatusOr<uint64_t> row_bytes = row_size_bytes(type, dims[0]);
  if (!row_bytes.ok()) return invalid_argument(row_bytes.status().message());
  if (any_zero) return TensorGeometry{0, 0};  // an empty tensor, whatever the other dims
  uint64_t num_elements = 1;
  for (const uint64_t dim : dims) {
    if (num_elements > kGgufMaxDim / dim) {
      return invalid_argument("shape " + gguf_shape_string(dims) +
                              " has more than 2^63-1 elements");
    }
    num_elements *= dim;
  }
  const uint64_t num_rows = num_elements / dims[0];
  if (*row_bytes > kGgufMaxDim / num_rows) {
    return invalid_argument("shape " + gguf_shape_string(dims) + " of type " +
                            std::string(tensor_type_name(type)) + " is more than 2^63-1 bytes");
  }
  return TensorGeometry{num_elements, num_rows * *row_bytes};
}

std::string gguf_shape_string(std::span<const uint64_t> dims) {
  std::string out;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i > 0) out += 'x';
    out += std::to_string(dims[i]);
  }
  return out;
}

}  // namespace cellm
