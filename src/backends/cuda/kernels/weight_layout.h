// weight_layout: how a weight matrix's bytes sit in device memory for the CUDA kernels, and the
// host functions that convert GGUF rows to that layout and back.
//
// F32, F16 and BF16 matrices keep the GGUF layout (row-major elements). Q8_0, Q4_0, Q4_K and
// Q6_K matrices whose rows have a multiple of 256 elements use an *interleaved* layout: the same
// values, permuted inside each row so that one 16-byte load gives a thread the quants of 32
// elements whose activations its warp reads with coalesced 16-byte loads (weight_decode.cuh
// states the element order). Quantized rows of other lengths keep the GGUF layout and run on
// slower generic kernels. Every row starts at a multiple of device_row_bytes() from the base.
// The executor uploads each tensor through repack_rows_for_device() (tied embeddings share the
// same device bytes: the embedding gather reads both layouts). It knows bytes and shapes, not
// models. Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <span>

#include "core/status.h"
#include "gguf/tensor_type.h"

namespace cellm::kernels {

enum class WeightLayout {
  kGguf,         // rows exactly as GGUF stores them
  kInterleaved,  // quantized rows of 256·n elements, permuted (weight_decode.cuh)
};

// A weight matrix in device memory: num_rows rows (outputs) of num_cols elements (inputs).
struct DeviceWeight {
  const void* data = nullptr;  // [num_rows, row_bytes] in `layout`; 16-byte aligned
  TensorType type = TensorType::kF32;
  WeightLayout layout = WeightLayout::kGguf;
  int64_t num_rows = 0;
  int64_t num_cols = 0;
  uint64_t row_bytes = 0;  // device_row_bytes(type, num_cols)
};

// The weight types the CUDA kernels compute with: F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K.
bool cuda_supports_weight_type(TensorType type);

// True for the block-quantized types among them (Q8_0, Q4_0, Q4_K, Q6_K).
bool is_quantized_type(TensorType type);

// OK when a matrix of `type` with rows of `num_cols` elements can live on the device: a supported
// type and a whole number of blocks per row. The error names `name`, the type and the size.
Status check_device_weight(TensorType type, int64_t num_cols, std::string_view name);

// The layout a matrix of `type` with rows of `num_cols` elements uses on the device.
WeightLayout device_weight_layout(TensorType type, int64_t num_cols);

// Bytes of one device row (GGUF's row size, rounded up to 16 bytes for interleaved Q6_K).
// Requires check_device_weight() to pass.
uint64_t device_row_bytes(TensorType type, int64_t num_cols);

// A DeviceWeight over `data` with layout and row_bytes filled in.
DeviceWeight make_device_weight(const void* data, TensorType type, int64_t num_rows,
                                int64_t num_cols);

// Converts `num_rows` GGUF rows (gguf: num_rows × GGUF row size) into the device layout (device:
// num_rows × device_row_bytes). Padding bytes are written as zeros. Errors name the sizes.
Status repack_rows_for_device(TensorType type, int64_t num_cols, int64_t num_rows,
                              std::span<const uint8_t> gguf, std::span<uint8_t> device);

// The inverse: device-layout rows back to GGUF rows (for tests and for reading device weights).
Status unpack_rows_from_device(TensorType type, int64_t num_cols, int64_t num_rows,
                               std::span<const uint8_t> device, std::span<uint8_t> gguf);

}  // namespace cellm::kernels
