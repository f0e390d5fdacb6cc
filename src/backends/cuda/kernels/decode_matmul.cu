// decode_matmul: argument checks and the dispatch by weight type of the fused decode product
// (decode_matmul.cuh; kernels in gemv_decode.cuh).
#include <algorithm>
#include <cstdlib>
#include <string>

#include "backends/cuda/kernels/decode_matmul.cuh"
#include "backends/cuda/kernels/gemv_decode.cuh"

namespace cellm::kernels {
namespace {

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// The widest handed-over normed input (DecodeInt8NormedInput::kParts partials per thread).
constexpr int64_t kHandedOverMaxCols = int64_t{kDecodeThreads} * 32 * DecodeInt8NormedInput::kParts;

bool q8_or_q4(const DeviceWeight& w) {
  return (w.type == TensorType::kQ8_0 || w.type == TensorType::kQ4_0) &&
         decode_matmul_takes_int8(w);
}

std::string describe(const DecodeMatmulParams& p) {
  return "decode_matmul: " + std::string(tensor_type_name(p.w.type)) + " weight [" +
         std::to_string(p.w.num_rows) + ", " + std::to_string(p.w.num_cols) + "], " +
         std::to_string(p.num_tokens) + " tokens";
}

Status bad(const DecodeMatmulParams& p, const std::string& what) {
  return invalid_argument(describe(p) + ": " + what);
}

Status check_input(const DecodeMatmulParams& p) {
  const int64_t k = p.w.num_cols;
  if (p.int8_activations && (p.x_q8 != nullptr || !decode_matmul_folds_int8(p.w, p.num_tokens))) {
    return bad(p,
               "in-product int8 activations need f32 x, interleaved Q8_0 / Q4_0 / Q4_K / Q6_K "
               "weights and " +
                   std::to_string(decode_int8_fold_smem_bytes(k, p.num_tokens)) +
                   " bytes of shared memory within the 48 KB limit");
  }
  if (p.x_q8_per_256 && p.x_q8 == nullptr) return bad(p, "per-256 scales without int8 input");
  if (p.x_q8_sum_squares != nullptr && (p.x_q8 == nullptr || p.x_q8_per_256 || p.num_tokens != 1 ||
                                        !decode_matmul_takes_handover(p.w))) {
    return bad(p,
               "sums of squares (a handed-over normed input) need one token of int8 input with "
               "per-32 scales, Q8_0 / Q4_0 weights and K ≤ " +
                   std::to_string(kHandedOverMaxCols));
  }
  if (p.x_q8_per_16 && (p.x_q8 == nullptr || p.x_q8_per_256 || p.x_q8_sum_squares != nullptr ||
                        p.num_tokens != 1 || !decode_matmul_takes_per_16(p.w))) {
    return bad(p,
               "per-16 scales (handed-over SwiGLU values) need one token of int8 input, not "
               "normed, and interleaved Q8_0 / Q4_0 weights");
  }
  if (p.x_q8 != nullptr) {
    if (!decode_matmul_takes_int8(p.w)) {
      return bad(p, "int8 activations need interleaved Q8_0 / Q4_0 / Q4_K / Q6_K weights");
    }
    if (p.x != nullptr || p.x_rows != nullptr || p.norm_weight != nullptr) {
      return bad(p, "int8 activations take no f32 x, row gather or norm");
    }
    if (p.x_q8_scales == nullptr || !aligned16(p.x_q8) || !aligned16(p.x_q8_scales)) {
      return bad(p, "int8 activations or scales null or not 16-byte aligned");
    }
    if (p.x_q8_per_256 && k % 256 != 0) return bad(p, "per-256 scales need K a multiple of 256");
    if (p.x_q8_per_256 && p.w.type == TensorType::kQ4_K && p.x_q8_sums == nullptr) {
      return bad(p, "Q4_K on per-256 int8 activations needs their block sums (x_q8_sums)");
    }
    return ok_status();
  }
  if (p.x_q8_sums != nullptr) return bad(p, "block sums without int8 input");
  if (p.x == nullptr || !aligned16(p.x) || p.x_stride < k || p.x_stride % 4 != 0) {
    return bad(p, "x null, not 16-byte aligned, or stride " + std::to_string(p.x_stride) +
                      " not a multiple of 4 of at least K");
  }
  if (p.norm_weight != nullptr && !aligned16(p.norm_weight)) {
    return bad(p, "norm weight not 16-byte aligned");
  }
  return ok_status();
}

Status check_output(const DecodeMatmulParams& p) {
  const int64_t n = p.w.num_rows;
  if (p.y == nullptr && p.output != DecodeOutput::kSwigluHandover) return bad(p, "null y");
  if (p.gelu_tanh && p.output != DecodeOutput::kSwiglu &&
      p.output != DecodeOutput::kSwigluHandover) {
    return bad(p, "GELU without SwiGLU output");
  }
  switch (p.output) {
    case DecodeOutput::kStore:
      if (p.y_stride < n) return bad(p, "y stride " + std::to_string(p.y_stride) + " < N");
      return ok_status();
    case DecodeOutput::kSwiglu:
      if (n % 2 != 0 || p.y_stride < n / 2 || p.accumulate) {
        return bad(p, "SwiGLU needs an even N, y stride ≥ N / 2 and no accumulate");
      }
      return ok_status();
    case DecodeOutput::kRopeKv: {
      if (p.accumulate) return bad(p, "RoPE output with accumulate");
      const std::string problem = rope_kv_output_problem(p.rope, n, p.y_stride);
      if (!problem.empty()) return bad(p, problem);
      return ok_status();
    }
    case DecodeOutput::kSwigluHandover: {
      const DecodeHandover& h = p.handover;
      if (p.num_tokens != 1 || !decode_matmul_hands_over_swiglu(p.w) || p.x_q8 == nullptr ||
          p.x_q8_per_256 || p.x_q8_per_16 || p.bias != nullptr || p.accumulate) {
        return bad(p,
                   "a SwiGLU handover needs one token, F = N / 2 a multiple of 256, Q8_0 / Q4_0 "
                   "weights and int8 input with per-32 scales, no bias and no accumulate");
      }
      if (h.q == nullptr || h.scales == nullptr || !aligned16(h.q) || !aligned16(h.scales)) {
        return bad(p, "handover values or scales null or not 16-byte aligned");
      }
      if (h.q == p.x_q8 || h.scales == p.x_q8_scales) {
        return bad(p, "the handover overwrites the product's own input");
      }
      return ok_status();
    }
    case DecodeOutput::kAddHandover: {
      const DecodeHandover& h = p.handover;
      if (p.num_tokens != 1 || !decode_matmul_hands_over(p.w) || p.x_q8 == nullptr ||
          p.x_q8_per_256 || p.x_q8_sum_squares != nullptr) {
        return bad(p,
                   "a handover needs one token, N a multiple of 256 (the interleaved order of the "
                   "next product's input), Q8_0 / Q4_0 weights and int8 input with per-32 scales, "
                   "not itself normed");
      }
      if (h.norm_weight == nullptr || h.q == nullptr || h.scales == nullptr ||
          h.sum_squares == nullptr || !aligned16(h.q)) {
        return bad(p, "handover norm weight, values, scales or sums null (values 16-byte aligned)");
      }
      if (h.q == p.x_q8 || h.scales == p.x_q8_scales) {
        return bad(p, "the handover overwrites the product's own input");
      }
      return ok_status();
    }
  }
  return bad(p, "unknown output");
}

// Row groups per block at most, for inputs with a prologue (gemv_decode.cuh): about this many
// blocks share an SM, so each SM keeps enough weight loads in flight.
constexpr int kDecodeBlocksPerSm = 8;
constexpr size_t kFoldMaxSmemBytes = 48 * 1024;

int32_t instantiated_rows(int32_t num_tokens) {
  return num_tokens <= 1 ? 1 : num_tokens <= 2 ? 2 : num_tokens <= 4 ? 4 : 8;
}

}  // namespace

int64_t decode_grid_blocks(int64_t num_groups, int prologue_blocks_per_sm) {
  static const int blocks_per_sm = [] {
    const char* value = std::getenv("CELLM_CUDA_DECODE_BLOCKS_PER_SM");
    return value != nullptr ? std::atoi(value) : kDecodeBlocksPerSm;
  }();
  if (prologue_blocks_per_sm <= 0 || blocks_per_sm <= 0) return num_groups;
  int device = 0;
  int num_sms = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&num_sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
      num_sms <= 0) {
    (void)cudaGetLastError();
    return num_groups;
  }
  const int64_t cap =
      static_cast<int64_t>(num_sms) * std::min(blocks_per_sm, prologue_blocks_per_sm);
  const int64_t per_block = ceil_div(num_groups, cap);
  return ceil_div(num_groups, per_block);
}

size_t decode_occupancy_pad_bytes() {
  static const size_t pad = [] {
    const char* value = std::getenv("CELLM_CUDA_DECODE_MAX_BLOCKS_PER_SM");
    const int n = value != nullptr ? std::atoi(value) : 0;
    if (n < 5 || n > 7) return size_t{0};
    int device = 0;
    int smem_per_sm = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&smem_per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device) !=
            cudaSuccess) {
      (void)cudaGetLastError();
      return size_t{0};
    }
    // n blocks fit (each also reserves 1 KB and holds ≤ 1 KB of static arrays), n + 1 do not.
    return static_cast<size_t>(smem_per_sm / n - 2048);
  }();
  return pad;
}

size_t decode_int8_fold_smem_bytes(int64_t num_cols, int32_t num_tokens) {
  const auto k = static_cast<size_t>(num_cols);
  return static_cast<size_t>(instantiated_rows(num_tokens)) * (k + k / 32 * sizeof(float));
}

bool decode_matmul_folds_int8(const DeviceWeight& w, int32_t num_tokens) {
  return decode_matmul_takes_int8(w) && w.num_cols % 256 == 0 &&
         decode_int8_fold_smem_bytes(w.num_cols, num_tokens) <= kFoldMaxSmemBytes;
}

bool decode_matmul_supports(const DeviceWeight& w) {
  if (!aligned16(w.data) || w.num_cols <= 0) return false;
  switch (w.type) {
    case TensorType::kF32:
      return w.num_cols % 4 == 0;
    case TensorType::kF16:
    case TensorType::kBF16:
      return w.num_cols % 8 == 0;
    case TensorType::kQ8_0:
    case TensorType::kQ4_0:
    case TensorType::kQ4_K:
    case TensorType::kQ6_K:
      return w.layout == WeightLayout::kInterleaved;
    default:
      return false;
  }
}

bool decode_matmul_hands_over(const DeviceWeight& w) {
  return q8_or_q4(w) && w.num_rows % 256 == 0;
}

bool decode_matmul_takes_handover(const DeviceWeight& w) {
  return q8_or_q4(w) && w.num_cols <= kHandedOverMaxCols;
}

bool decode_matmul_hands_over_swiglu(const DeviceWeight& w) {
  return q8_or_q4(w) && w.num_rows % 512 == 0;
}

bool decode_matmul_takes_per_16(const DeviceWeight& w) { return q8_or_q4(w); }

bool decode_matmul_takes_int8(const DeviceWeight& w) {
  return (w.type == TensorType::kQ8_0 || w.type == TensorType::kQ4_0 ||
          w.type == TensorType::kQ4_K || w.type == TensorType::kQ6_K) &&
         w.layout == WeightLayout::kInterleaved && aligned16(w.data);
}

DecodeGemvArgs make_decode_gemv_args(const DecodeMatmulParams& p) {
  DecodeGemvArgs a;
  a.w = static_cast<const uint8_t*>(p.w.data);
  a.num_rows = p.w.num_rows;
  a.num_cols = p.w.num_cols;
  a.row_bytes = p.w.row_bytes;
  a.num_tokens = p.num_tokens;
  a.x = p.x;
  a.x_stride = p.x_stride;
  a.x_rows = p.x_rows;
  a.norm_weight = p.norm_weight;
  a.norm_eps = p.norm_eps;
  a.x_q8 = p.x_q8;
  a.x_q8_scales = p.x_q8_scales;
  a.x_q8_per_256 = p.x_q8_per_256;
  a.x_q8_sums = p.x_q8_sums;
  a.x_q8_sum_squares = p.x_q8_sum_squares;
  a.x_q8_per_16 = p.x_q8_per_16;
  a.int8_fold = p.int8_activations;
  a.bias = p.bias;
  a.output = p.output;
  a.gelu_tanh = p.gelu_tanh;
  a.y = p.y;
  a.y_stride = p.y_stride;
  a.accumulate = p.accumulate;
  a.rope = p.rope;
  a.handover = p.handover;
  a.trigger = p.trigger;
  return a;
}

Status launch_decode_matmul(const DecodeMatmulParams& p, cudaStream_t stream) {
  CELLM_RETURN_IF_ERROR(check_device_weight(p.w.type, p.w.num_cols, "decode_matmul"));
  if (p.w.data == nullptr || p.w.num_rows <= 0 ||
      p.w.row_bytes != device_row_bytes(p.w.type, p.w.num_cols) ||
      p.w.layout != device_weight_layout(p.w.type, p.w.num_cols)) {
    return bad(p, "null data, no rows, or row_bytes/layout not from make_device_weight");
  }
  if (!decode_matmul_supports(p.w)) return bad(p, "not a fast layout (or unaligned data)");
  if (p.num_tokens < 0 || p.num_tokens > kDecodeMatmulMaxTokens) {
    return bad(p, "token count outside [0, " + std::to_string(kDecodeMatmulMaxTokens) + "]");
  }
  if (p.num_tokens == 0) return ok_status();
  CELLM_RETURN_IF_ERROR(check_input(p));
  CELLM_RETURN_IF_ERROR(check_output(p));

  const DecodeGemvArgs a = make_decode_gemv_args(p);
  cudaError_t launched = cudaSuccess;
  switch (p.w.type) {
    case TensorType::kF32:
      launched = launch_gemv_decode_f32_weights(a, stream);
      break;
    case TensorType::kF16:
      launched = launch_gemv_decode_f16(a, stream);
      break;
    case TensorType::kBF16:
      launched = launch_gemv_decode_bf16(a, stream);
      break;
    case TensorType::kQ8_0:
      launched = launch_gemv_decode_q8_0(a, stream);
      break;
    case TensorType::kQ4_0:
      launched = launch_gemv_decode_q4_0(a, stream);
      break;
    case TensorType::kQ4_K:
      launched = launch_gemv_decode_q4_k(a, stream);
      break;
    case TensorType::kQ6_K:
      launched = launch_gemv_decode_q6_k(a, stream);
      break;
    default:
      return internal_error(describe(p));
  }
  return pdl_launch_status(launched, "decode_matmul");
}

}  // namespace cellm::kernels
