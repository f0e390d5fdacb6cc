#include "gguf/tensor_type.h"

#include <array>
#include <cctype>
#include <string>

namespace cellm {
namespace {

// Block geometry from the GGML block definitions (ggml-common.h): bytes are the packed size
// of one block struct. QK_K = 256.
constexpr std::array kTraits = {
    TensorTypeTraits{TensorType::kF32, "f32", 1, 4, true},
    TensorTypeTraits{TensorType::kF16, "f16", 1, 2, true},
    TensorTypeTraits{TensorType::kQ4_0, "q4_0", 32, 18, true},
    TensorTypeTraits{TensorType::kQ4_1, "q4_1", 32, 20, true},
    TensorTypeTraits{TensorType::kQ5_0, "q5_0", 32, 22, true},
    TensorTypeTraits{TensorType::kQ5_1, "q5_1", 32, 24, true},
    TensorTypeTraits{TensorType::kQ8_0, "q8_0", 32, 34, true},
    TensorTypeTraits{TensorType::kQ8_1, "q8_1", 32, 36, false},
    TensorTypeTraits{TensorType::kQ2_K, "q2_K", 256, 84, true},
    TensorTypeTraits{TensorType::kQ3_K, "q3_K", 256, 110, true},
    TensorTypeTraits{TensorType::kQ4_K, "q4_K", 256, 144, true},
    TensorTypeTraits{TensorType::kQ5_K, "q5_K", 256, 176, true},
    TensorTypeTraits{TensorType::kQ6_K, "q6_K", 256, 210, true},
    TensorTypeTraits{TensorType::kQ8_K, "q8_K", 256, 292, false},
    TensorTypeTraits{TensorType::kIQ2_XXS, "iq2_xxs", 256, 66, false},
    TensorTypeTraits{TensorType::kIQ2_XS, "iq2_xs", 256, 74, false},
    TensorTypeTraits{TensorType::kIQ3_XXS, "iq3_xxs", 256, 98, false},
    TensorTypeTraits{TensorType::kIQ1_S, "iq1_s", 256, 50, false},
    TensorTypeTraits{TensorType::kIQ4_NL, "iq4_nl", 32, 18, false},
    TensorTypeTraits{TensorType::kIQ3_S, "iq3_s", 256, 110, false},
    TensorTypeTraits{TensorType::kIQ2_S, "iq2_s", 256, 82, false},
    TensorTypeTraits{TensorType::kIQ4_XS, "iq4_xs", 256, 136, false},
    TensorTypeTraits{TensorType::kI8, "i8", 1, 1, false},
    TensorTypeTraits{TensorType::kI16, "i16", 1, 2, false},
    TensorTypeTraits{TensorType::kI32, "i32", 1, 4, false},
    TensorTypeTraits{TensorType::kI64, "i64", 1, 8, false},
    TensorTypeTraits{TensorType::kF64, "f64", 1, 8, false},
    TensorTypeTraits{TensorType::kIQ1_M, "iq1_m", 256, 56, false},
    TensorTypeTraits{TensorType::kBF16, "bf16", 1, 2, true},
    TensorTypeTraits{TensorType::kTQ1_0, "tq1_0", 256, 54, false},
    TensorTypeTraits{TensorType::kTQ2_0, "tq2_0", 256, 66, false},
    TensorTypeTraits{TensorType::kMXFP4, "mxfp4", 32, 17, false},
    // cellm's own (ids from 1024; block_formats.h BlockQ4G: 4 header bytes + group / 2).
    TensorTypeTraits{TensorType::kQ4_G32, "q4_g32", 32, 20, true},
    TensorTypeTraits{TensorType::kQ4_G64, "q4_g64", 64, 36, true},
    TensorTypeTraits{TensorType::kQ4_G128, "q4_g128", 128, 68, true},
};

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

std::optional<TensorTypeTraits> tensor_type_traits(uint32_t type_id) {
  for (const TensorTypeTraits& traits : kTraits) {
    if (static_cast<uint32_t>(traits.type) == type_id) return traits;
  }
  return std::nullopt;
}

const TensorTypeTraits& tensor_type_traits(TensorType type) {
  for (const TensorTypeTraits& traits : kTraits) {
    if (traits.type == type) return traits;
  }
  CELLM_CHECK(false) << "TensorType " << static_cast<uint32_t>(type) << " is not in the table";
  return kTraits[0];
}

std::string_view tensor_type_name(TensorType type) { return tensor_type_traits(type).name; }

std::optional<TensorType> tensor_type_from_name(std::string_view name) {
  const std::string wanted = lower(name);
  for (const TensorTypeTraits& traits : kTraits) {
    if (lower(traits.name) == wanted) return traits.type;
  }
  return std::nullopt;
}

StatusOr<uint64_t> row_size_bytes(TensorType type, uint64_t num_elements) {
  const TensorTypeTraits& traits = tensor_type_traits(type);
  if (num_elements % traits.block_size != 0) {
    return invalid_argument("a row of " + std::to_string(num_elements) + " elements is not a " +
                            "whole number of " + std::string(traits.name) + " blocks of " +
                            std::to_string(traits.block_size));
  }
  const uint64_t num_blocks = num_elements / traits.block_size;
  if (num_blocks > UINT64_MAX / traits.block_bytes) {
    return out_of_range("row of " + std::to_string(num_elements) + " elements overflows");
  }
  return num_blocks * traits.block_bytes;
}

}  // namespace cellm
