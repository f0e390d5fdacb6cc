// matmul_int8_staged: the staged int8 tensor-core product kernel (matmul_int8.cu says when it
// runs): each warp streams its spans through a ring of shared-memory stages filled by cp.async, so
// a warp's share of a small product is in flight at once. Device code; include only from
// matmul_int8.cu (its launch). Knows nothing of the forward. Thread-safety: a kernel; each
// warp's ring is its own.
#pragma once

#include <cstdint>

#include "backends/cuda/kernels/matmul_int8_parts.cuh"
#include "backends/cuda/kernels/pdl.cuh"
#include "backends/cuda/kernels/weight_decode.cuh"

namespace cellm::kernels::int8_matmul_detail {

// The weights a staged product streams.
enum class StagedType { kQ8_0, kQ4_0, kQ4_K, kQ6_K };

// Whether a type's span of quants is a Q4_0-like [16][128] (nibbles; Q6_K: its low nibbles).
template <StagedType kType>
inline constexpr bool kStagedQ4 = kType != StagedType::kQ8_0;

// One stage of a warp's ring (bytes): the 16 weight rows' span ([16][128] Q4_0 / Q4_K / Q6_K's
// low nibbles, [16][256] Q8_0), their scales [16][16] (Q4_K: the super-block's head; Q6_K: its
// 16 sub-block scales), Q6_K's high bit pairs [16][64] and the 16 bytes holding its f16 scale
// [16][16], the 8 · kNTiles token rows' span [8 · kNTiles][256] and their block scales
// [8 · kNTiles][8] f32. Rows of 16-byte units are swizzled (swizzle_unit) so that a quarter warp's
// fragment loads (rows g and g + 1, units of t = 0..3) fall on distinct banks.
template <StagedType kType, int kNTiles>
struct Stage {
  static constexpr int kTokenRows = 8 * kNTiles;
  static constexpr int kRowBytes = kStagedQ4<kType> ? 128 : 256;
  static constexpr int kScales = kBlockRows * kRowBytes;
  static constexpr int kHigh = kScales + kBlockRows * 16;  // Q6_K
  static constexpr int kD = kHigh + kBlockRows * 64;       // Q6_K
  static constexpr int kTokens = kType == StagedType::kQ6_K ? kD + kBlockRows * 16 : kHigh;
  static constexpr int kTokenScales = kTokens + kTokenRows * 256;
  static constexpr int kBytes = kTokenScales + kTokenRows * 8 * 4;
};

// Where 16-byte unit u of row r sits: 8-unit rows move by 4 units on odd rows, 16-unit rows by 1.
template <int kUnits>
__device__ __forceinline__ int swizzle_unit(int r, int u) {
  return kUnits == 8 ? (u ^ (4 * (r & 1))) : (u ^ (r & 1));
}

// Issues the copies of span `span`'s weights and scales into `stage` (one lane's share). Q4_K: a
// span is one 144-byte super-block — its 16-byte head (d, dmin, the packed scales and mins) goes
// where Q4_0's 8 block scales go, its 128 bytes of nibbles (the same arrangement as a Q4_0 span's)
// where Q4_0's go. Q6_K (interleaved: low nibbles, high bit pairs, scales and f16 scales each in
// their own part of the row, weight_decode.cuh): its 128 bytes of low nibbles where Q4_0's go,
// its 16 sub-block scales where Q4_0's scales go, and its high bit pairs and the 16 bytes holding
// its f16 scale (those of 8 spans) in their own places.
template <StagedType kType, int kNTiles>
__device__ __forceinline__ void stage_weights(const Int8MatmulArgs& a, int64_t row0,
                                              int64_t scale_offset, int64_t span, int lane,
                                              uint8_t* stage) {
  using S = Stage<kType, kNTiles>;
  constexpr bool kK = kType == StagedType::kQ4_K;
  constexpr int kUnits = S::kRowBytes / 16;  // per row
  constexpr int kPerLane = kBlockRows * kUnits / 32;
  constexpr int64_t kSpanBytes = kK ? 144 : S::kRowBytes;  // a row's bytes per span
  constexpr int64_t kQuantsAt = kK ? 16 : 0;               // the span's quants within them
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
                      row_of(r) + kSpanBytes * span + kQuantsAt + 16 * c, true);
  }
  if constexpr (kType == StagedType::kQ6_K) {
    const int64_t k = a.num_cols;
    CELLM_UNROLL
    for (int i = 0; i < 2; ++i) {  // [16][4] units of high bit pairs
      const int u = lane + 32 * i;
      const int r = u / 4;
      const int c = u % 4;
      cp_async_16_zfill(stage + S::kHigh + 64 * r + 16 * c, row_of(r) + k / 2 + 64 * span + 16 * c,
                        true);
    }
    const int r = lane % kBlockRows;
    const uint8_t* from = lane < kBlockRows ? row_of(r) + 3 * k / 4 + 16 * span
                                            : row_of(r) + 3 * k / 4 + k / 16 + 16 * (span >> 3);
    cp_async_16_zfill(stage + (lane < kBlockRows ? S::kScales : S::kD) + 16 * r, from, true);
  } else if (lane < kBlockRows) {
    const uint8_t* scales =
        kK ? row_of(lane) + kSpanBytes * span : row_of(lane) + scale_offset + 16 * span;
    cp_async_16_zfill(stage + S::kScales + 16 * lane, scales, true);
  }
}

// Issues the copies of span `span`'s token rows and their scales (zeros past M) into `stage`.
template <StagedType kType, int kNTiles>
__device__ __forceinline__ void stage_tokens(const Int8MatmulArgs& a, int64_t span, int lane,
                                             uint8_t* stage) {
  using S = Stage<kType, kNTiles>;
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
  constexpr bool kLanesFree = kNTiles == 1 && kType != StagedType::kQ6_K;
  for (int u = kLanesFree ? lane - 16 : lane; u >= 0 && u < 2 * S::kTokenRows; u += 32) {
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

// A lane's B fragments of n-tile nt of a staged span (token 8nt + g's chunks t and t + 4) and the
// block scales of the tokens of its C columns (dx[0]: token 8nt + 2t, dx[1]: 8nt + 2t + 1).
template <class S>
__device__ __forceinline__ void stage_tile_tokens(const uint8_t* stage, int nt, int g, int t,
                                                  SpanTokens* x, float (&dx)[2][8]) {
  const uint8_t* tokens = stage + S::kTokens + nt * 8 * 256;  // token rows 8nt .. 8nt + 7
  x->q[0] = stage_unit<16>(tokens, 256, g, 2 * t);
  x->q[1] = stage_unit<16>(tokens, 256, g, 2 * t + 1);
  x->q[2] = stage_unit<16>(tokens, 256, g, 2 * t + 8);
  x->q[3] = stage_unit<16>(tokens, 256, g, 2 * t + 9);
  CELLM_UNROLL
  for (int j = 0; j < 2; ++j) {
    const auto* from =
        reinterpret_cast<const float*>(stage + S::kTokenScales) + nt * 8 * 8 + 8 * (2 * t + j);
    const float4 lo = *reinterpret_cast<const float4*>(from);
    const float4 hi = *reinterpret_cast<const float4*>(from + 4);
    dx[j][0] = lo.x, dx[j][1] = lo.y, dx[j][2] = lo.z, dx[j][3] = lo.w;
    dx[j][4] = hi.x, dx[j][5] = hi.y, dx[j][6] = hi.z, dx[j][7] = hi.w;
  }
}

// Q4_K's eight blocks of one n-tile (multiply_stage below): w.d[h] holds row h's head. kPer256:
// the tokens' eight block scales are one (QuantizeActivationsParams::per_256), so the blocks'
// sums meet the integer scales and mins in integers and the span converts once.
template <int kNTiles, bool kPer256 = false>
__device__ __forceinline__ void multiply_q4_k_blocks(const SpanWeights<true>& w,
                                                     const SpanTokens& x, const float (&dx0)[8],
                                                     const float (&dx1)[8], int nt,
                                                     float (&acc)[kNTiles][4]) {
  int scale[2][8];
  int min[2][8];
  float d[2];
  float dmin[2];
  CELLM_UNROLL
  for (int h = 0; h < 2; ++h) {
    DecodeQ4_K::Chunk head;
    head.head = w.d[h];
    DecodeQ4_K::int8_quant_scales(head, 0, scale[h], min[h]);
    d[h] = DecodeQ4_K::int8_d(head);
    dmin[h] = DecodeQ4_K::int8_dmin(head);
  }
  constexpr uint32_t kOnes = 0x01010101u;
  const uint32_t ones[4] = {kOnes, kOnes, kOnes, kOnes};
  int scaled[4] = {0, 0, 0, 0};  // kPer256: Σ_b s_b · Σ n x per C element
  int mins[4] = {0, 0, 0, 0};    // kPer256: Σ_b m_b · Σ x
  CELLM_UNROLL
  for (int b = 0; b < 8; ++b) {
    const uint32_t xb0 = word_of(x.q[b >> 2], b & 3);
    const uint32_t xb1 = word_of(x.q[2 + (b >> 2)], b & 3);
    uint32_t frag_a[4];
    weight_words<true>(w, 0, b, &frag_a[0], &frag_a[2]);
    weight_words<true>(w, 1, b, &frag_a[1], &frag_a[3]);
    int sums[4];
    int x_sums[4];  // Σ x of tokens 2t, 2t + 1 (rows alike)
    mma_s8_16832(sums, frag_a, xb0, xb1);
    mma_s8_16832(x_sums, ones, xb0, xb1);
    if constexpr (kPer256) {
      CELLM_UNROLL
      for (int i = 0; i < 4; ++i) {
        scaled[i] += scale[i >> 1][b] * sums[i];
        mins[i] += min[i >> 1][b] * x_sums[i & 1];
      }
      continue;
    }
    const float dw0 = d[0] * static_cast<float>(scale[0][b]);  // row g
    const float dw1 = d[1] * static_cast<float>(scale[1][b]);  // row g + 8
    const float mw0 = dmin[0] * static_cast<float>(min[0][b]);
    const float mw1 = dmin[1] * static_cast<float>(min[1][b]);
    const float xs0 = static_cast<float>(x_sums[0]);
    const float xs1 = static_cast<float>(x_sums[1]);
    acc[nt][0] = fmaf(static_cast<float>(sums[0]), dw0 * dx0[b], acc[nt][0]);
    acc[nt][0] = fmaf(xs0, -(mw0 * dx0[b]), acc[nt][0]);
    acc[nt][1] = fmaf(static_cast<float>(sums[1]), dw0 * dx1[b], acc[nt][1]);
    acc[nt][1] = fmaf(xs1, -(mw0 * dx1[b]), acc[nt][1]);
    acc[nt][2] = fmaf(static_cast<float>(sums[2]), dw1 * dx0[b], acc[nt][2]);
    acc[nt][2] = fmaf(xs0, -(mw1 * dx0[b]), acc[nt][2]);
    acc[nt][3] = fmaf(static_cast<float>(sums[3]), dw1 * dx1[b], acc[nt][3]);
    acc[nt][3] = fmaf(xs1, -(mw1 * dx1[b]), acc[nt][3]);
  }
  if constexpr (kPer256) {  // |Σ_b s_b · Σ n x| < 8 · 63 · 32 · 15 · 127: an int
    CELLM_UNROLL
    for (int i = 0; i < 4; ++i) {
      const float dx = (i & 1) == 0 ? dx0[0] : dx1[0];
      acc[nt][i] = fmaf(static_cast<float>(scaled[i]), d[i >> 1] * dx, acc[nt][i]);
      acc[nt][i] = fmaf(static_cast<float>(mins[i]), -(dmin[i >> 1] * dx), acc[nt][i]);
    }
  }
}

// Q6_K's four bytes of block b from a chunk's low nibbles and high bit pairs (the words of
// DecodeQ6_K::int8_word), as signed bytes u − 32: with v = u ^ 32, bytes u ≥ 32 are v, bytes
// u < 32 are v + 64 and become v − 64 = v | 0xc0 (bit 5 set marks them; no carry between bytes).
__device__ __forceinline__ uint32_t q6_k_signed_word(const uint4& low, const uint2& high, int b) {
  const int n = b >> 2;
  const int gg = b & 3;
  const uint32_t nibbles = (word_of(low, 2 * n + (gg & 1)) >> (4 * (gg >> 1))) & 0x0f0f0f0fu;
  const uint32_t pairs = (((n == 0 ? high.x : high.y) >> (2 * gg)) & 0x03030303u) << 4;
  const uint32_t v = (nibbles | pairs) ^ 0x20202020u;
  return v | ((v & 0x20202020u) * 6u);
}

// The products of one staged Q6_K span (span `span` of the row: its f16 scale's place among the
// 8 staged): per block b two k16 mmas, chunk t's bytes (the block's first 16 elements, its first
// sub-block scale) and chunk t + 4's (the second), for row r and token j
// dx_j,b · d_r · (s_r,2b · Σ₀ q x + s_r,2b+1 · Σ₁ q x) — the integer parts exact (< 2^24).
template <int kNTiles, bool kPer256 = false>
__device__ __forceinline__ void multiply_stage_q6_k(const uint8_t* stage, int g, int t,
                                                    int64_t span, float (&acc)[kNTiles][4]) {
  using S = Stage<StagedType::kQ6_K, kNTiles>;
  uint4 low[2][2];   // [row g, g + 8][chunk t, t + 4]
  uint2 high[2][2];  // the same
  uint4 scales[2];   // 16 int8 sub-block scales per row
  float d[2];
  CELLM_UNROLL
  for (int h = 0; h < 2; ++h) {
    const int r = g + 8 * h;
    low[h][0] = stage_unit<8>(stage, S::kRowBytes, r, t);
    low[h][1] = stage_unit<8>(stage, S::kRowBytes, r, t + 4);
    high[h][0] = *reinterpret_cast<const uint2*>(stage + S::kHigh + 64 * r + 8 * t);
    high[h][1] = *reinterpret_cast<const uint2*>(stage + S::kHigh + 64 * r + 8 * (t + 4));
    scales[h] = *reinterpret_cast<const uint4*>(stage + S::kScales + 16 * r);
    d[h] = f16_bits_to_float(half_of(*reinterpret_cast<const uint4*>(stage + S::kD + 16 * r),
                                     static_cast<int>(span & 7)));
  }
  CELLM_UNROLL
  for (int nt = 0; nt < kNTiles; ++nt) {
    SpanTokens x;
    float dx[2][8];
    stage_tile_tokens<S>(stage, nt, g, t, &x, dx);
    int totals[4] = {0, 0, 0, 0};  // kPer256: the span's integer sums per C element (< 2^31)
    CELLM_UNROLL
    for (int b = 0; b < 8; ++b) {
      uint32_t first[2];   // k16 A fragments: rows g, g + 8 of chunk t
      uint32_t second[2];  // of chunk t + 4
      CELLM_UNROLL
      for (int h = 0; h < 2; ++h) {
        first[h] = q6_k_signed_word(low[h][0], high[h][0], b);
        second[h] = q6_k_signed_word(low[h][1], high[h][1], b);
      }
      int sums0[4];
      int sums1[4];
      mma_s8_16816(sums0, first, word_of(x.q[b >> 2], b & 3));
      mma_s8_16816(sums1, second, word_of(x.q[2 + (b >> 2)], b & 3));
      CELLM_UNROLL
      for (int i = 0; i < 4; ++i) {
        const int h = i >> 1;                        // row g or g + 8
        const int sub = 8 * (b >> 2) + 2 * (b & 3);  // the block's first sub-block scale
        const int s0 = static_cast<int8_t>(static_cast<uint8_t>(byte_of(scales[h], sub)));
        const int s1 = static_cast<int8_t>(static_cast<uint8_t>(byte_of(scales[h], sub + 1)));
        const int total = s0 * sums0[i] + s1 * sums1[i];
        if constexpr (kPer256) {
          totals[i] += total;
        } else {
          acc[nt][i] = fmaf(static_cast<float>(total), d[h] * dx[i & 1][b], acc[nt][i]);
        }
      }
    }
    if constexpr (kPer256) {
      CELLM_UNROLL
      for (int i = 0; i < 4; ++i) {
        acc[nt][i] = fmaf(static_cast<float>(totals[i]), d[i >> 1] * dx[i & 1][0], acc[nt][i]);
      }
    }
  }
}

// The products of one staged span: the register kernel's arithmetic on fragments read from the
// stage. Q4_K: per block b, with the rows' integer sub-block scales s and mins m, the sums of
// the nibbles n (no offset) and of the tokens' bytes (an mma of ones), for row r and token j:
// dx_j,b · (d_r · s_r,b · Σ n x − dmin_r · m_r,b · Σ x).
template <StagedType kType, int kNTiles, bool kPer256 = false>
__device__ __forceinline__ void multiply_stage(const uint8_t* stage, int g, int t,
                                               float (&acc)[kNTiles][4]) {
  constexpr bool kQ4 = kStagedQ4<kType>;
  constexpr bool kK = kType == StagedType::kQ4_K;
  using S = Stage<kType, kNTiles>;
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
    SpanTokens x;
    float dx[2][8];
    stage_tile_tokens<S>(stage, nt, g, t, &x, dx);
    if constexpr (kK) {
      multiply_q4_k_blocks<kNTiles, kPer256>(w, x, dx[0], dx[1], nt, acc);
    } else {
      CELLM_UNROLL
      for (int b = 0; b < 8; ++b) {
        const float dw0 = f16_bits_to_float(half_of(w.d[0], b));  // row g
        const float dw1 = f16_bits_to_float(half_of(w.d[1], b));  // row g + 8
        int sums[4];
        block_sums<kQ4>(w, b, word_of(x.q[b >> 2], b & 3), word_of(x.q[2 + (b >> 2)], b & 3), sums);
        acc[nt][0] = fmaf(static_cast<float>(sums[0]), dw0 * dx[0][b], acc[nt][0]);
        acc[nt][1] = fmaf(static_cast<float>(sums[1]), dw0 * dx[1][b], acc[nt][1]);
        acc[nt][2] = fmaf(static_cast<float>(sums[2]), dw1 * dx[0][b], acc[nt][2]);
        acc[nt][3] = fmaf(static_cast<float>(sums[3]), dw1 * dx[1][b], acc[nt][3]);
      }
    }
  }
}

// Warp w takes spans w, w + kWarps, ... as the register kernel, but keeps kStages of them in
// flight through its ring (cp.async; the weights of the first kStages before pdl_wait()), so a
// warp's whole share of a small product is requested at once.
// kPer256 (K-quants): the tokens' block scales are one per 256 columns (multiply_q4_k_blocks).
template <StagedType kType, int kNTiles, int kWarps, int kStages, bool kPer256 = false>
__global__ void __launch_bounds__(kWarps * 32) int8_matmul_staged_kernel(const Int8MatmulArgs a) {
  constexpr bool kQ4 = kStagedQ4<kType>;
  using S = Stage<kType, kNTiles>;
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
      stage_weights<kType, kNTiles>(a, row0, scale_offset, warp + k * kWarps, lane,
                                    ring + k * S::kBytes);
    }
  }
  pdl_wait();
  CELLM_UNROLL
  for (int k = 0; k < kStages; ++k) {
    if (k < my_spans) {
      stage_tokens<kType, kNTiles>(a, warp + k * kWarps, lane, ring + k * S::kBytes);
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
    if constexpr (kType == StagedType::kQ6_K) {
      multiply_stage_q6_k<kNTiles, kPer256>(stage, g, t, warp + static_cast<int64_t>(k) * kWarps,
                                            acc);
    } else {
      multiply_stage<kType, kNTiles, kPer256>(stage, g, t, acc);
    }
    __syncwarp();  // every lane has read the stage: refill it
    const int refill = k + kStages;
    if (refill < my_spans) {
      const int64_t span = warp + static_cast<int64_t>(refill) * kWarps;
      stage_weights<kType, kNTiles>(a, row0, scale_offset, span, lane, stage);
      stage_tokens<kType, kNTiles>(a, span, lane, stage);
    }
    cp_async_commit();
  }
  cp_async_wait<0>();
  store_block_sums<kWarps, kNTiles>(a, row0, acc);
}

}  // namespace cellm::kernels::int8_matmul_detail
