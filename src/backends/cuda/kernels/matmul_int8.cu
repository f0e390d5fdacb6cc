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
// and added in f32.
//
// Block: 4 warps own 16 weight rows and split the K spans between them — warp w takes spans w,
// w + 4, ... The warps' sums meet in shared memory in warp order (deterministic) and the epilogue
// adds the bias and stores, accumulates, or rotates q and k and writes the K/V cache rows. Two
// ways of feeding a warp: the register kernel loads the next span into registers while it
// multiplies the current one (Q8_0, one n-tile); the staged kernel streams a warp's spans through
// a ring of shared-memory stages (cp.async), so a warp's share of a small product is in flight at
// once (Q4_0, and Q8_0 at two n-tiles).
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
  if constexpr (kQ4) {  // the nibbles n as bytes 0..15: block_sums folds in the −8
    const int shift = 4 * (b & 1);
    *from_t = (word_of(w.q[h][0], b >> 1) >> shift) & 0x0f0f0f0fu;
    *from_t4 = (word_of(w.q[h][1], b >> 1) >> shift) & 0x0f0f0f0fu;
  } else {
    *from_t = word_of(w.q[h][b >> 2], b & 3);
    *from_t4 = word_of(w.q[h][2 + (b >> 2)], b & 3);
  }
}

// The int32 sums of block b of a span for the lane's C elements: weights (A) times the tokens'
// words xb0, xb1 (B). Q4_0: Σ (n − 8) x = Σ n x − 8 Σ x, the second term from an mma of −8s
// against the same tokens (no per-byte subtraction on the weights).
template <bool kQ4>
__device__ __forceinline__ void block_sums(const SpanWeights<kQ4>& w, int b, uint32_t xb0,
                                           uint32_t xb1, int (&sums)[4]) {
  uint32_t frag_a[4];
  weight_words<kQ4>(w, 0, b, &frag_a[0], &frag_a[2]);
  weight_words<kQ4>(w, 1, b, &frag_a[1], &frag_a[3]);
  if constexpr (kQ4) {
    constexpr uint32_t kMinus8 = 0xf8f8f8f8u;  // four signed bytes −8
    const uint32_t minus8[4] = {kMinus8, kMinus8, kMinus8, kMinus8};
    int offset[4];
    mma_s8_16832(offset, minus8, xb0, xb1);
    mma_s8_16832_acc(sums, frag_a, xb0, xb1, offset);
  } else {
    mma_s8_16832(sums, frag_a, xb0, xb1);
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

// The warps' sums of a block (acc: each lane's C elements of each n-tile) added in warp order,
// then stored, accumulated or rotated into the caches.
template <int kWarps, int kNTiles>
__device__ __forceinline__ void store_block_sums(const Int8MatmulArgs& a, int64_t row0,
                                                 const float (&acc)[kNTiles][4]) {
  constexpr int kThreads = kWarps * 32;
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int g = lane >> 2;
  const int t = lane & 3;
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

// Where a lane of a block works: its warp, its fragment coordinates (g, t), the block's first
// weight row, the spans of K and where a row's scales start.
template <bool kQ4>
struct LanePlace {
  int lane;
  int warp;
  int g;
  int t;
  int64_t row0;
  int64_t num_spans;
  int64_t scale_offset;
  __device__ __forceinline__ explicit LanePlace(const Int8MatmulArgs& a)
      : lane(static_cast<int>(threadIdx.x & 31)),
        warp(static_cast<int>(threadIdx.x >> 5)),
        g(lane >> 2),
        t(lane & 3),
        row0(static_cast<int64_t>(blockIdx.x) * kBlockRows),
        num_spans(a.num_cols / kSpanCols),
        scale_offset(kQ4 ? a.num_cols / 2 : a.num_cols) {}
};

// The register kernel: each warp holds its current span and loads the next one into registers.
template <bool kQ4, int kNTiles, int kWarps>
__global__ void __launch_bounds__(kWarps * 32) int8_matmul_kernel(const Int8MatmulArgs a) {
  pdl_launch_dependents();
  const LanePlace<kQ4> at(a);
  const int lane = at.lane, warp = at.warp, g = at.g, t = at.t;
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
      const float dw0 = f16_bits_to_float(half_of(cur.w.d[0], b));  // row g
      const float dw1 = f16_bits_to_float(half_of(cur.w.d[1], b));  // row g + 8
      CELLM_UNROLL
      for (int nt = 0; nt < kNTiles; ++nt) {
        const SpanTokens& x = cur.x[nt];
        int sums[4];
        block_sums<kQ4>(cur.w, b, word_of(x.q[b >> 2], b & 3), word_of(x.q[2 + (b >> 2)], b & 3),
                        sums);
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

  store_block_sums<kWarps, kNTiles>(a, row0, acc);
}

// ---- the staged kernel: each warp streams its spans through a ring of shared-memory stages ----

// One stage of a warp's ring (bytes): the 16 weight rows' span ([16][128] Q4_0, [16][256] Q8_0),
// their scales [16][16], the 8 · kNTiles token rows' span [8 · kNTiles][256] and their block
// scales [8 · kNTiles][8] f32. Rows of 16-byte units are swizzled (swizzle_unit) so that a
// quarter warp's fragment loads (rows g and g + 1, units of t = 0..3) fall on distinct banks.
template <bool kQ4, int kNTiles>
struct Stage {
  static constexpr int kTokenRows = 8 * kNTiles;
  static constexpr int kRowBytes = kQ4 ? 128 : 256;
  static constexpr int kScales = kBlockRows * kRowBytes;
  static constexpr int kTokens = kScales + kBlockRows * 16;
  static constexpr int kTokenScales = kTokens + kTokenRows * 256;
  static constexpr int kBytes = kTokenScales + kTokenRows * 8 * 4;
};

// Where 16-byte unit u of row r sits: 8-unit rows move by 4 units on odd rows, 16-unit rows by 1.
template <int kUnits>
__device__ __forceinline__ int swizzle_unit(int r, int u) {
  return kUnits == 8 ? (u ^ (4 * (r & 1))) : (u ^ (r & 1));
}

// Issues the copies of span `span`'s weights and scales into `stage` (one lane's share).
template <bool kQ4, int kNTiles>
__device__ __forceinline__ void stage_weights(const Int8MatmulArgs& a, int64_t row0,
                                              int64_t scale_offset, int64_t span, int lane,
                                              uint8_t* stage) {
  using S = Stage<kQ4, kNTiles>;
  constexpr int kUnits = S::kRowBytes / 16;  // per row
  constexpr int kPerLane = kBlockRows * kUnits / 32;
  const auto row_of = [&](int r) {
    const int64_t row = row0 + r;
    return a.w + (row < a.num_rows ? row : a.num_rows - 1) * static_cast<int64_t>(a.row_bytes);
  };
  CELLM_UNROLL
  for (int i = 0; i < kPerLane; ++i) {
    const int u = lane + 32 * i;
    const int r = u / kUnits;
    const int c = u % kUnits;
    cp_async_16_zfill(stage + r * S::kRowBytes + 16 * swizzle_unit<kUnits>(r, c),
                      row_of(r) + S::kRowBytes * span + 16 * c, true);
  }
  if (lane < kBlockRows) {
    cp_async_16_zfill(stage + S::kScales + 16 * lane, row_of(lane) + scale_offset + 16 * span,
                      true);
  }
}

// Issues the copies of span `span`'s token rows and their scales (zeros past M) into `stage`.
template <bool kQ4, int kNTiles>
__device__ __forceinline__ void stage_tokens(const Int8MatmulArgs& a, int64_t span, int lane,
                                             uint8_t* stage) {
  using S = Stage<kQ4, kNTiles>;
  CELLM_UNROLL
  for (int i = 0; i < 4 * kNTiles; ++i) {
    const int u = lane + 32 * i;
    const int token = u / 16;
    const int c = u % 16;
    const bool valid = token < a.num_tokens;
    const int8_t* src = a.x_q8 + (valid ? token * a.num_cols + 256 * span + 16 * c : 0);
    cp_async_16_zfill(stage + S::kTokens + 256 * token + 16 * swizzle_unit<16>(token, c), src,
                      valid);
  }
  // Their scales: two units per token, on the lanes the weights' scales leave free at one tile.
  for (int u = kNTiles == 1 ? lane - 16 : lane; u >= 0 && u < 2 * S::kTokenRows; u += 32) {
    const int token = u / 2;
    const int h = u & 1;
    const bool valid = token < a.num_tokens;
    const float* src = a.x_q8_scales + (valid ? token * (a.num_cols / 32) + 8 * span + 4 * h : 0);
    cp_async_16_zfill(stage + S::kTokenScales + 32 * token + 16 * h, src, valid);
  }
}

template <int kUnits>
__device__ __forceinline__ uint4 stage_unit(const uint8_t* rows, int row_bytes, int r, int u) {
  return *reinterpret_cast<const uint4*>(rows + r * row_bytes + 16 * swizzle_unit<kUnits>(r, u));
}

// The products of one staged span: the register kernel's arithmetic on fragments read from the
// stage.
template <bool kQ4, int kNTiles>
__device__ __forceinline__ void multiply_stage(const uint8_t* stage, int g, int t,
                                               float (&acc)[kNTiles][4]) {
  using S = Stage<kQ4, kNTiles>;
  constexpr int kUnits = S::kRowBytes / 16;
  SpanWeights<kQ4> w;
  CELLM_UNROLL
  for (int h = 0; h < 2; ++h) {
    const int r = g + 8 * h;
    if constexpr (kQ4) {
      w.q[h][0] = stage_unit<kUnits>(stage, S::kRowBytes, r, t);
      w.q[h][1] = stage_unit<kUnits>(stage, S::kRowBytes, r, t + 4);
    } else {
      w.q[h][0] = stage_unit<kUnits>(stage, S::kRowBytes, r, 2 * t);
      w.q[h][1] = stage_unit<kUnits>(stage, S::kRowBytes, r, 2 * t + 1);
      w.q[h][2] = stage_unit<kUnits>(stage, S::kRowBytes, r, 2 * t + 8);
      w.q[h][3] = stage_unit<kUnits>(stage, S::kRowBytes, r, 2 * t + 9);
    }
    w.d[h] = *reinterpret_cast<const uint4*>(stage + S::kScales + 16 * r);
  }
  CELLM_UNROLL
  for (int nt = 0; nt < kNTiles; ++nt) {
    const uint8_t* tokens = stage + S::kTokens + nt * 8 * 256;  // token rows 8nt .. 8nt + 7
    SpanTokens x;
    x.q[0] = stage_unit<16>(tokens, 256, g, 2 * t);
    x.q[1] = stage_unit<16>(tokens, 256, g, 2 * t + 1);
    x.q[2] = stage_unit<16>(tokens, 256, g, 2 * t + 8);
    x.q[3] = stage_unit<16>(tokens, 256, g, 2 * t + 9);
    // [8][8]: the block scales of tokens 8nt + 2t and 8nt + 2t + 1
    const auto* dx = reinterpret_cast<const float*>(stage + S::kTokenScales) + nt * 8 * 8;
    const float4 dx0_lo = *reinterpret_cast<const float4*>(dx + 8 * (2 * t));
    const float4 dx0_hi = *reinterpret_cast<const float4*>(dx + 8 * (2 * t) + 4);
    const float4 dx1_lo = *reinterpret_cast<const float4*>(dx + 8 * (2 * t + 1));
    const float4 dx1_hi = *reinterpret_cast<const float4*>(dx + 8 * (2 * t + 1) + 4);
    const float dx0[8] = {dx0_lo.x, dx0_lo.y, dx0_lo.z, dx0_lo.w,
                          dx0_hi.x, dx0_hi.y, dx0_hi.z, dx0_hi.w};
    const float dx1[8] = {dx1_lo.x, dx1_lo.y, dx1_lo.z, dx1_lo.w,
                          dx1_hi.x, dx1_hi.y, dx1_hi.z, dx1_hi.w};
    CELLM_UNROLL
    for (int b = 0; b < 8; ++b) {
      const float dw0 = f16_bits_to_float(half_of(w.d[0], b));  // row g
      const float dw1 = f16_bits_to_float(half_of(w.d[1], b));  // row g + 8
      int sums[4];
      block_sums<kQ4>(w, b, word_of(x.q[b >> 2], b & 3), word_of(x.q[2 + (b >> 2)], b & 3), sums);
      acc[nt][0] = fmaf(static_cast<float>(sums[0]), dw0 * dx0[b], acc[nt][0]);
      acc[nt][1] = fmaf(static_cast<float>(sums[1]), dw0 * dx1[b], acc[nt][1]);
      acc[nt][2] = fmaf(static_cast<float>(sums[2]), dw1 * dx0[b], acc[nt][2]);
      acc[nt][3] = fmaf(static_cast<float>(sums[3]), dw1 * dx1[b], acc[nt][3]);
    }
  }
}

// Warp w takes spans w, w + kWarps, ... as the register kernel, but keeps kStages of them in
// flight through its ring (cp.async; the weights of the first kStages before pdl_wait()), so a
// warp's whole share of a small product is requested at once.
template <bool kQ4, int kNTiles, int kWarps, int kStages>
__global__ void __launch_bounds__(kWarps * 32) int8_matmul_staged_kernel(const Int8MatmulArgs a) {
  using S = Stage<kQ4, kNTiles>;
  extern __shared__ __align__(16) uint8_t staged_smem[];  // [kWarps][kStages][S::kBytes]
  pdl_launch_dependents();
  const LanePlace<kQ4> at(a);
  const int lane = at.lane, warp = at.warp, g = at.g, t = at.t;
  const int64_t row0 = at.row0, num_spans = at.num_spans, scale_offset = at.scale_offset;
  uint8_t* ring = staged_smem + warp * kStages * S::kBytes;
  const int my_spans =
      num_spans > warp ? static_cast<int>((num_spans - warp + kWarps - 1) / kWarps) : 0;

  // Weights first: nothing earlier writes them.
  CELLM_UNROLL
  for (int k = 0; k < kStages; ++k) {
    if (k < my_spans) {
      stage_weights<kQ4, kNTiles>(a, row0, scale_offset, warp + k * kWarps, lane,
                                  ring + k * S::kBytes);
    }
  }
  pdl_wait();
  CELLM_UNROLL
  for (int k = 0; k < kStages; ++k) {
    if (k < my_spans) {
      stage_tokens<kQ4, kNTiles>(a, warp + k * kWarps, lane, ring + k * S::kBytes);
    }
    cp_async_commit();  // group k: stage k complete (group 0 also holds every stage's weights)
  }
  float acc[kNTiles][4];
  CELLM_UNROLL
  for (int nt = 0; nt < kNTiles; ++nt) {
    CELLM_UNROLL
    for (int i = 0; i < 4; ++i) acc[nt][i] = 0.0f;
  }
  for (int k = 0; k < my_spans; ++k) {
    cp_async_wait<kStages - 1>();
    __syncwarp();
    uint8_t* stage = ring + (k % kStages) * S::kBytes;
    multiply_stage<kQ4, kNTiles>(stage, g, t, acc);
    __syncwarp();  // every lane has read the stage: refill it
    const int refill = k + kStages;
    if (refill < my_spans) {
      const int64_t span = warp + static_cast<int64_t>(refill) * kWarps;
      stage_weights<kQ4, kNTiles>(a, row0, scale_offset, span, lane, stage);
      stage_tokens<kQ4, kNTiles>(a, span, lane, stage);
    }
    cp_async_commit();
  }
  cp_async_wait<0>();
  store_block_sums<kWarps, kNTiles>(a, row0, acc);
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

template <bool kQ4, int kNTiles, int kStages>
cudaError_t launch_staged(const Int8MatmulArgs& a, dim3 grid, cudaStream_t stream) {
  constexpr int kWarps = 4;
  const auto kernel = int8_matmul_staged_kernel<kQ4, kNTiles, kWarps, kStages>;
  constexpr size_t kSmemBytes = static_cast<size_t>(kWarps) * kStages * Stage<kQ4, kNTiles>::kBytes;
  // Per launch, as the attention kernels do: the opt-in is per device.
  const cudaError_t opted_in = cudaFuncSetAttribute(
      kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kSmemBytes));
  if (opted_in != cudaSuccess) return opted_in;
  return launch_pdl(kernel, grid, dim3(kWarps * 32), kSmemBytes, stream, a);
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
cudaError_t launch_for_type(const Int8MatmulArgs& a, bool q4, cudaStream_t stream) {
  static_assert(kInt8MatmulMaxTokens == 16, "one or two n-tiles of tokens");
  const dim3 grid(static_cast<unsigned>(ceil_div(a.num_rows, kBlockRows)));
  if (a.num_tokens > 8) {
    return q4 ? launch_staged<true, 2, 2>(a, grid, stream)
              : launch_staged<false, 2, 2>(a, grid, stream);
  }
  return q4 ? launch_staged<true, 1, 3>(a, grid, stream)
            : launch_pdl(int8_matmul_kernel<false, 1, 4>, grid, dim3(4 * 32), 0, stream, a);
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
  const cudaError_t launched = launch_for_type(a, p.w.type == TensorType::kQ4_0, stream);
  return pdl_launch_status(launched, "int8_matmul");
}

}  // namespace cellm::kernels
