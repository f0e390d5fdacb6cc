// matmul: argument checks, the small-M dispatch by weight type, and the cuBLAS wide path
// (matmul.cuh).
#include <algorithm>
#include <string>

#include "backends/cuda/kernels/decode_matmul.cuh"
#include "backends/cuda/kernels/dequantize.cuh"
#include "backends/cuda/kernels/gemv_launch.h"
#include "backends/cuda/kernels/launch_status.h"
#include "backends/cuda/kernels/matmul.cuh"
#include "backends/cuda/kernels/matmul_wide.cuh"

namespace cellm::kernels {
namespace {

constexpr size_t kAlign = 256;
// A dequantized tile: 128 MiB of bf16 — every product of an 8B model but gate|up (two tiles) and
// the LM head in one tile, one GEMM each. 32 MiB tiles (a 1152-row GEMM for down) measured
// 5–17% slower at 256–512 tokens on the H200 (prefill_and_batch.md, version 4).
constexpr int64_t kTileElements = int64_t{64} << 20;

size_t align_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// Rows of W per dequantized tile: a multiple of 128, at least 128.
int64_t tile_rows(const DeviceWeight& w) {
  const int64_t rows = std::max<int64_t>(128, kTileElements / w.num_cols / 128 * 128);
  return std::min(rows, w.num_rows);
}

std::string describe(const MatmulParams& p) {
  return std::string(tensor_type_name(p.w.type)) + " weight [" + std::to_string(p.w.num_rows) +
         ", " + std::to_string(p.w.num_cols) + "], " + std::to_string(p.num_tokens) + " tokens";
}

Status check_common(const MatmulParams& p) {
  CELLM_RETURN_IF_ERROR(check_device_weight(p.w.type, p.w.num_cols, "matmul"));
  if (p.w.data == nullptr || p.w.num_rows <= 0 ||
      p.w.row_bytes != device_row_bytes(p.w.type, p.w.num_cols) ||
      p.w.layout != device_weight_layout(p.w.type, p.w.num_cols)) {
    return invalid_argument(
        "matmul: " + describe(p) +
        ": null data, no rows, or row_bytes/layout not from make_device_weight");
  }
  if (p.num_tokens < 0) return invalid_argument("matmul: " + describe(p) + ": negative M");
  const bool has_x = p.x != nullptr && p.x_stride >= p.w.num_cols;
  if (p.num_tokens > 0 &&
      ((!has_x && p.x_wide == nullptr) || p.y == nullptr || p.y_stride < p.w.num_rows)) {
    return invalid_argument("matmul: " + describe(p) + ": null x/y or strides (" +
                            std::to_string(p.x_stride) + ", " + std::to_string(p.y_stride) +
                            ") shorter than K/N");
  }
  if (p.x_wide != nullptr &&
      (matmul_wide_input_order(p.w, p.num_tokens, p.w_bf16 != nullptr) != p.x_wide_order ||
       reinterpret_cast<uintptr_t>(p.x_wide) % 16 != 0)) {
    return invalid_argument("matmul: " + describe(p) +
                            ": a bf16 x only in the order the product takes "
                            "(matmul_wide_input_order), 16-byte aligned");
  }
  return ok_status();
}

GemvArgs gemv_args(const MatmulParams& p) {
  GemvArgs args;
  args.w = static_cast<const uint8_t*>(p.w.data);
  args.num_rows = p.w.num_rows;
  args.num_cols = p.w.num_cols;
  args.row_bytes = p.w.row_bytes;
  args.x = p.x;
  args.x_stride = p.x_stride;
  args.num_tokens = p.num_tokens;
  args.y = p.y;
  args.y_stride = p.y_stride;
  args.accumulate = p.accumulate;
  args.x_q8 = p.x_q8;
  args.x_q8_scales = p.x_q8_scales;
  return args;
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// The fast kernels load x as float4 and weight chunks at 8- or 16-byte alignment.
bool fast_path_applies(const MatmulParams& p) {
  if (!aligned16(p.x) || p.x_stride % 4 != 0 || !aligned16(p.w.data)) return false;
  if (is_quantized_type(p.w.type)) return p.w.layout == WeightLayout::kInterleaved;
  return p.w.num_cols % 4 == 0;
}

// int8 activations apply to interleaved Q8_0 / Q4_0 weights with aligned int8 inputs.
bool dp4a_applies(const MatmulParams& p) {
  return p.x_q8 != nullptr && p.x_q8_scales != nullptr &&
         (p.w.type == TensorType::kQ8_0 || p.w.type == TensorType::kQ4_0) &&
         p.w.layout == WeightLayout::kInterleaved && aligned16(p.x_q8) &&
         aligned16(p.x_q8_scales) && aligned16(p.w.data);
}

// cuBLAS, column-major: C[N, M] = op(A)[N, K] · B[K, M] with A = W viewed as [K, N] (ld = lda)
// transposed, B = x viewed as [K, M], C = y viewed as [N, M] (ld = y_stride).
Status gemm_16bit(const MatmulParams& p, const void* a, cudaDataType a_type, int64_t lda,
                  int64_t num_rows, const void* b, int64_t ldb, float* c, float beta) {
  const float alpha = 1.0f;
  return cublas_status(
      cublasGemmEx(p.cublas, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(num_rows), p.num_tokens,
                   static_cast<int>(p.w.num_cols), &alpha, a, a_type, static_cast<int>(lda), b,
                   a_type, static_cast<int>(ldb), &beta, c, CUDA_R_32F,
                   static_cast<int>(p.y_stride), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
      "matmul_wide: cublasGemmEx");
}

}  // namespace

size_t matmul_wide_scratch_bytes(const DeviceWeight& w, int32_t max_tokens) {
  if (w.type == TensorType::kF32) return 0;
  size_t bytes = align_up(static_cast<size_t>(max_tokens) * static_cast<size_t>(w.num_cols) * 2);
  if (is_quantized_type(w.type))
    bytes += align_up(static_cast<size_t>(tile_rows(w) * w.num_cols) * 2);
  return std::max(bytes, matmul_wide_fused_scratch_bytes(w, max_tokens));
}

int32_t small_m_max_tokens(TensorType type) {
  if (is_quantized_type(type)) return kSmallMMaxTokensQuantized;
  if (type == TensorType::kF16 || type == TensorType::kBF16) return kSmallMMaxTokens16Bit;
  return kSmallMMaxTokens;
}

std::optional<WideOrder> matmul_wide_input_order(const DeviceWeight& w, int32_t num_tokens,
                                                 bool has_bf16_copy) {
  if (num_tokens <= small_m_max_tokens(w.type)) return std::nullopt;
  if (w.type == TensorType::kF32 || w.type == TensorType::kF16) return std::nullopt;
  return matmul_wide_fused_applies(w, num_tokens, has_bf16_copy) ? WideOrder::kFused
                                                                 : WideOrder::kNatural;
}

Status launch_matmul(const MatmulParams& p, cudaStream_t stream) {
  return p.num_tokens <= small_m_max_tokens(p.w.type) ? launch_matmul_small_m(p, stream)
                                                      : launch_matmul_wide(p, stream);
}

Status launch_matmul_small_m(const MatmulParams& p, cudaStream_t stream) {
  CELLM_RETURN_IF_ERROR(check_common(p));
  if (p.x_wide != nullptr) {
    return invalid_argument("matmul_small_m: " + describe(p) + ": takes x, not a wide-order copy");
  }
  if (p.num_tokens > kSmallMMaxTokens) {
    return invalid_argument("matmul_small_m: " + describe(p) + ": more than " +
                            std::to_string(kSmallMMaxTokens) + " tokens");
  }
  if (p.num_tokens == 0) return ok_status();
  // The fused decode kernels (decode_matmul.cuh) for every fast layout they cover.
  const bool dp4a = dp4a_applies(p);
  if (decode_matmul_supports(p.w) && (dp4a || fast_path_applies(p))) {
    DecodeMatmulParams d;
    d.w = p.w;
    d.num_tokens = p.num_tokens;
    if (dp4a) {
      d.x_q8 = p.x_q8;
      d.x_q8_scales = p.x_q8_scales;
    } else {
      d.x = p.x;
      d.x_stride = p.x_stride;
    }
    d.y = p.y;
    d.y_stride = p.y_stride;
    d.accumulate = p.accumulate;
    return launch_decode_matmul(d, stream);
  }
  const GemvArgs args = gemv_args(p);
  if (dp4a) {
    if (p.w.type == TensorType::kQ8_0) {
      launch_gemv_q8_0_dp4a(args, stream);
    } else {
      launch_gemv_q4_0_dp4a(args, stream);
    }
    return launch_status("matmul_small_m (dp4a)");
  }
  if (!fast_path_applies(p)) {
    launch_gemv_generic(args, p.w.type, stream);
    return launch_status("matmul_small_m (generic)");
  }
  switch (p.w.type) {
    case TensorType::kF32:
      launch_gemv_f32(args, stream);
      break;
    case TensorType::kF16:
      launch_gemv_f16(args, stream);
      break;
    case TensorType::kBF16:
      launch_gemv_bf16(args, stream);
      break;
    case TensorType::kQ8_0:
      launch_gemv_q8_0(args, stream);
      break;
    case TensorType::kQ4_0:
      launch_gemv_q4_0(args, stream);
      break;
    case TensorType::kQ4_K:
      launch_gemv_q4_k(args, stream);
      break;
    case TensorType::kQ6_K:
      launch_gemv_q6_k(args, stream);
      break;
    default:
      return internal_error("matmul_small_m: " + describe(p));
  }
  return launch_status("matmul_small_m");
}

Status launch_matmul_wide(const MatmulParams& p, cudaStream_t stream) {
  CELLM_RETURN_IF_ERROR(check_common(p));
  if (p.num_tokens == 0) return ok_status();
  // Interleaved Q8_0 / Q4_0 up to kFusedMaxTokens: the fused tensor-core product
  // (matmul_wide.cuh).
  if (matmul_wide_fused_applies(p)) return launch_matmul_wide_fused(p, stream);
  if (p.cublas == nullptr) return invalid_argument("matmul_wide: " + describe(p) + ": no handle");
  CELLM_RETURN_IF_ERROR(cublas_status(cublasSetStream(p.cublas, stream), "cublasSetStream"));
  const float beta = p.accumulate ? 1.0f : 0.0f;
  const int64_t n = p.w.num_rows;
  const int64_t k = p.w.num_cols;

  if (p.w.type == TensorType::kF32) {
    // True f32 whatever the handle's math mode (pedantic: no TF32).
    const float alpha = 1.0f;
    return cublas_status(cublasGemmEx(p.cublas, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n),
                                      p.num_tokens, static_cast<int>(k), &alpha, p.w.data,
                                      CUDA_R_32F, static_cast<int>(p.w.row_bytes / 4), p.x,
                                      CUDA_R_32F, static_cast<int>(p.x_stride), &beta, p.y,
                                      CUDA_R_32F, static_cast<int>(p.y_stride),
                                      CUBLAS_COMPUTE_32F_PEDANTIC, CUBLAS_GEMM_DEFAULT),
                         "matmul_wide: f32 cublasGemmEx");
  }

  // Activations in the weight's 16-bit type (bf16 for dequantized weights): the caller's bf16
  // copy (checked above: bf16 or dequantized weights) or rounded here.
  const size_t act_bytes = align_up(static_cast<size_t>(p.num_tokens) * static_cast<size_t>(k) * 2);
  const bool need_tile = is_quantized_type(p.w.type) && p.w_bf16 == nullptr;
  const size_t tile_bytes = need_tile ? align_up(static_cast<size_t>(tile_rows(p.w) * k) * 2) : 0;
  if (p.scratch == nullptr || p.scratch_bytes < act_bytes + tile_bytes ||
      reinterpret_cast<uintptr_t>(p.scratch) % kAlign != 0) {
    return invalid_argument("matmul_wide: " + describe(p) + ": scratch of " +
                            std::to_string(p.scratch_bytes) + " bytes, need " +
                            std::to_string(act_bytes + tile_bytes) + " (256-byte aligned)");
  }
  const uint16_t* act = p.x_wide;
  if (act == nullptr) {
    auto* rounded = static_cast<uint16_t*>(p.scratch);
    ConvertParams convert;
    convert.x = p.x;
    convert.x_stride = p.x_stride;
    convert.num_rows = p.num_tokens;
    convert.num_cols = k;
    convert.out = rounded;
    convert.out_stride = k;
    convert.type = p.w.type == TensorType::kF16 ? HalfType::kF16 : HalfType::kBF16;
    CELLM_RETURN_IF_ERROR(launch_convert_to_half(convert, stream));
    act = rounded;
  }

  if (p.w.type == TensorType::kF16 || p.w.type == TensorType::kBF16) {
    const cudaDataType type = p.w.type == TensorType::kF16 ? CUDA_R_16F : CUDA_R_16BF;
    return gemm_16bit(p, p.w.data, type, static_cast<int64_t>(p.w.row_bytes / 2), n, act, k, p.y,
                      beta);
  }
  if (p.w_bf16 != nullptr) return gemm_16bit(p, p.w_bf16, CUDA_R_16BF, k, n, act, k, p.y, beta);

  auto* tile = reinterpret_cast<uint16_t*>(static_cast<uint8_t*>(p.scratch) + act_bytes);
  const int64_t rows_per_tile = tile_rows(p.w);
  for (int64_t row = 0; row < n; row += rows_per_tile) {
    const int64_t rows = std::min(rows_per_tile, n - row);
    DequantizeParams dq;
    dq.w = p.w;
    dq.row_begin = row;
    dq.num_rows = rows;
    dq.out = tile;
    CELLM_RETURN_IF_ERROR(launch_dequantize_bf16(dq, stream));
    CELLM_RETURN_IF_ERROR(gemm_16bit(p, tile, CUDA_R_16BF, k, rows, act, k, p.y + row, beta));
  }
  return ok_status();
}

}  // namespace cellm::kernels
