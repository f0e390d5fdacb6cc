// matmul_int8: the int8 tensor-core product (matmul_int8.cuh).
//
// The weights are the mma's A operand (16 rows per m-tile), the tokens its B operand (8 per
// n-tile), so up to 8 tokens waste no part of the tile. Fragments come straight from the
// interleaved layouts: chunk j (j = 0..7) of a 256-column span holds elements 4j .. 4j + 3 of
// each of the span's eight quantization blocks, word b for block b (Q8_0 weights and the
// activations: 32 bytes; Q4_0 weights: 16 bytes, block b in the low or high nibbles of word
// b / 2). The fragments of lane (g, t) for block b are elements 4t .. 4t + 3 and 16 + 4t .. of
// the block — word b of chunks t and t + 4 — of weight rows g and g + 8 (A) and of token g (B). So
// a lane loads chunks t and t + 4 of its two weight rows and its token row per span and runs the
// span's eight blocks from registers; a Q4_0 word becomes signed bytes n − 8 by a shift, a mask
// and a bytewise subtraction. Each block's int32 sums are scaled by d_w · d_x (rows g, g + 8;
// tokens 2t, 2t + 1: the lane's C elements) and added in f32.
//
// Block: 4 warps (8 for Q4_0 products of few blocks: q4_0_takes_eight_warps) own 16 weight rows and
// split the K spans between them — warp w takes spans w, w + kWarps, ... — each loading the next
// span (weights and tokens) while it multiplies the current one. The warps' sums meet in shared
// memory in warp order (deterministic) and the epilogue adds the bias and stores or accumulates.
#include <string>

#include "backends/cuda/kernels/kernel_common.cuh"
#include "backends/cuda/kernels/launch_status.h"
#include "backends/cuda/kernels/matmul_int8.cuh"
#include "backends/cuda/kernels/mma_common.cuh"
#include "backends/cuda/kernels/pdl.cuh"
#include "backends/cuda/kernels/rope_kv_output.cuh"

namespace cellm::kernels {
namespace {

constexpr int kBlockRows = 16;  // weight rows per block: one m-tile
constexpr int kSpanCols = 256;

struct Int8MatmulArgs {
  const uint8_t* w = nullptr;
  int64_t num_rows = 0;
  int64_t num_cols = 0;
  uint64_t row_bytes = 0;
  int32_t num_tokens = 0;
  const int8_t* x_q8 = nullptr;
  const float* x_q8_scales = nullptr;
  const float* bias = nullptr;
  float* y = nullptr;
  int64_t y_stride = 0;
  bool accumulate = false;
  bool rope_kv = false;
  RopeKvOutput rope;
};

// A lane's share of a span of its two weight rows (A rows g and g + 8 of the m-tile): chunks t
// and t + 4 of each, and each row's 8 block scales.
template <bool kQ4>
struct SpanWeights {
  uint4 q[2][kQ4 ? 2 : 4];  // [row g, g + 8]: Q8_0 chunk t (2 × 16 bytes), t + 4; Q4_0 t, t + 4
  uint4 d[2];               // [row g, g + 8]: 8 f16 scales
};

template <bool kQ4>
__device__ __forceinline__ void load_weights(const uint8_t* const (&rows)[2], int64_t scale_offset,
                                             int64_t span, int t, SpanWeights<kQ4>& w) {
  CELLM_UNROLL
  for (int h = 0; h < 2; ++h) {
    if constexpr (kQ4) {
      w.q[h][0] = load_stream_u4(rows[h] + 16 * (8 * span + t));
      w.q[h][1] = load_stream_u4(rows[h] + 16 * (8 * span + t + 4));
    } else {
      const uint8_t* lo = rows[h] + 32 * (8 * span + t);
      const uint8_t* hi = rows[h] + 32 * (8 * span + t + 4);
      w.q[h][0] = load_stream_u4(lo);
      w.q[h][1] = load_stream_u4(lo + 16);
      w.q[h][2] = load_stream_u4(hi);
      w.q[h][3] = load_stream_u4(hi + 16);
    }
    w.d[h] = load_stream_u4(rows[h] + scale_offset + 16 * span);
  }
}

// Row h's words of block b from chunks t and t + 4, as signed bytes.
template <bool kQ4>
__device__ __forceinline__ void weight_words(const SpanWeights<kQ4>& w, int h, int b,
                                             uint32_t* from_t, uint32_t* from_t4) {
  if constexpr (kQ4) {
    const int shift = 4 * (b & 1);
    *from_t = nibbles_minus_8((word_of(w.q[h][0], b >> 1) >> shift) & 0x0f0f0f0fu);
    *from_t4 = nibbles_minus_8((word_of(w.q[h][1], b >> 1) >> shift) & 0x0f0f0f0fu);
  } else {
    *from_t = word_of(w.q[h][b >> 2], b & 3);
    *from_t4 = word_of(w.q[h][2 + (b >> 2)], b & 3);
  }
}

// A lane's share of a span of one n-tile of tokens: chunks t and t + 4 of token row g (the B
// fragments). The block scales of tokens 2t and 2t + 1 (the C columns it scales) are read where
// they are used (L1): held for the next span, they cost 32 registers — q4_0 at 8 sessions 4-5%
// faster without them.
struct SpanTokens {
  uint4 q[4];  // chunk t (blocks 0..3, 4..7), chunk t + 4
};

__device__ __forceinline__ void load_tokens(const Int8MatmulArgs& a, int n_tile, int64_t span,
                                            int g, int t, SpanTokens& s) {
  const int token = 8 * n_tile + g;
  if (token < a.num_tokens) {
    const int8_t* x = a.x_q8 + token * a.num_cols;
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
template <bool kQ4, int kNTiles>
struct SpanData {
  SpanWeights<kQ4> w;
  SpanTokens x[kNTiles];
};

// kWarps 8: held to two blocks per SM (Q4_0 needs no more registers for it).
template <bool kQ4, int kNTiles, int kWarps>
__global__ void __launch_bounds__(kWarps * 32, kWarps == 8 ? 2 : 0)
    int8_matmul_kernel(const Int8MatmulArgs a) {
  constexpr int kThreads = kWarps * 32;
  pdl_launch_dependents();
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int g = lane >> 2;
  const int t = lane & 3;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kBlockRows;
  const int64_t num_spans = a.num_cols / kSpanCols;
  const int64_t scale_offset = kQ4 ? a.num_cols / 2 : a.num_cols;
  // A rows g and g + 8 of the m-tile are weight rows row0 + g (+ 8); past N they read the last.
  const uint8_t* rows[2];
  CELLM_UNROLL
  for (int h = 0; h < 2; ++h) {
    const int64_t r = row0 + g + 8 * h;
    rows[h] = a.w + (r < a.num_rows ? r : a.num_rows - 1) * static_cast<int64_t>(a.row_bytes);
  }

  // Weights first: nothing earlier writes them.
  int64_t span = warp;
  SpanData<kQ4, kNTiles> cur;
  if (span < num_spans) load_weights<kQ4>(rows, scale_offset, span, t, cur.w);
  pdl_wait();
  if (span < num_spans) {
    CELLM_UNROLL
    for (int nt = 0; nt < kNTiles; ++nt) load_tokens(a, nt, span, g, t, cur.x[nt]);
  }

  const float* dx_rows[kNTiles][2];  // tokens 8nt + 2t + i: their block scales, null past M
  CELLM_UNROLL
  for (int nt = 0; nt < kNTiles; ++nt) {
    CELLM_UNROLL
    for (int i = 0; i < 2; ++i) {
      const int token = 8 * nt + 2 * t + i;
      dx_rows[nt][i] = token < a.num_tokens ? a.x_q8_scales + token * (a.num_cols / 32) : nullptr;
    }
  }
  float acc[kNTiles][4];
  CELLM_UNROLL
  for (int nt = 0; nt < kNTiles; ++nt) {
    CELLM_UNROLL
    for (int i = 0; i < 4; ++i) acc[nt][i] = 0.0f;
  }
  while (span < num_spans) {
    const int64_t next_span = span + kWarps;
    SpanData<kQ4, kNTiles> next;
    if (next_span < num_spans) {
      load_weights<kQ4>(rows, scale_offset, next_span, t, next.w);
      CELLM_UNROLL
      for (int nt = 0; nt < kNTiles; ++nt) load_tokens(a, nt, next_span, g, t, next.x[nt]);
    }
    CELLM_UNROLL
    for (int b = 0; b < 8; ++b) {
      uint32_t frag_a[4];
      weight_words<kQ4>(cur.w, 0, b, &frag_a[0], &frag_a[2]);
      weight_words<kQ4>(cur.w, 1, b, &frag_a[1], &frag_a[3]);
      const float dw0 = f16_bits_to_float(half_of(cur.w.d[0], b));  // row g
      const float dw1 = f16_bits_to_float(half_of(cur.w.d[1], b));  // row g + 8
      CELLM_UNROLL
      for (int nt = 0; nt < kNTiles; ++nt) {
        const SpanTokens& x = cur.x[nt];
        int sums[4];
        mma_s8_16832(sums, frag_a, word_of(x.q[b >> 2], b & 3), word_of(x.q[2 + (b >> 2)], b & 3));
        const float dx0 = dx_rows[nt][0] != nullptr ? dx_rows[nt][0][8 * span + b] : 0.0f;
        const float dx1 = dx_rows[nt][1] != nullptr ? dx_rows[nt][1][8 * span + b] : 0.0f;
        acc[nt][0] = fmaf(static_cast<float>(sums[0]), dw0 * dx0, acc[nt][0]);
        acc[nt][1] = fmaf(static_cast<float>(sums[1]), dw0 * dx1, acc[nt][1]);
        acc[nt][2] = fmaf(static_cast<float>(sums[2]), dw1 * dx0, acc[nt][2]);
        acc[nt][3] = fmaf(static_cast<float>(sums[3]), dw1 * dx1, acc[nt][3]);
      }
    }
    if (next_span < num_spans) cur = next;
    span = next_span;
  }

  // The warps' sums in shared memory ([warp][token][row], rows padded against bank conflicts),
  // then added in warp order.
  constexpr int kTokens = 8 * kNTiles;
  constexpr int kStride = kBlockRows + 1;
  __shared__ float partial[kWarps][kTokens][kStride];
  CELLM_UNROLL
  for (int nt = 0; nt < kNTiles; ++nt) {
    CELLM_UNROLL
    for (int i = 0; i < 4; ++i) {
      partial[warp][8 * nt + 2 * t + (i & 1)][g + 8 * (i >> 1)] = acc[nt][i];
    }
  }
  __syncthreads();
  const auto row_sum = [&](int token, int r) {
    float sum = partial[0][token][r];
    CELLM_UNROLL
    for (int w = 1; w < kWarps; ++w) sum += partial[w][token][r];
    if (a.bias != nullptr) sum += a.bias[row0 + r];
    return sum;
  };
  if (a.rope_kv) {  // pairs of rows (2p, 2p + 1): num_rows is even, so is row0
    constexpr int kPairs = kBlockRows / 2;
    for (int o = threadIdx.x; o < kTokens * kPairs; o += kThreads) {
      const int token = o / kPairs;
      const int r = 2 * (o % kPairs);
      if (token >= a.num_tokens || row0 + r >= a.num_rows) continue;
      rope_kv_store_pair(a.rope, token, row0 + r, row_sum(token, r), row_sum(token, r + 1), a.y,
                         a.y_stride);
    }
    return;
  }
  for (int o = threadIdx.x; o < kTokens * kBlockRows; o += kThreads) {
    const int token = o / kBlockRows;
    const int r = o % kBlockRows;
    const int64_t row = row0 + r;
    if (token >= a.num_tokens || row >= a.num_rows) continue;
    const float sum = row_sum(token, r);
    float* out = a.y + token * a.y_stride + row;
    *out = a.accumulate ? *out + sum : sum;
  }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Warps per block (they split K): 4, or 8 for Q4_0 products whose blocks all fit at two per SM
// (an 8B model's output and down products: 256 blocks), which doubles their weights in flight per
// SM. On the H200, q4_0 decode at 3 / 5 / 8 sessions: +3.5 / +6.5 / +5.3% (8 warps for every
// Q4_0 product: −2%; 16 warps: −15%). Q8_0 at 8 warps needs 128 registers for two blocks per SM,
// spills, and loses 8–25%.
bool q4_0_takes_eight_warps(int64_t num_blocks) {
  int device = 0;
  int num_sms = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&num_sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
    return false;
  }
  return num_blocks <= 2 * static_cast<int64_t>(num_sms);
}

template <bool kQ4>
cudaError_t launch_typed(const Int8MatmulArgs& a, cudaStream_t stream) {
  const int64_t num_blocks = ceil_div(a.num_rows, kBlockRows);
  const dim3 grid(static_cast<unsigned>(num_blocks));
  static_assert(kInt8MatmulMaxTokens == 8, "one n-tile of tokens");
  if constexpr (kQ4) {
    if (q4_0_takes_eight_warps(num_blocks)) {
      return launch_pdl(int8_matmul_kernel<true, 1, 8>, grid, dim3(8 * 32), 0, stream, a);
    }
  }
  return launch_pdl(int8_matmul_kernel<kQ4, 1, 4>, grid, dim3(4 * 32), 0, stream, a);
}

}  // namespace

bool int8_matmul_supports(const DeviceWeight& w) {
  return (w.type == TensorType::kQ8_0 || w.type == TensorType::kQ4_0) &&
         w.layout == WeightLayout::kInterleaved && w.num_cols % kSpanCols == 0 && aligned16(w.data);
}

int32_t int8_matmul_min_tokens(TensorType type) { return type == TensorType::kQ4_0 ? 3 : 2; }

Status launch_int8_matmul(const Int8MatmulParams& p, cudaStream_t stream) {
  const std::string what = "int8_matmul: " + std::string(tensor_type_name(p.w.type)) + " [" +
                           std::to_string(p.w.num_rows) + ", " + std::to_string(p.w.num_cols) +
                           "], " + std::to_string(p.num_tokens) + " tokens: ";
  if (!int8_matmul_supports(p.w) || p.w.num_rows <= 0 ||
      p.w.row_bytes != device_row_bytes(p.w.type, p.w.num_cols)) {
    return invalid_argument(what +
                            "needs an interleaved Q8_0 / Q4_0 weight from make_device_weight");
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
  Int8MatmulArgs a;
  a.w = static_cast<const uint8_t*>(p.w.data);
  a.num_rows = p.w.num_rows;
  a.num_cols = p.w.num_cols;
  a.row_bytes = p.w.row_bytes;
  a.num_tokens = p.num_tokens;
  a.x_q8 = p.x_q8;
  a.x_q8_scales = p.x_q8_scales;
  a.bias = p.bias;
  a.y = p.y;
  a.y_stride = p.y_stride;
  a.accumulate = p.accumulate;
  a.rope_kv = p.rope_kv;
  a.rope = p.rope;
  const cudaError_t launched = p.w.type == TensorType::kQ4_0 ? launch_typed<true>(a, stream)
                                                             : launch_typed<false>(a, stream);
  return pdl_launch_status(launched, "int8_matmul");
}

}  // namespace cellm::kernels
