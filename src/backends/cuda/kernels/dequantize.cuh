// dequantize: conversions into the 16-bit operands of tensor-core matrix products — weights of
// any device type (weight_layout.h) to bf16, and f32 activations to f16 or bf16 — on the GPU.
// The wide matmul path uses both; the executor may also build a resident bf16 copy of a
// quantized weight once at upload. Values round to nearest even from the exact f32 value the
// CPU's dequantization gives. Stream-ordered, no allocation, capturable.
// Thread-safety: launches on the given stream.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/kernels/weight_layout.h"
#include "core/status.h"

namespace cellm::kernels {

enum class HalfType { kF16, kBF16 };

struct DequantizeParams {
  DeviceWeight w;           // the whole matrix
  int64_t row_begin = 0;    // first row to convert
  int64_t num_rows = 0;     // rows [row_begin, row_begin + num_rows) of w
  uint16_t* out = nullptr;  // [num_rows, w.num_cols] bf16 bits, 8-byte aligned
};

Status launch_dequantize_bf16(const DequantizeParams& params, cudaStream_t stream);

struct ConvertParams {
  const float* x = nullptr;  // [num_rows, x_stride] f32
  int64_t x_stride = 0;
  int64_t num_rows = 0;
  int64_t num_cols = 0;
  uint16_t* out = nullptr;  // [num_rows, out_stride] f16 or bf16 bits
  int64_t out_stride = 0;
  HalfType type = HalfType::kBF16;
};

Status launch_convert_to_half(const ConvertParams& params, cudaStream_t stream);

}  // namespace cellm::kernels
