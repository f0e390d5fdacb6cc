#include "backends/cuda/kernels/weight_layout.h"

#include <cstring>
#include <string>

#include "gguf/block_formats.h"

namespace cellm::kernels {
namespace {

constexpr int64_t kSpan = 256;  // elements of one interleaving span (8 blocks or 1 super-block)

uint64_t gguf_row_bytes(TensorType type, int64_t num_cols) {
  const TensorTypeTraits& traits = tensor_type_traits(type);
  return static_cast<uint64_t>(num_cols) / traits.block_size * traits.block_bytes;
}

// One row, GGUF → interleaved (to_device) or back. `gguf` and `device` are one row each; the
// permutations are documented in weight_decode.cuh.
void permute_q4_0(int64_t num_cols, uint8_t* gguf, uint8_t* device, bool to_device) {
  const int64_t num_blocks = num_cols / 32;
  uint8_t* qs_plane = device;                // [num_cols / 2]
  uint8_t* d_plane = device + num_cols / 2;  // [num_blocks] f16
  if (to_device) std::memset(qs_plane, 0, static_cast<size_t>(num_cols / 2));
  for (int64_t b = 0; b < num_blocks; ++b) {
    uint8_t* block = gguf + b * 18;
    if (to_device) {
      std::memcpy(d_plane + 2 * b, block, 2);
    } else {
      std::memcpy(block, d_plane + 2 * b, 2);
      std::memset(block + 2, 0, 16);
    }
    const int64_t span = b / 8;
    const int64_t group = b % 8;
    for (int e = 0; e < 32; ++e) {
      const int lane = e / 4;
      const int i = e % 4;
      uint8_t& dev_byte = qs_plane[span * 128 + lane * 16 + 4 * (group / 2) + i];
      const int dev_shift = (group & 1) ? 4 : 0;
      uint8_t& src_byte = block[2 + (e % 16)];
      const int src_shift = e < 16 ? 0 : 4;
      if (to_device) {
        dev_byte = static_cast<uint8_t>(dev_byte | (((src_byte >> src_shift) & 0x0f) << dev_shift));
      } else {
        src_byte = static_cast<uint8_t>(src_byte | (((dev_byte >> dev_shift) & 0x0f) << src_shift));
      }
    }
  }
}

void permute_q8_0(int64_t num_cols, uint8_t* gguf, uint8_t* device, bool to_device) {
  const int64_t num_blocks = num_cols / 32;
  uint8_t* qs_plane = device;            // [num_cols]
  uint8_t* d_plane = device + num_cols;  // [num_blocks] f16
  for (int64_t b = 0; b < num_blocks; ++b) {
    uint8_t* block = gguf + b * 34;
    const int64_t span = b / 8;
    const int64_t group = b % 8;
    if (to_device) {
      std::memcpy(d_plane + 2 * b, block, 2);
    } else {
      std::memcpy(block, d_plane + 2 * b, 2);
    }
    for (int e = 0; e < 32; ++e) {
      uint8_t& dev_byte = qs_plane[span * 256 + (e / 4) * 32 + 4 * group + e % 4];
      uint8_t& src_byte = block[2 + e];
      if (to_device) {
        dev_byte = src_byte;
      } else {
        src_byte = dev_byte;
      }
    }
  }
}

void permute_q4_k(int64_t num_cols, uint8_t* gguf, uint8_t* device, bool to_device) {
  const int64_t num_super = num_cols / kSpan;
  for (int64_t s = 0; s < num_super; ++s) {
    uint8_t* src = gguf + s * 144;
    uint8_t* dst = device + s * 144;
    uint8_t* from = to_device ? src : dst;
    uint8_t* to = to_device ? dst : src;
    std::memcpy(to, from, 16);  // d, dmin, scales
    for (int lane = 0; lane < 8; ++lane) {
      for (int k = 0; k < 4; ++k) {
        uint8_t* dev_word = dst + 16 + 16 * lane + 4 * k;
        uint8_t* src_word = src + 16 + 32 * k + 4 * lane;
        if (to_device) {
          std::memcpy(dev_word, src_word, 4);
        } else {
          std::memcpy(src_word, dev_word, 4);
        }
      }
    }
  }
}

void permute_q6_k(int64_t num_cols, uint8_t* gguf, uint8_t* device, bool to_device) {
  const int64_t num_super = num_cols / kSpan;
  uint8_t* ql_plane = device;                                    // [num_cols / 2]
  uint8_t* qh_plane = device + num_cols / 2;                     // [num_cols / 4]
  uint8_t* scale_plane = device + 3 * num_cols / 4;              // [num_cols / 16]
  uint8_t* d_plane = device + 3 * num_cols / 4 + num_cols / 16;  // [num_super] f16
  for (int64_t s = 0; s < num_super; ++s) {
    uint8_t* block = gguf + s * 210;
    const auto copy = [to_device](uint8_t* dev, uint8_t* src, size_t n) {
      if (to_device) {
        std::memcpy(dev, src, n);
      } else {
        std::memcpy(src, dev, n);
      }
    };
    for (int lane = 0; lane < 8; ++lane) {
      for (int n = 0; n < 2; ++n) {
        for (int p = 0; p < 2; ++p) {
          copy(ql_plane + s * 128 + 16 * lane + 4 * (2 * n + p), block + 64 * n + 32 * p + 4 * lane,
               4);
        }
        copy(qh_plane + s * 64 + 8 * lane + 4 * n, block + 128 + 32 * n + 4 * lane, 4);
      }
    }
    copy(scale_plane + s * 16, block + 192, 16);
    copy(d_plane + s * 2, block + 208, 2);
  }
}

Status check_sizes(TensorType type, int64_t num_cols, int64_t num_rows, size_t gguf_bytes,
                   size_t device_bytes) {
  CELLM_RETURN_IF_ERROR(check_device_weight(type, num_cols, "repack"));
  if (num_rows < 0) return invalid_argument("repack: " + std::to_string(num_rows) + " rows");
  const uint64_t want_gguf = gguf_row_bytes(type, num_cols) * static_cast<uint64_t>(num_rows);
  const uint64_t want_device = device_row_bytes(type, num_cols) * static_cast<uint64_t>(num_rows);
  if (gguf_bytes != want_gguf || device_bytes != want_device) {
    return invalid_argument("repack of " + std::to_string(num_rows) + " rows of " +
                            std::to_string(num_cols) + " " + std::string(tensor_type_name(type)) +
                            " elements: GGUF side has " + std::to_string(gguf_bytes) +
                            " bytes (expected " + std::to_string(want_gguf) + "), device side " +
                            std::to_string(device_bytes) + " (expected " +
                            std::to_string(want_device) + ")");
  }
  return ok_status();
}

Status permute_rows(TensorType type, int64_t num_cols, int64_t num_rows, uint8_t* gguf,
                    uint8_t* device, bool to_device) {
  const uint64_t src_row = gguf_row_bytes(type, num_cols);
  const uint64_t dev_row = device_row_bytes(type, num_cols);
  if (device_weight_layout(type, num_cols) == WeightLayout::kGguf) {
    for (int64_t r = 0; r < num_rows; ++r) {
      if (to_device) {
        std::memcpy(device + r * dev_row, gguf + r * src_row, src_row);
      } else {
        std::memcpy(gguf + r * src_row, device + r * dev_row, src_row);
      }
    }
    return ok_status();
  }
  for (int64_t r = 0; r < num_rows; ++r) {
    uint8_t* g = gguf + r * src_row;
    uint8_t* d = device + r * dev_row;
    if (to_device) std::memset(d, 0, dev_row);
    switch (type) {
      case TensorType::kQ4_0:
        permute_q4_0(num_cols, g, d, to_device);
        break;
      case TensorType::kQ8_0:
        permute_q8_0(num_cols, g, d, to_device);
        break;
      case TensorType::kQ4_K:
        permute_q4_k(num_cols, g, d, to_device);
        break;
      case TensorType::kQ6_K:
        permute_q6_k(num_cols, g, d, to_device);
        break;
      default:
        return internal_error("interleaved layout for " + std::string(tensor_type_name(type)));
    }
  }
  return ok_status();
}

}  // namespace

bool is_quantized_type(TensorType type) {
  return type == TensorType::kQ8_0 || type == TensorType::kQ4_0 || type == TensorType::kQ4_K ||
         type == TensorType::kQ6_K;
}

bool cuda_supports_weight_type(TensorType type) {
  return type == TensorType::kF32 || type == TensorType::kF16 || type == TensorType::kBF16 ||
         is_quantized_type(type);
}

Status check_device_weight(TensorType type, int64_t num_cols, std::string_view name) {
  if (!cuda_supports_weight_type(type)) {
    return unimplemented(std::string(name) + ": the CUDA backend does not compute with " +
                         std::string(tensor_type_name(type)) +
                         " weights (supported: f32, f16, bf16, q8_0, q4_0, q4_K, q6_K)");
  }
  const uint32_t block = tensor_type_traits(type).block_size;
  if (num_cols <= 0 || num_cols % block != 0) {
    return invalid_argument(std::string(name) + ": rows of " + std::to_string(num_cols) + " " +
                            std::string(tensor_type_name(type)) +
                            " elements are not a whole number of " + std::to_string(block) +
                            "-element blocks");
  }
  return ok_status();
}

WeightLayout device_weight_layout(TensorType type, int64_t num_cols) {
  return is_quantized_type(type) && num_cols % kSpan == 0 ? WeightLayout::kInterleaved
                                                          : WeightLayout::kGguf;
}

uint64_t device_row_bytes(TensorType type, int64_t num_cols) {
  const uint64_t bytes = gguf_row_bytes(type, num_cols);
  if (type == TensorType::kQ6_K &&
      device_weight_layout(type, num_cols) == WeightLayout::kInterleaved) {
    return (bytes + 15) / 16 * 16;
  }
  return bytes;
}

DeviceWeight make_device_weight(const void* data, TensorType type, int64_t num_rows,
                                int64_t num_cols) {
  DeviceWeight w;
  w.data = data;
  w.type = type;
  w.layout = device_weight_layout(type, num_cols);
  w.num_rows = num_rows;
  w.num_cols = num_cols;
  w.row_bytes = device_row_bytes(type, num_cols);
  return w;
}

Status repack_rows_for_device(TensorType type, int64_t num_cols, int64_t num_rows,
                              std::span<const uint8_t> gguf, std::span<uint8_t> device) {
  CELLM_RETURN_IF_ERROR(check_sizes(type, num_cols, num_rows, gguf.size(), device.size()));
  // The permutation helpers take both sides as mutable; the GGUF side is only read here.
  return permute_rows(type, num_cols, num_rows, const_cast<uint8_t*>(gguf.data()), device.data(),
                      /*to_device=*/true);
}

Status unpack_rows_from_device(TensorType type, int64_t num_cols, int64_t num_rows,
                               std::span<const uint8_t> device, std::span<uint8_t> gguf) {
  CELLM_RETURN_IF_ERROR(check_sizes(type, num_cols, num_rows, gguf.size(), device.size()));
  return permute_rows(type, num_cols, num_rows, gguf.data(), const_cast<uint8_t*>(device.data()),
                      /*to_device=*/false);
}

}  // namespace cellm::kernels
