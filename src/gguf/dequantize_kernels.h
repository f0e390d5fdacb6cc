// Internal to the gguf tensor-type code: one dequantization kernel per type, over whole blocks.
//
// A kernel turns `num_blocks` consecutive blocks at `src` (num_blocks * block_bytes bytes, any
// alignment) into num_blocks * block_size floats at `dst`, in the element order and with the
// exact float operations of the GGML reference dequantizers, so results match llama.cpp bit for
// bit. Kernels do no validation: dequantize.cpp checks sizes and types first and is the only
// caller besides the tests. Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "gguf/tensor_type.h"

namespace cellm::internal {

using DequantizeKernel = void (*)(const uint8_t* src, size_t num_blocks, float* dst);

// Copies block `index` out of the byte stream: GGUF data need not be aligned for the struct.
template <typename Block>
Block load_block(const uint8_t* src, size_t index) {
  Block block;
  std::memcpy(&block, src + index * sizeof(Block), sizeof(Block));
  return block;
}

// Plain floats and the 32-element types (dequantize_kernels.cpp).
void dequantize_f32(const uint8_t* src, size_t num_blocks, float* dst);
void dequantize_f16(const uint8_t* src, size_t num_blocks, float* dst);
void dequantize_bf16(const uint8_t* src, size_t num_blocks, float* dst);
void dequantize_q4_0(const uint8_t* src, size_t num_blocks, float* dst);
void dequantize_q4_1(const uint8_t* src, size_t num_blocks, float* dst);
void dequantize_q5_0(const uint8_t* src, size_t num_blocks, float* dst);
void dequantize_q5_1(const uint8_t* src, size_t num_blocks, float* dst);
void dequantize_q8_0(const uint8_t* src, size_t num_blocks, float* dst);

// K-quants, 256-element super-blocks (dequantize_k_kernels.cpp).
void dequantize_q2_k(const uint8_t* src, size_t num_blocks, float* dst);
void dequantize_q3_k(const uint8_t* src, size_t num_blocks, float* dst);
void dequantize_q4_k(const uint8_t* src, size_t num_blocks, float* dst);
void dequantize_q5_k(const uint8_t* src, size_t num_blocks, float* dst);
void dequantize_q6_k(const uint8_t* src, size_t num_blocks, float* dst);

// cellm's GPTQ group types (dequantize_kernels.cpp).
void dequantize_q4_g32(const uint8_t* src, size_t num_blocks, float* dst);
void dequantize_q4_g64(const uint8_t* src, size_t num_blocks, float* dst);
void dequantize_q4_g128(const uint8_t* src, size_t num_blocks, float* dst);

// The kernel of `type`, or nullptr when cellm cannot dequantize it.
DequantizeKernel dequantize_kernel(TensorType type);

}  // namespace cellm::internal
