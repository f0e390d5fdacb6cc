#include "gguf/dequantize_kernels.h"

#include <cstring>

#include "core/float16.h"
#include "gguf/block_formats.h"

namespace cellm::internal {
namespace {

using blocks::kQK;

uint32_t load_u32(const uint8_t (&bytes)[4]) {
  uint32_t value;
  std::memcpy(&value, bytes, sizeof(value));  // little-endian host (block_formats.h)
  return value;
}

// Q5_0 / Q5_1: the 5-bit quant of each of the block's 32 elements. Element j < 16 is the low
// nibble of qs[j] and element j + 16 its high nibble; the 5th bit of element e is bit e of qh.
void unpack_q5(const uint8_t (&qs)[kQK / 2], const uint8_t (&qh_bytes)[4], int (&quants)[kQK]) {
  const uint32_t qh = load_u32(qh_bytes);
  for (size_t j = 0; j < kQK / 2; ++j) {
    quants[j] = (qs[j] & 0x0f) | (static_cast<int>((qh >> j) & 1u) << 4);
    quants[j + kQK / 2] = (qs[j] >> 4) | (static_cast<int>((qh >> (j + kQK / 2)) & 1u) << 4);
  }
}

}  // namespace

void dequantize_f32(const uint8_t* src, size_t num_blocks, float* dst) {
  std::memcpy(dst, src, num_blocks * sizeof(float));
}

void dequantize_f16(const uint8_t* src, size_t num_blocks, float* dst) {
  for (size_t i = 0; i < num_blocks; ++i) {
    uint16_t bits;
    std::memcpy(&bits, src + 2 * i, sizeof(bits));
    dst[i] = f16_to_f32(bits);
  }
}

void dequantize_bf16(const uint8_t* src, size_t num_blocks, float* dst) {
  for (size_t i = 0; i < num_blocks; ++i) {
    uint16_t bits;
    std::memcpy(&bits, src + 2 * i, sizeof(bits));
    dst[i] = bf16_to_f32(bits);
  }
}

void dequantize_q4_0(const uint8_t* src, size_t num_blocks, float* dst) {
  for (size_t b = 0; b < num_blocks; ++b, dst += kQK) {
    const auto block = load_block<blocks::BlockQ4_0>(src, b);
    const float d = f16_to_f32(block.d);
    for (size_t j = 0; j < kQK / 2; ++j) {
      dst[j] = static_cast<float>((block.qs[j] & 0x0f) - 8) * d;
      dst[j + kQK / 2] = static_cast<float>((block.qs[j] >> 4) - 8) * d;
    }
  }
}

void dequantize_q4_1(const uint8_t* src, size_t num_blocks, float* dst) {
  for (size_t b = 0; b < num_blocks; ++b, dst += kQK) {
    const auto block = load_block<blocks::BlockQ4_1>(src, b);
    const float d = f16_to_f32(block.d);
    const float m = f16_to_f32(block.m);
    for (size_t j = 0; j < kQK / 2; ++j) {
      dst[j] = static_cast<float>(block.qs[j] & 0x0f) * d + m;
      dst[j + kQK / 2] = static_cast<float>(block.qs[j] >> 4) * d + m;
    }
  }
}

void dequantize_q5_0(const uint8_t* src, size_t num_blocks, float* dst) {
  for (size_t b = 0; b < num_blocks; ++b, dst += kQK) {
    const auto block = load_block<blocks::BlockQ5_0>(src, b);
    const float d = f16_to_f32(block.d);
    int quants[kQK];
    unpack_q5(block.qs, block.qh, quants);
    for (size_t j = 0; j < kQK; ++j) dst[j] = static_cast<float>(quants[j] - 16) * d;
  }
}

void dequantize_q5_1(const uint8_t* src, size_t num_blocks, float* dst) {
  for (size_t b = 0; b < num_blocks; ++b, dst += kQK) {
    const auto block = load_block<blocks::BlockQ5_1>(src, b);
    const float d = f16_to_f32(block.d);
    const float m = f16_to_f32(block.m);
    int quants[kQK];
    unpack_q5(block.qs, block.qh, quants);
    for (size_t j = 0; j < kQK; ++j) dst[j] = static_cast<float>(quants[j]) * d + m;
  }
}

void dequantize_q8_0(const uint8_t* src, size_t num_blocks, float* dst) {
  for (size_t b = 0; b < num_blocks; ++b, dst += kQK) {
    const auto block = load_block<blocks::BlockQ8_0>(src, b);
    const float d = f16_to_f32(block.d);
    for (size_t j = 0; j < kQK; ++j) dst[j] = static_cast<float>(block.qs[j]) * d;
  }
}

namespace {

template <size_t Group>
void dequantize_q4_g(const uint8_t* src, size_t num_blocks, float* dst) {
  for (size_t b = 0; b < num_blocks; ++b, dst += Group) {
    const auto block = load_block<blocks::BlockQ4G<Group>>(src, b);
    const float d = f16_to_f32(block.d);
    const int zero = block.zero;
    for (size_t j = 0; j < Group / 2; ++j) {
      dst[2 * j] = static_cast<float>((block.qs[j] & 0x0f) - zero) * d;
      dst[2 * j + 1] = static_cast<float>((block.qs[j] >> 4) - zero) * d;
    }
  }
}

}  // namespace

void dequantize_q4_g32(const uint8_t* src, size_t num_blocks, float* dst) {
  dequantize_q4_g<32>(src, num_blocks, dst);
}
void dequantize_q4_g64(const uint8_t* src, size_t num_blocks, float* dst) {
  dequantize_q4_g<64>(src, num_blocks, dst);
}
void dequantize_q4_g128(const uint8_t* src, size_t num_blocks, float* dst) {
  dequantize_q4_g<128>(src, num_blocks, dst);
}

DequantizeKernel dequantize_kernel(TensorType type) {
  switch (type) {
    case TensorType::kF32:
      return dequantize_f32;
    case TensorType::kF16:
      return dequantize_f16;
    case TensorType::kBF16:
      return dequantize_bf16;
    case TensorType::kQ4_0:
      return dequantize_q4_0;
    case TensorType::kQ4_1:
      return dequantize_q4_1;
    case TensorType::kQ5_0:
      return dequantize_q5_0;
    case TensorType::kQ5_1:
      return dequantize_q5_1;
    case TensorType::kQ8_0:
      return dequantize_q8_0;
    case TensorType::kQ2_K:
      return dequantize_q2_k;
    case TensorType::kQ3_K:
      return dequantize_q3_k;
    case TensorType::kQ4_K:
      return dequantize_q4_k;
    case TensorType::kQ5_K:
      return dequantize_q5_k;
    case TensorType::kQ6_K:
      return dequantize_q6_k;
    case TensorType::kQ4_G32:
      return dequantize_q4_g32;
    case TensorType::kQ4_G64:
      return dequantize_q4_g64;
    case TensorType::kQ4_G128:
      return dequantize_q4_g128;
    default:
      return nullptr;
  }
}

}  // namespace cellm::internal
