// attention_tc: the per-warp steps of the tensor-core attention kernels (attention_decode_tc.cu,
// attention_prefill_tc.cu) for 16-bit K/V caches — staging K/V rows of a key tile through the
// cell list into shared memory, S = Q·Kᵀ and O += P·V with mma.sync, online softmax in f32.
//
// A warp owns 8 *logical rows* (each a (token, query head) pair) in one m16 tile: tile row g holds
// the high 16-bit part of logical row g's scaled query and tile row g + 8 the rounded remainder
// (split_pair), so one mma gives S_high and S_low and the lane group g that holds both (c0, c1 and
// c2, c3) adds them: S to about 2^-18 relative, K being exact in the cache type. Probabilities
// enter P·V the same way (rows g and g + 8 hold high and low parts of p), so the accumulators
// hold O_high (c0, c1) and O_low (c2, c3) of logical row g, summed at the end. Hence the kernels'
// error stays near f32's (≤ 1e-4 relative against the CPU) at no extra tensor-core work for
// decode (a group's heads fill 8 rows) and twice the minimal work for prefill — far below the
// memory and softmax costs at these sizes.
//
// Staged tiles are row-major [key][kDim + 8] 16-bit elements (16 padding bytes per row: the
// ldmatrix row addresses of 8 consecutive keys fall in distinct banks). Rows outside the valid
// range are zero-filled, so masked keys multiply finite values.
// Device code; include only from .cu files. Thread-safety: warp-synchronous device functions.
#pragma once

#include <climits>

#include "backends/cuda/kernels/attention_common.cuh"
#include "backends/cuda/kernels/mma_common.cuh"

namespace cellm::kernels {

template <int kDim, bool kF16>
struct WarpRowsState {
  static_assert(kDim % 16 == 0, "head size must be a multiple of 16");
  uint32_t q[kDim / 16][4];  // A fragments of the scaled query, per 16-dim k-step
  float o[kDim / 8][4];      // per 8-dim n-tile: c0, c1 = O_high, c2, c3 = O_low of row g
                             // (output_value adds them)
  float m;                   // running max of logical row g (same in the group's 4 lanes)
  float l;                   // this lane's share of the running sum (sum the 4 lanes at the end)
};

// Loads logical row g = lane / 4's query (scaled; null: zeros) into the A fragments.
template <int kDim, bool kF16>
__device__ __forceinline__ void warp_rows_init(WarpRowsState<kDim, kF16>& st, const float* q_row,
                                               float scale, int lane) {
  const int t = lane & 3;
  CELLM_UNROLL
  for (int ks = 0; ks < kDim / 16; ++ks) {
    float x[4] = {0.0f, 0.0f, 0.0f, 0.0f};  // dims 16ks + 2t, +1, +8, +9
    if (q_row != nullptr) {
      x[0] = __fmul_rn(q_row[16 * ks + 2 * t], scale);
      x[1] = __fmul_rn(q_row[16 * ks + 2 * t + 1], scale);
      x[2] = __fmul_rn(q_row[16 * ks + 2 * t + 8], scale);
      x[3] = __fmul_rn(q_row[16 * ks + 2 * t + 9], scale);
    }
    split_pair<kF16>(x[0], x[1], &st.q[ks][0], &st.q[ks][1]);
    split_pair<kF16>(x[2], x[3], &st.q[ks][2], &st.q[ks][3]);
  }
  CELLM_UNROLL
  for (int nt = 0; nt < kDim / 8; ++nt) {
    CELLM_UNROLL
    for (int c = 0; c < 4; ++c) st.o[nt][c] = 0.0f;
  }
  st.m = -INFINITY;
  st.l = 0.0f;
}

// s[nt] = C tiles of keys 8nt .. 8nt + 7 of the 16 staged rows at k_rows.
template <int kDim, bool kF16>
__device__ __forceinline__ void scores16(const uint16_t* k_rows, int stride,
                                         const uint32_t (&q)[kDim / 16][4], float (&s)[2][4],
                                         int lane) {
  CELLM_UNROLL
  for (int nt = 0; nt < 2; ++nt) {
    CELLM_UNROLL
    for (int c = 0; c < 4; ++c) s[nt][c] = 0.0f;
  }
  // Matrix i = lane / 8: keys 8·(i / 2) + lane % 8, dims 8·(i % 2) of the k-step.
  const uint16_t* base =
      k_rows + ((lane & 7) + ((lane >> 4) << 3)) * stride + ((lane >> 3) & 1) * 8;
  CELLM_UNROLL
  for (int ks = 0; ks < kDim / 16; ++ks) {
    uint32_t b[4];
    ldmatrix_x4(b, base + 16 * ks);
    mma_16816<kF16>(s[0], q[ks], b[0], b[1]);
    mma_16816<kF16>(s[1], q[ks], b[2], b[3]);
  }
}

// o += P·V for the 16 staged V rows at v_rows; p holds the A fragment of P (high / low rows).
template <int kDim, bool kF16>
__device__ __forceinline__ void accumulate_pv16(const uint16_t* v_rows, int stride,
                                                const uint32_t (&p)[4], float (&o)[kDim / 8][4],
                                                int lane) {
  // Matrix i = lane / 8 (transposed): keys 8·(i % 2) + lane % 8, dims 8·(i / 2) of the pair.
  const uint16_t* base =
      v_rows + ((lane & 7) + (((lane >> 3) & 1) << 3)) * stride + (lane >> 4) * 8;
  CELLM_UNROLL
  for (int np = 0; np < kDim / 16; ++np) {
    uint32_t b[4];
    ldmatrix_x4_trans(b, base + 16 * np);
    mma_16816<kF16>(o[2 * np], p, b[0], b[1]);
    mma_16816<kF16>(o[2 * np + 1], p, b[2], b[3]);
  }
}

// Visibility of a key position for this lane's logical row.
struct KeysBefore {  // decode: every key of the split before `end`
  int32_t end;
  __device__ __forceinline__ bool operator()(int32_t pos) const { return pos < end; }
};
struct KeysWithin {  // prefill: [first, last] (causal, window); first > last for no row
  int32_t first;
  int32_t last;
  __device__ __forceinline__ bool operator()(int32_t pos) const {
    return pos >= first && pos <= last;
  }
};

// Folds 16·kGroups staged keys (rows k_rows / v_rows; row 0 at position pos0) into the state. The
// scores (of the scaled query) are soft_capped by `softcap` (AttentionArgs::softcap, 0: none) with
// its soft_cap_inverse before the mask.
template <int kDim, bool kF16, int kGroups, class Visible>
__device__ __forceinline__ void attend_keys(WarpRowsState<kDim, kF16>& st, const uint16_t* k_rows,
                                            const uint16_t* v_rows, int stride, int32_t pos0,
                                            const Visible& visible, float softcap,
                                            float softcap_inverse, int lane) {
  const int t = lane & 3;
  float x[kGroups][2][2];  // scores of keys 16gi + 8nt + 2t + j, then −inf where masked
  CELLM_UNROLL
  for (int gi = 0; gi < kGroups; ++gi) {
    float s[2][4];
    scores16<kDim, kF16>(k_rows + 16 * gi * stride, stride, st.q, s, lane);
    CELLM_UNROLL
    for (int nt = 0; nt < 2; ++nt) {
      CELLM_UNROLL
      for (int j = 0; j < 2; ++j) {
        x[gi][nt][j] = fmaf(s[nt][j + 2], kSplitLowInverse<kF16>, s[nt][j]);
      }
    }
  }
  // Soft-capped where asked (gemma2): before the mask, as the CPU caps them.
  if (softcap > 0.0f) {  // kernel-uniform: uncapped, one branch per tile
    CELLM_UNROLL
    for (int gi = 0; gi < kGroups; ++gi) {
      CELLM_UNROLL
      for (int nt = 0; nt < 2; ++nt) {
        CELLM_UNROLL
        for (int j = 0; j < 2; ++j) {
          x[gi][nt][j] = soft_capped(x[gi][nt][j], softcap, softcap_inverse);
        }
      }
    }
  }
  float tile_max = -INFINITY;
  CELLM_UNROLL
  for (int gi = 0; gi < kGroups; ++gi) {
    CELLM_UNROLL
    for (int nt = 0; nt < 2; ++nt) {
      CELLM_UNROLL
      for (int j = 0; j < 2; ++j) {
        if (!visible(pos0 + 16 * gi + 8 * nt + 2 * t + j)) x[gi][nt][j] = -INFINITY;
        tile_max = fmaxf(tile_max, x[gi][nt][j]);
      }
    }
  }
  tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
  tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
  const float m_new = fmaxf(st.m, tile_max);
  const float alpha = exp_diff(st.m, m_new);  // 0 while nothing was visible
  float sum = 0.0f;
  uint32_t p[kGroups][4];
  CELLM_UNROLL
  for (int gi = 0; gi < kGroups; ++gi) {
    CELLM_UNROLL
    for (int nt = 0; nt < 2; ++nt) {
      float pr[2];
      CELLM_UNROLL
      for (int j = 0; j < 2; ++j) {
        pr[j] = x[gi][nt][j] == -INFINITY ? 0.0f : expf(x[gi][nt][j] - m_new);
        sum += pr[j];
      }
      // nt 0: a0 (high, row g), a1 (low, row g + 8); nt 1: a2, a3 (keys + 8).
      split_pair<kF16>(pr[0], pr[1], &p[gi][2 * nt], &p[gi][2 * nt + 1]);
    }
  }
  st.l = fmaf(st.l, alpha, sum);
  st.m = m_new;
  CELLM_UNROLL
  for (int nt = 0; nt < kDim / 8; ++nt) {
    CELLM_UNROLL
    for (int c = 0; c < 4; ++c) st.o[nt][c] *= alpha;
  }
  CELLM_UNROLL
  for (int gi = 0; gi < kGroups; ++gi) {
    accumulate_pv16<kDim, kF16>(v_rows + 16 * gi * stride, stride, p[gi], st.o, lane);
  }
}

// Output dim 8nt + 2·(lane % 4) + j of logical row g: O_high + O_low.
template <int kDim, bool kF16>
__device__ __forceinline__ float output_value(const WarpRowsState<kDim, kF16>& st, int nt, int j) {
  return fmaf(st.o[nt][j + 2], kSplitLowInverse<kF16>, st.o[nt][j]);
}

// The row sum of logical row g: the 4 lanes' shares added.
__device__ __forceinline__ float row_group_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  v += __shfl_xor_sync(0xffffffffu, v, 2);
  return v;
}

// min / max over the warp.
__device__ __forceinline__ int32_t warp_min_i32(int32_t v) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    v = min(v, __shfl_xor_sync(0xffffffffu, v, offset));
  }
  return v;
}
__device__ __forceinline__ int32_t warp_max_i32(int32_t v) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    v = max(v, __shfl_xor_sync(0xffffffffu, v, offset));
  }
  return v;
}

// The copying of a tile of K/V rows (positions [pos0, pos0 + kTileKeys) of one kv head) in two
// halves, so that the cell-list load of a tile can fly a tile ahead of its copies. A warp's
// threads copy kWarpRows rows (base + j + i · kThreads / kPieces); lane j + i · kRowGroup loads
// the cell of that row and the copying threads take theirs by shuffle — one load per lane in
// flight at once (the compiler issued per-thread loads a few at a time, each batch a round trip
// on the critical path). A row of 96 dims (12 pieces) is copied as if it had 16 pieces, the last
// 4 threads of each row idle, so that a warp's threads still hold whole rows.
template <int kDim, int kTileKeys, int kThreads>
struct KvTileCopy {
  static constexpr int kRowPieces = kDim * 2 / 16;  // 16-byte pieces per row
  static constexpr int kPieces = kRowPieces <= 8    ? 8
                                 : kRowPieces <= 16 ? 16
                                                    : 32;  // per row's threads
  static_assert(kRowPieces <= kPieces && kRowPieces * 16 == kDim * 2, "whole 16-byte pieces");
  static constexpr int kStride = kDim + 8;
  static_assert(kThreads % kPieces == 0 && (kTileKeys * kPieces) % kThreads == 0);
  static constexpr int kRowsPerThread = kTileKeys * kPieces / kThreads;
  static constexpr int kRowGroup = 32 / kPieces;  // consecutive rows of one warp
  static constexpr int kWarpRows = kRowGroup * kRowsPerThread;
  static_assert(32 % kPieces == 0 && kWarpRows <= 32, "a warp's rows fit its lanes");

  // This lane's cell of the tile at pos0 (0 where the lane loads none or the row is past
  // valid_end).
  static __device__ __forceinline__ int32_t lane_cell(const int32_t* cells, int32_t pos0,
                                                      int32_t valid_end, int tid) {
    const int lane = tid & 31;
    const int warp_row0 = (tid - lane) / kPieces;
    if (lane >= kWarpRows) return 0;
    const int32_t pos =
        pos0 + warp_row0 + lane % kRowGroup + lane / kRowGroup * (kThreads / kPieces);
    return pos < valid_end ? __ldg(cells + pos) : 0;
  }

  // Issues the cp.async copies of the tile into k_dst / v_dst ([kTileKeys][kDim + 8]) from the
  // warp's lane_cell() values; positions ≥ valid_end are zero-filled.
  static __device__ __forceinline__ void issue(uint16_t* k_dst, uint16_t* v_dst,
                                               const uint8_t* k_cache, const uint8_t* v_cache,
                                               int64_t cell_bytes, int64_t head_offset,
                                               int32_t lane_cell, int32_t pos0, int32_t valid_end,
                                               int tid) {
    const int piece = tid % kPieces;
    const int lane = tid & 31;
    int32_t cell[kRowsPerThread];
    CELLM_UNROLL
    for (int i = 0; i < kRowsPerThread; ++i) {
      cell[i] = __shfl_sync(0xffffffffu, lane_cell, i * kRowGroup + lane / kPieces);
    }
    CELLM_UNROLL
    for (int i = 0; i < kRowsPerThread; ++i) {
      if (piece >= kRowPieces) break;  // a thread past the row's pieces (96 dims) copies nothing
      const int row = tid / kPieces + i * (kThreads / kPieces);
      const bool valid = pos0 + row < valid_end;
      const int64_t offset = static_cast<int64_t>(cell[i]) * cell_bytes + head_offset + 16 * piece;
      cp_async_16_zfill(k_dst + row * kStride + 8 * piece, k_cache + offset, valid);
      cp_async_16_zfill(v_dst + row * kStride + 8 * piece, v_cache + offset, valid);
    }
  }
};

// The K/V rows of one kv head that a block walks: cache bytes per cell, the head's offset in a
// cell, the sequence's cells by position.
struct KvSource {
  const uint8_t* k_cache;
  const uint8_t* v_cache;
  int64_t cell_bytes;
  int64_t head_offset;
  const int32_t* cells;
};

// Walks positions [begin, end) in kTileKeys-key tiles through a two-stage shared-memory ring
// (`stages`: [2][K, V][kTileKeys][kDim + 8]): tile i + 1 is in flight while use(k_rows, pos0)
// reads tile i (K rows of positions pos0 .. at k_rows, V rows kTileKeys · (kDim + 8) elements
// after) between two block barriers — the last one's second barrier only with
// `barrier_after_last` (a caller that synchronizes the block otherwise before reusing the ring may
// skip it). issued() runs once the first tile's copies are issued, so work independent of the
// tiles (loading the query) overlaps their flight. The cell list is read a tile ahead of the
// copies: staging a tile then waits on no load (a split walked alone streams 1.5× faster:
// docs/perf/decode.md, version 21). Every thread of the block calls it.
struct NothingToOverlap {
  __device__ __forceinline__ void operator()() const {}
};
template <int kDim, int kTileKeys, int kThreads, class Use, class Issued = NothingToOverlap>
__device__ __forceinline__ void walk_kv_tiles(uint16_t* stages, const KvSource& src, int32_t begin,
                                              int32_t end, const Use& use,
                                              const Issued& issued = Issued{},
                                              bool barrier_after_last = true) {
  constexpr int kTileElems = kTileKeys * (kDim + 8);
  using Copy = KvTileCopy<kDim, kTileKeys, kThreads>;
  const int32_t num_tiles = (end - begin + kTileKeys - 1) / kTileKeys;
  const auto cell_of = [&](int32_t tile) {
    return Copy::lane_cell(src.cells, begin + tile * kTileKeys, end, threadIdx.x);
  };
  const auto stage = [&](int32_t tile, int32_t lane_cell) {
    uint16_t* k_dst = stages + (tile & 1) * 2 * kTileElems;
    Copy::issue(k_dst, k_dst + kTileElems, src.k_cache, src.v_cache, src.cell_bytes,
                src.head_offset, lane_cell, begin + tile * kTileKeys, end, threadIdx.x);
    cp_async_commit();
  };
  // The cells of tile i + 2 are loaded while tile i is used, so staging tile i + 1 waits on no
  // load of its own.
  if (num_tiles > 0) stage(0, cell_of(0));
  int32_t next_cell = num_tiles > 1 ? cell_of(1) : 0;
  issued();
  for (int32_t tile = 0; tile < num_tiles; ++tile) {
    if (tile + 1 < num_tiles) {
      const int32_t cell = next_cell;
      if (tile + 2 < num_tiles) next_cell = cell_of(tile + 2);
      stage(tile + 1, cell);  // its buffer was last read before the previous iteration's barrier
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    use(stages + (tile & 1) * 2 * kTileElems, begin + tile * kTileKeys);
    if (barrier_after_last || tile + 1 < num_tiles) __syncthreads();  // refilled two tiles later
  }
}

}  // namespace cellm::kernels
