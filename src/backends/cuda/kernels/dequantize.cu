// dequantize: weight → bf16 and f32 → f16/bf16 conversion kernels (dequantize.cuh).
#include <string>

#include "backends/cuda/kernels/dequantize.cuh"
#include "backends/cuda/kernels/launch_status.h"
#include "backends/cuda/kernels/weight_decode.cuh"

namespace cellm::kernels {
namespace {

constexpr int kThreads = 256;

// One thread per chunk of an interleaved row: 8 groups of 4 values, each written as 8 bytes.
template <class Decoder>
__global__ void __launch_bounds__(kThreads)
    dequantize_interleaved_kernel(const DequantizeParams p) {
  const int64_t chunks_per_row = p.w.num_cols / Decoder::kChunkElems;
  const int64_t index = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (index >= p.num_rows * chunks_per_row) return;
  const int64_t r = index / chunks_per_row;
  const int64_t c = index % chunks_per_row;
  const auto* row = static_cast<const uint8_t*>(p.w.data) +
                    (p.row_begin + r) * static_cast<int64_t>(p.w.row_bytes);
  const typename Decoder::Chunk chunk = Decoder::load(row, p.w.num_cols, c);
  uint16_t* out = p.out + r * p.w.num_cols;
  CELLM_UNROLL
  for (int g = 0; g < Decoder::kGroups; ++g) {
    GroupValues v;
    Decoder::group(chunk, g, c, &v);
    uint16_t bits[4];
    CELLM_UNROLL
    for (int i = 0; i < 4; ++i) {
      const float value =
          Decoder::kHasMin ? sub_rn(mul_rn(v.scale, v.q[i]), v.min) : mul_rn(v.q[i], v.scale);
      bits[i] = float_to_bf16_bits(value);
    }
    uint2 packed;
    packed.x = bits[0] | (static_cast<uint32_t>(bits[1]) << 16);
    packed.y = bits[2] | (static_cast<uint32_t>(bits[3]) << 16);
    *reinterpret_cast<uint2*>(out + Decoder::x_offset(c, g)) = packed;
  }
}

__global__ void __launch_bounds__(kThreads) dequantize_gguf_kernel(const DequantizeParams p) {
  const int64_t index = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (index >= p.num_rows * p.w.num_cols) return;
  const int64_t r = index / p.w.num_cols;
  const int64_t e = index % p.w.num_cols;
  const auto* row = static_cast<const uint8_t*>(p.w.data) +
                    (p.row_begin + r) * static_cast<int64_t>(p.w.row_bytes);
  p.out[index] = float_to_bf16_bits(gguf_element(p.w.type, row, e));
}

__global__ void __launch_bounds__(kThreads) convert_kernel(const ConvertParams p) {
  const int64_t index = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (index >= p.num_rows * p.num_cols) return;
  const int64_t r = index / p.num_cols;
  const int64_t c = index % p.num_cols;
  const float value = p.x[r * p.x_stride + c];
  p.out[r * p.out_stride + c] =
      p.type == HalfType::kBF16 ? float_to_bf16_bits(value) : float_to_f16_bits(value);
}

unsigned blocks_for(int64_t n) { return static_cast<unsigned>(ceil_div(n, kThreads)); }

}  // namespace

Status launch_dequantize_bf16(const DequantizeParams& p, cudaStream_t stream) {
  CELLM_RETURN_IF_ERROR(check_device_weight(p.w.type, p.w.num_cols, "dequantize_bf16"));
  if (p.w.data == nullptr || p.out == nullptr || p.row_begin < 0 || p.num_rows < 0 ||
      p.row_begin + p.num_rows > p.w.num_rows) {
    return invalid_argument("dequantize_bf16: rows [" + std::to_string(p.row_begin) + ", " +
                            std::to_string(p.row_begin + p.num_rows) + ") of a " +
                            std::to_string(p.w.num_rows) + "-row weight, or a null pointer");
  }
  if (p.num_rows == 0) return ok_status();
  if (p.w.layout == WeightLayout::kInterleaved) {
    const int64_t chunks = p.num_rows * (p.w.num_cols / 32);
    switch (p.w.type) {
      case TensorType::kQ8_0:
        dequantize_interleaved_kernel<DecodeQ8_0><<<blocks_for(chunks), kThreads, 0, stream>>>(p);
        break;
      case TensorType::kQ4_0:
        dequantize_interleaved_kernel<DecodeQ4_0><<<blocks_for(chunks), kThreads, 0, stream>>>(p);
        break;
      case TensorType::kQ4_K:
        dequantize_interleaved_kernel<DecodeQ4_K><<<blocks_for(chunks), kThreads, 0, stream>>>(p);
        break;
      case TensorType::kQ6_K:
        dequantize_interleaved_kernel<DecodeQ6_K><<<blocks_for(chunks), kThreads, 0, stream>>>(p);
        break;
      default:
        return internal_error("dequantize_bf16: interleaved " +
                              std::string(tensor_type_name(p.w.type)));
    }
  } else {
    dequantize_gguf_kernel<<<blocks_for(p.num_rows * p.w.num_cols), kThreads, 0, stream>>>(p);
  }
  return launch_status("dequantize_bf16");
}

Status launch_convert_to_half(const ConvertParams& p, cudaStream_t stream) {
  if (p.num_rows < 0 || p.num_cols < 0 || p.x_stride < p.num_cols || p.out_stride < p.num_cols ||
      ((p.x == nullptr || p.out == nullptr) && p.num_rows * p.num_cols > 0)) {
    return invalid_argument("convert_to_half: " + std::to_string(p.num_rows) + " rows of " +
                            std::to_string(p.num_cols) + " with strides " +
                            std::to_string(p.x_stride) + " / " + std::to_string(p.out_stride));
  }
  if (p.num_rows * p.num_cols == 0) return ok_status();
  convert_kernel<<<blocks_for(p.num_rows * p.num_cols), kThreads, 0, stream>>>(p);
  return launch_status("convert_to_half");
}

}  // namespace cellm::kernels
