// TensorType: the element types of GGUF tensors (GGML type ids) and their block geometry.
//
// A tensor of type t stores its innermost dimension in blocks of `block_size` elements, each
// `block_bytes` long (F32: 1 element, 4 bytes; Q4_0: 32 elements, 18 bytes). The table knows
// every type id GGUF files use today, so a reader can size any tensor and `cellm inspect` can
// name it, and it says which types cellm can compute with (`is_supported_for_compute`).
// Dequantization and quantization live in dequantize.h / quantize.h.
// Ids from 1024 up are cellm's own types, outside GGML's range (GGML numbers its types from 0 and
// is below 64 today): files holding them load in cellm only (llama.cpp refuses the type id).
// They carry GPTQ checkpoints without re-quantizing (block_formats.h has their layout).
// Thread-safety: immutable tables; pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "core/status.h"

namespace cellm {

// Values are the on-disk GGML type ids.
enum class TensorType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kIQ2_XXS = 16,
  kIQ2_XS = 17,
  kIQ3_XXS = 18,
  kIQ1_S = 19,
  kIQ4_NL = 20,
  kIQ3_S = 21,
  kIQ2_S = 22,
  kIQ4_XS = 23,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kIQ1_M = 29,
  kBF16 = 30,
  kTQ1_0 = 34,
  kTQ2_0 = 35,
  kMXFP4 = 39,
  // cellm types: 4-bit weights with an f16 scale and an 8-bit zero per group of 32, 64 or 128
  // elements, w = scale * (q - zero) (block_formats.h BlockQ4G). Written by `cellm export
  // --prequantized` for GPTQ groups that Q4_0 cannot hold (other sizes, asymmetric zeros).
  kQ4_G32 = 1024,
  kQ4_G64 = 1025,
  kQ4_G128 = 1026,
};

struct TensorTypeTraits {
  TensorType type;
  std::string_view name;  // as llama.cpp prints it: "f32", "q4_0", "q6_K"
  uint32_t block_size;    // elements per block
  uint32_t block_bytes;   // bytes per block
  bool can_dequantize;    // cellm has a reference dequantization for it
};

// Traits of a known type id; nullopt for an id no GGUF writer uses.
std::optional<TensorTypeTraits> tensor_type_traits(uint32_t type_id);
const TensorTypeTraits& tensor_type_traits(TensorType type);  // CHECKs the type is known

std::string_view tensor_type_name(TensorType type);

// Parses a name as printed above ("q4_K" and "q4_k" both accepted); nullopt if unknown.
std::optional<TensorType> tensor_type_from_name(std::string_view name);

// Bytes of a row of `num_elements` elements: an error when the row is not a whole number of
// blocks or the size overflows 64 bits.
StatusOr<uint64_t> row_size_bytes(TensorType type, uint64_t num_elements);

}  // namespace cellm
