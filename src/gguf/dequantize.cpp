#include "gguf/dequantize.h"

#include <algorithm>
#include <string>

#include "gguf/dequantize_kernels.h"

namespace cellm {
namespace {

constexpr size_t kNumLanes = 8;         // partial sums of dot_row / dot_f32
constexpr size_t kChunkElements = 256;  // dot_row's stack buffer: a multiple of every block size

using LaneSums = float[kNumLanes];

// Adds w[i] * x[i] to lane i % 8 for i < count; the caller's first element is on lane 0.
inline void accumulate(LaneSums& sums, const float* w, const float* x, size_t count) {
  size_t i = 0;
  for (; i + kNumLanes <= count; i += kNumLanes) {
    for (size_t lane = 0; lane < kNumLanes; ++lane) sums[lane] += w[i + lane] * x[i + lane];
  }
  for (size_t lane = 0; i + lane < count; ++lane) sums[lane] += w[i + lane] * x[i + lane];
}

inline float reduce(const LaneSums& s) {
  return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

std::string type_label(TensorType type) {
  const auto traits = tensor_type_traits(static_cast<uint32_t>(type));
  if (traits) return std::string(traits->name);
  return "tensor type id " + std::to_string(static_cast<uint32_t>(type));
}

}  // namespace

bool can_dequantize(TensorType type) { return internal::dequantize_kernel(type) != nullptr; }

Status check_row(TensorType type, size_t num_bytes, size_t num_elements) {
  if (!can_dequantize(type)) {
    return unimplemented("cannot dequantize " + type_label(type) + " (no reference kernel)");
  }
  CELLM_ASSIGN_OR_RETURN(const uint64_t expected_bytes, row_size_bytes(type, num_elements));
  if (expected_bytes != num_bytes) {
    return invalid_argument("a " + type_label(type) + " row of " + std::to_string(num_elements) +
                            " elements is " + std::to_string(expected_bytes) + " bytes, got " +
                            std::to_string(num_bytes));
  }
  return ok_status();
}

Status dequantize_row(TensorType type, std::span<const uint8_t> src, std::span<float> dst) {
  CELLM_RETURN_IF_ERROR(check_row(type, src.size(), dst.size()));
  if (dst.empty()) return ok_status();  // spans of nothing may hold null pointers
  const uint32_t block_size = tensor_type_traits(type).block_size;
  internal::dequantize_kernel(type)(src.data(), dst.size() / block_size, dst.data());
  return ok_status();
}

StatusOr<std::vector<float>> dequantize_tensor(TensorType type, std::span<const uint8_t> data,
                                               uint64_t num_elements) {
  if (num_elements > SIZE_MAX / sizeof(float)) {
    return out_of_range("a tensor of " + std::to_string(num_elements) +
                        " elements does not fit in memory");
  }
  // check_row ties num_elements to data.size(), so the allocation is bounded by the data.
  CELLM_RETURN_IF_ERROR(check_row(type, data.size(), static_cast<size_t>(num_elements)));
  std::vector<float> values(static_cast<size_t>(num_elements));  // [num_elements], f32
  if (values.empty()) return values;
  const uint32_t block_size = tensor_type_traits(type).block_size;
  internal::dequantize_kernel(type)(data.data(), values.size() / block_size, values.data());
  return values;
}

float dot_f32(std::span<const float> a, std::span<const float> b) {
  CELLM_CHECK_EQ(a.size(), b.size()) << "dot_f32 of spans of different lengths";
  LaneSums sums = {};
  accumulate(sums, a.data(), b.data(), a.size());
  return reduce(sums);
}

float dot_row(TensorType type, std::span<const uint8_t> row, const float* x, size_t n) {
  const internal::DequantizeKernel kernel = internal::dequantize_kernel(type);
  CELLM_CHECK(kernel != nullptr) << "dot_row of " << type_label(type)
                                 << ", which cannot be dequantized";
  const TensorTypeTraits& traits = tensor_type_traits(type);
  CELLM_CHECK(n % traits.block_size == 0 &&
              n / traits.block_size * traits.block_bytes == row.size())
      << "dot_row: " << row.size() << " bytes are not a " << traits.name << " row of " << n
      << " elements";
  float weights[kChunkElements];  // one chunk of the dequantized row, f32
  LaneSums sums = {};
  const uint8_t* src = row.data();
  for (size_t start = 0; start < n; start += kChunkElements) {
    // Every chunk but the last is kChunkElements long, so lanes stay aligned to i % 8.
    const size_t count = std::min(kChunkElements, n - start);
    const size_t num_blocks = count / traits.block_size;
    kernel(src, num_blocks, weights);
    src += num_blocks * traits.block_bytes;
    accumulate(sums, weights, x + start, count);
  }
  return reduce(sums);
}

}  // namespace cellm
