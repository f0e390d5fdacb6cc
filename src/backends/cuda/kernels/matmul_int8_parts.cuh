// matmul_int8_parts: what both int8 tensor-core product kernels (matmul_int8.cu: the register
// kernel; matmul_int8_staged.cuh: the staged one) share — the launch arguments, a lane's fragments
// of a span and their block sums, where a lane works, and the block's epilogue (the warps' sums
// added in warp order, then stored, accumulated or rotated into the caches). The layouts and the
// fragment mapping are described at the top of matmul_int8.cu. Device code; included by
// matmul_int8.cu and matmul_int8_staged.cuh only. Knows nothing of the forward. Thread-safety:
// stateless device functions.
#pragma once

#include <cstdint>

#include "backends/cuda/kernels/kernel_common.cuh"
#include "backends/cuda/kernels/mma_common.cuh"
#include "backends/cuda/kernels/rope_kv_output.cuh"

namespace cellm::kernels::int8_matmul_detail {

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
  bool x_q8_per_256 = false;
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

// Row h's words of block b from chunks t and t + 4, as the mma's bytes (Q4_0: the nibbles 0..15,
// block_sums folds in their −8).
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

}  // namespace cellm::kernels::int8_matmul_detail
