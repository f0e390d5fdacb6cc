// matmul_int8: the int8 tensor-core product (matmul_int8.cuh).
//
// The weights are the mma's A operand (16 rows per m-tile), the tokens its B operand (8 per
// n-tile, one or two of them), so 8 or 16 tokens waste no part of a tile. Fragments come straight
// from the interleaved layouts: chunk j (j = 0..7) of a 256-column span holds elements 4j .. 4j + 3
// of each of the span's eight quantization blocks, word b for block b (Q8_0 weights and the
// activations: 32 bytes; Q4_0 weights: 16 bytes, block b in the low or high nibbles of word
// b / 2). The fragments of lane (g, t) for block b are elements 4t .. 4t + 3 and 16 + 4t .. of
// the block — word b of chunks t and t + 4 — of weight rows g and g + 8 (A) and of token g (B). So
// a lane takes chunks t and t + 4 of its two weight rows and its token row per span and runs the
// span's eight blocks from registers; a Q4_0 word is its nibbles as bytes 0..15 (a shift and a
// mask), the −8 folded into the sums by an mma of −8s against the same tokens. Each block's
// int32 sums are scaled by d_w · d_x (rows g, g + 8; tokens 2t, 2t + 1: the lane's C elements)
// and added in f32. A Q4_K super-block is a span whose nibbles sit as a Q4_0 span's: its 16-byte
// head (d, dmin, the 6-bit sub-block scales and mins) takes the place of the 8 block scales, and
// each block adds d · s_b · Σ n x − dmin · m_b · Σ x, the tokens' Σ x from an mma of ones. A Q6_K
// super-block is a span too: its low nibbles sit as a Q4_0 span's, each chunk's high bit pairs
// and the span's 16 sub-block scales and f16 scale are staged beside them; a block's two halves
// (chunks t and t + 4: elements 0..15 and 16..31, one sub-block scale each) take one m16n8k16
// mma each on the six-bit values less 32 as signed bytes, d · (s₀ · Σ₀ + s₁ · Σ₁) per block.
//
// Block: 4 warps own 16 weight rows and split the K spans between them — warp w takes spans w,
// w + 4, ... The warps' sums meet in shared memory in warp order (deterministic) and the epilogue
// adds the bias and stores, accumulates, or rotates q and k and writes the K/V cache rows. Two
// ways of feeding a warp: the register kernel loads the next span into registers while it
// multiplies the current one (Q8_0, one n-tile); the staged kernel streams a warp's spans through
// a ring of shared-memory stages (cp.async), so a warp's share of a small product is in flight at
// once (Q4_0, Q4_K and Q6_K, and Q8_0 at two n-tiles).
#include <algorithm>
#include <cstdlib>
#include <string>

#include "backends/cuda/kernels/launch_status.h"
#include "backends/cuda/kernels/matmul_int8.cuh"
#include "backends/cuda/kernels/matmul_int8_parts.cuh"
#include "backends/cuda/kernels/matmul_int8_staged.cuh"
#include "backends/cuda/kernels/pdl.cuh"

namespace cellm::kernels {
namespace int8_matmul_detail {

// ---- the register kernel (Q8_0, one n-tile) ---------------------------------------------------

constexpr int kRegisterWarps = 4;

// A lane's Q8_0 weight chunks t and t + 4 of span `span` of rows g and g + 8, and their scales.
__device__ __forceinline__ void load_weights(const uint8_t* const (&rows)[2], int64_t scale_offset,
                                             int64_t span, int t, SpanWeights<false>& w) {
  CELLM_UNROLL
  for (int h = 0; h < 2; ++h) {
    const uint8_t* lo = rows[h] + 32 * (8 * span + t);
    const uint8_t* hi = rows[h] + 32 * (8 * span + t + 4);
    w.q[h][0] = load_stream_u4(lo);
    w.q[h][1] = load_stream_u4(lo + 16);
    w.q[h][2] = load_stream_u4(hi);
    w.q[h][3] = load_stream_u4(hi + 16);
    w.d[h] = load_stream_u4(rows[h] + scale_offset + 16 * span);
  }
}

// Token g's chunks t and t + 4 of span `span` (zeros past M).
__device__ __forceinline__ void load_tokens(const Int8MatmulArgs& a, int64_t span, int g, int t,
                                            SpanTokens& s) {
  if (g < a.num_tokens) {
    const int8_t* x = a.x_q8 + g * a.num_cols;
    const int8_t* lo = x + 32 * (8 * span + t);
    const int8_t* hi = x + 32 * (8 * span + t + 4);
    s.q[0] = load_u4(lo);
    s.q[1] = load_u4(lo + 16);
    s.q[2] = load_u4(hi);
    s.q[3] = load_u4(hi + 16);
  } else {
    CELLM_UNROLL
    for (int i = 0; i < 4; ++i) s.q[i] = make_uint4(0, 0, 0, 0);
  }
}

// Everything a lane multiplies in one span, loaded a span ahead.
struct SpanData {
  SpanWeights<false> w;
  SpanTokens x;
};

// Each warp holds its current span and loads the next one into registers.
__global__ void __launch_bounds__(kRegisterWarps * 32) int8_matmul_kernel(const Int8MatmulArgs a) {
  pdl_launch_dependents();
  const LanePlace<false> at(a);
  const int warp = at.warp, g = at.g, t = at.t;
  const int64_t row0 = at.row0, num_spans = at.num_spans, scale_offset = at.scale_offset;
  // A rows g and g + 8 of the m-tile are weight rows row0 + g (+ 8); past N they read the last.
  const uint8_t* rows[2];
  CELLM_UNROLL
  for (int h = 0; h < 2; ++h) {
    const int64_t r = row0 + g + 8 * h;
    rows[h] = a.w + (r < a.num_rows ? r : a.num_rows - 1) * static_cast<int64_t>(a.row_bytes);
  }

  // Weights first: nothing earlier writes them.
  int64_t span = warp;
  SpanData cur;
  if (span < num_spans) load_weights(rows, scale_offset, span, t, cur.w);
  pdl_wait();
  if (span < num_spans) load_tokens(a, span, g, t, cur.x);

  const float* dx_rows[2];  // tokens 2t + i: their block scales, null past M
  CELLM_UNROLL
  for (int i = 0; i < 2; ++i) {
    const int token = 2 * t + i;
    dx_rows[i] = token < a.num_tokens ? a.x_q8_scales + token * (a.num_cols / 32) : nullptr;
  }
  float acc[1][4] = {{0.0f, 0.0f, 0.0f, 0.0f}};
  while (span < num_spans) {
    const int64_t next_span = span + kRegisterWarps;
    SpanData next;
    if (next_span < num_spans) {
      load_weights(rows, scale_offset, next_span, t, next.w);
      load_tokens(a, next_span, g, t, next.x);
    }
    CELLM_UNROLL
    for (int b = 0; b < 8; ++b) {
      const float dw0 = f16_bits_to_float(half_of(cur.w.d[0], b));  // row g
      const float dw1 = f16_bits_to_float(half_of(cur.w.d[1], b));  // row g + 8
      int sums[4];
      block_sums<false>(cur.w, b, word_of(cur.x.q[b >> 2], b & 3),
                        word_of(cur.x.q[2 + (b >> 2)], b & 3), sums);
      const float dx0 = dx_rows[0] != nullptr ? dx_rows[0][8 * span + b] : 0.0f;
      const float dx1 = dx_rows[1] != nullptr ? dx_rows[1][8 * span + b] : 0.0f;
      acc[0][0] = fmaf(static_cast<float>(sums[0]), dw0 * dx0, acc[0][0]);
      acc[0][1] = fmaf(static_cast<float>(sums[1]), dw0 * dx1, acc[0][1]);
      acc[0][2] = fmaf(static_cast<float>(sums[2]), dw1 * dx0, acc[0][2]);
      acc[0][3] = fmaf(static_cast<float>(sums[3]), dw1 * dx1, acc[0][3]);
    }
    if (next_span < num_spans) cur = next;
    span = next_span;
  }

  store_block_sums<kRegisterWarps, 1>(a, row0, acc);
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

template <StagedType kType, int kNTiles, int kStages, bool kPer256 = false>
cudaError_t launch_staged(const Int8MatmulArgs& a, dim3 grid, cudaStream_t stream) {
  constexpr int kWarps = 4;
  const auto kernel = int8_matmul_staged_kernel<kType, kNTiles, kWarps, kStages, kPer256>;
  constexpr size_t kSmemBytes =
      static_cast<size_t>(kWarps) * kStages * Stage<kType, kNTiles>::kBytes;
  // Per launch, as the attention kernels do: the opt-in is per device.
  const cudaError_t opted_in = cudaFuncSetAttribute(
      kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kSmemBytes));
  if (opted_in != cudaSuccess) return opted_in;
  return launch_pdl(kernel, grid, dim3(kWarps * 32), kSmemBytes, stream, a);
}

// A K-quant's staged product: one n-tile with three stages or two with two, on activations
// quantized per 32 or per 256 columns (a.x_q8_per_256).
template <StagedType kType>
cudaError_t launch_k_quant(const Int8MatmulArgs& a, dim3 grid, cudaStream_t stream) {
  const bool wide = a.num_tokens > 8;
  if (a.x_q8_per_256) {
    return wide ? launch_staged<kType, 2, 2, true>(a, grid, stream)
                : launch_staged<kType, 1, 3, true>(a, grid, stream);
  }
  return wide ? launch_staged<kType, 2, 2>(a, grid, stream)
              : launch_staged<kType, 1, 3>(a, grid, stream);
}

// One n-tile: Q8_0 on the register kernel, Q4_0 staged with three stages. Two n-tiles: both
// staged with two (their stages hold twice the tokens). On the H200, Llama-3.1-8B geometry:
// - one tile, q4_0 decode at 3 / 5 / 8 sessions: 1,177 / 1,860 / 2,881 tok/s with the register
//   kernel (eight warps for products of few blocks), 1,272 / 1,991 / 3,070 staged (two stages:
//   −3%, four: −1 to −5%; eight warps: −4 to −6%); Q8_0 staged: −1 to −7% (its stages hold twice
//   the weight bytes);
// - two tiles against the bf16 tensor-core product they replace, 9 / 12 / 16 sessions: q4_0
//   2,435 / 3,184 / 4,144 → 2,651 / 3,469 / 4,508 tok/s (three stages: 2% less); q8_0 at 12 / 16
//   sessions 2,591 / 3,380 → 3,122–3,127 / 4,073–4,084 (the register kernel's two tiles, 245
//   registers: 2,647–2,664 / 3,462–3,466; three stages: 3,020–3,039 / 3,930–3,947).
// Q4_K and Q6_K as Q4_0 (a super-block is a span). Q6_K, H200, tok/s against the dp4a decode
// product it replaces (q6_k 2 / 3 / 4 / 8 / 16 sessions, twice): 509–523 / 567–572 / 757–758 /
// 1,566–1,567 / 2,933–2,959 → 586–592 / 923 / 1,219–1,224 / 2,206–2,217 / 3,403–3,406.
cudaError_t launch_for_type(const Int8MatmulArgs& a, TensorType type, cudaStream_t stream) {
  static_assert(kInt8MatmulMaxTokens == 16, "one or two n-tiles of tokens");
  const dim3 grid(static_cast<unsigned>(ceil_div(a.num_rows, kBlockRows)));
  const bool wide = a.num_tokens > 8;
  switch (type) {
    case TensorType::kQ4_K:
      return launch_k_quant<StagedType::kQ4_K>(a, grid, stream);
    case TensorType::kQ6_K:
      return launch_k_quant<StagedType::kQ6_K>(a, grid, stream);
    case TensorType::kQ4_0:
      return wide ? launch_staged<StagedType::kQ4_0, 2, 2>(a, grid, stream)
                  : launch_staged<StagedType::kQ4_0, 1, 3>(a, grid, stream);
    default:
      return wide ? launch_staged<StagedType::kQ8_0, 2, 2>(a, grid, stream)
                  : launch_pdl(int8_matmul_kernel, grid, dim3(kRegisterWarps * 32), 0, stream, a);
  }
}

}  // namespace int8_matmul_detail

using int8_matmul_detail::aligned16;
using int8_matmul_detail::kSpanCols;

bool int8_matmul_supports(const DeviceWeight& w) {
  return (w.type == TensorType::kQ8_0 || w.type == TensorType::kQ4_0 ||
          w.type == TensorType::kQ4_K || w.type == TensorType::kQ6_K) &&
         w.layout == WeightLayout::kInterleaved && w.num_cols % kSpanCols == 0 && aligned16(w.data);
}

int32_t int8_matmul_min_tokens(TensorType type) {
  const auto from_env = [](const char* name) {
    const char* value = std::getenv(name);
    return value != nullptr ? std::max(2, std::atoi(value)) : 2;
  };
  static const int32_t q4_k = from_env("CELLM_CUDA_Q4K_MMA_FROM");
  static const int32_t q6_k = from_env("CELLM_CUDA_Q6K_MMA_FROM");
  switch (type) {
    case TensorType::kQ4_0:
      return 3;
    case TensorType::kQ4_K:
      return q4_k;
    case TensorType::kQ6_K:
      return q6_k;
    default:
      return 2;
  }
}

Status launch_int8_matmul(const Int8MatmulParams& p, cudaStream_t stream) {
  const std::string what = "int8_matmul: " + std::string(tensor_type_name(p.w.type)) + " [" +
                           std::to_string(p.w.num_rows) + ", " + std::to_string(p.w.num_cols) +
                           "], " + std::to_string(p.num_tokens) + " tokens: ";
  if (!int8_matmul_supports(p.w) || p.w.num_rows <= 0 ||
      p.w.row_bytes != device_row_bytes(p.w.type, p.w.num_cols)) {
    return invalid_argument(
        what + "needs an interleaved Q8_0 / Q4_0 / Q4_K / Q6_K weight from make_device_weight");
  }
  if (p.num_tokens < 0 || p.num_tokens > kInt8MatmulMaxTokens) {
    return invalid_argument(what + "token count outside [0, " +
                            std::to_string(kInt8MatmulMaxTokens) + "]");
  }
  if (p.num_tokens == 0) return ok_status();
  if (p.x_q8 == nullptr || p.x_q8_scales == nullptr || !aligned16(p.x_q8) ||
      !aligned16(p.x_q8_scales) || p.y == nullptr || (!p.rope_kv && p.y_stride < p.w.num_rows)) {
    return invalid_argument(what + "null or unaligned input, null y, or y stride below N");
  }
  if (p.rope_kv) {
    if (p.accumulate) return invalid_argument(what + "RoPE output with accumulate");
    const std::string problem = rope_kv_output_problem(p.rope, p.w.num_rows, p.y_stride);
    if (!problem.empty()) return invalid_argument(what + problem);
  }
  int8_matmul_detail::Int8MatmulArgs a;
  a.w = static_cast<const uint8_t*>(p.w.data);
  a.num_rows = p.w.num_rows;
  a.num_cols = p.w.num_cols;
  a.row_bytes = p.w.row_bytes;
  a.num_tokens = p.num_tokens;
  a.x_q8 = p.x_q8;
  a.x_q8_scales = p.x_q8_scales;
  a.x_q8_per_256 = p.x_q8_per_256;
  a.bias = p.bias;
  a.y = p.y;
  a.y_stride = p.y_stride;
  a.accumulate = p.accumulate;
  a.rope_kv = p.rope_kv;
  a.rope = p.rope;
  const cudaError_t launched = int8_matmul_detail::launch_for_type(a, p.w.type, stream);
  return pdl_launch_status(launched, "int8_matmul");
}

}  // namespace cellm::kernels
