#include "gguf/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>
#include <string>

#include "core/float16.h"
#include "gguf/block_formats.h"

namespace cellm {
namespace {

using blocks::kQK;

std::string describe(float value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

// Errors for elements no block scale can represent (first pass: dst stays untouched on error).
Status check_finite(TensorType type, std::span<const float> src) {
  for (size_t i = 0; i < src.size(); ++i) {
    if (!std::isfinite(src[i])) {
      return invalid_argument(std::string(tensor_type_name(type)) + " quantization: element " +
                              std::to_string(i) + " is " + describe(src[i]));
    }
  }
  return ok_status();
}

Status scale_overflow(TensorType type, size_t block, float scale) {
  return out_of_range(std::string(tensor_type_name(type)) + " quantization: block " +
                      std::to_string(block) + " needs scale " + describe(scale) +
                      ", past the f16 range");
}

bool overflows_f16(float value) { return std::isinf(f16_to_f32(f32_to_f16(value))); }

// The Q8_0 scale of one block, as llama.cpp's reference computes it.
float q8_0_scale(const float* x) {
  float amax = 0.0f;
  for (size_t j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
  return amax / 127.0f;
}

// The Q4_0 scale of one block: max / -8, max the first element of largest magnitude.
float q4_0_scale(const float* x) {
  float amax = 0.0f;
  float max = 0.0f;
  for (size_t j = 0; j < kQK; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max / -8.0f;
}

// round(v) clamped to [-127, 127]; only a subnormal scale (whose inverse overflows) can push v
// out of range or make it NaN, and then the stored f16 scale is zero anyway.
int8_t round_q8(float v) {
  if (std::isnan(v)) return 0;
  if (v < -127.0f) return -127;
  if (v > 127.0f) return 127;
  return static_cast<int8_t>(std::round(v));
}

// min(15, trunc(v)) for v = x / d + 8.5 >= 0; out-of-range v only as round_q8 explains.
uint8_t truncate_q4(float v) {
  if (!(v >= 0.0f)) return 0;
  if (v >= 15.0f) return 15;
  return static_cast<uint8_t>(v);
}

void quantize_q8_0(const float* src, size_t num_blocks, uint8_t* dst) {
  for (size_t b = 0; b < num_blocks; ++b, src += kQK, dst += sizeof(blocks::BlockQ8_0)) {
    const float d = q8_0_scale(src);
    const float inverse = d != 0.0f ? 1.0f / d : 0.0f;
    blocks::BlockQ8_0 block;
    block.d = f32_to_f16(d);
    for (size_t j = 0; j < kQK; ++j) block.qs[j] = round_q8(src[j] * inverse);
    std::memcpy(dst, &block, sizeof(block));
  }
}

void quantize_q4_0(const float* src, size_t num_blocks, uint8_t* dst) {
  for (size_t b = 0; b < num_blocks; ++b, src += kQK, dst += sizeof(blocks::BlockQ4_0)) {
    const float d = q4_0_scale(src);
    const float inverse = d != 0.0f ? 1.0f / d : 0.0f;
    blocks::BlockQ4_0 block;
    block.d = f32_to_f16(d);
    for (size_t j = 0; j < kQK / 2; ++j) {
      const uint8_t low = truncate_q4(src[j] * inverse + 8.5f);
      const uint8_t high = truncate_q4(src[j + kQK / 2] * inverse + 8.5f);
      block.qs[j] = static_cast<uint8_t>(low | (high << 4));
    }
    std::memcpy(dst, &block, sizeof(block));
  }
}

// First pass of quantize_row: every way the input can fail, before anything is written.
Status check_values(TensorType type, std::span<const float> src) {
  switch (type) {
    case TensorType::kQ8_0:
    case TensorType::kQ4_0: {
      CELLM_RETURN_IF_ERROR(check_finite(type, src));
      for (size_t b = 0; b < src.size() / kQK; ++b) {
        const float* x = src.data() + b * kQK;
        const float d = type == TensorType::kQ8_0 ? q8_0_scale(x) : q4_0_scale(x);
        if (overflows_f16(d)) return scale_overflow(type, b, d);
      }
      return ok_status();
    }
    case TensorType::kF16:
    case TensorType::kBF16:
      for (size_t i = 0; i < src.size(); ++i) {
        const float back = type == TensorType::kF16 ? f16_to_f32(f32_to_f16(src[i]))
                                                    : bf16_to_f32(f32_to_bf16(src[i]));
        if (std::isfinite(src[i]) && std::isinf(back)) {
          return out_of_range(std::string(tensor_type_name(type)) + " conversion: element " +
                              std::to_string(i) + " (" + describe(src[i]) + ") overflows " +
                              std::string(tensor_type_name(type)));
        }
      }
      return ok_status();
    default:
      return ok_status();
  }
}

}  // namespace

bool can_quantize(TensorType type) {
  switch (type) {
    case TensorType::kF32:
    case TensorType::kF16:
    case TensorType::kBF16:
    case TensorType::kQ8_0:
    case TensorType::kQ4_0:
      return true;
    default:
      return false;
  }
}

Status quantize_row(TensorType type, std::span<const float> src, std::span<uint8_t> dst) {
  if (!can_quantize(type)) {
    const auto traits = tensor_type_traits(static_cast<uint32_t>(type));
    return unimplemented("cannot quantize to " +
                         (traits
                              ? std::string(traits->name)
                              : "tensor type id " + std::to_string(static_cast<uint32_t>(type))));
  }
  CELLM_ASSIGN_OR_RETURN(const uint64_t expected_bytes, row_size_bytes(type, src.size()));
  if (expected_bytes != dst.size()) {
    return invalid_argument("a " + std::string(tensor_type_name(type)) + " row of " +
                            std::to_string(src.size()) + " elements is " +
                            std::to_string(expected_bytes) + " bytes, got a buffer of " +
                            std::to_string(dst.size()));
  }
  CELLM_RETURN_IF_ERROR(check_values(type, src));
  if (src.empty()) return ok_status();
  switch (type) {
    case TensorType::kF32:
      std::memcpy(dst.data(), src.data(), src.size_bytes());
      break;
    case TensorType::kF16:
    case TensorType::kBF16:
      for (size_t i = 0; i < src.size(); ++i) {
        const uint16_t bits = type == TensorType::kF16 ? f32_to_f16(src[i]) : f32_to_bf16(src[i]);
        std::memcpy(dst.data() + 2 * i, &bits, sizeof(bits));
      }
      break;
    case TensorType::kQ8_0:
      quantize_q8_0(src.data(), src.size() / kQK, dst.data());
      break;
    case TensorType::kQ4_0:
      quantize_q4_0(src.data(), src.size() / kQK, dst.data());
      break;
    default:
      CELLM_CHECK(false) << "can_quantize and quantize_row disagree on " << tensor_type_name(type);
  }
  return ok_status();
}

}  // namespace cellm
