// decode_lane_q4_0: benchmark-only one-token products for the fused decode product's tuning table
// (decode_bench_kernels.cu) — interleaved Q4_0 whose lanes hold one block scale each, for int8
// input: a decoder for gemv_decode_kernel and a kernel of its own. Measured in version 42 of
// docs/perf/decode.md: neither beats the shipped four-row kernel (more rows a block, more bytes in
// flight, do not make Q4_0's products faster). Device code; include only from .cu files.
// Thread-safety: called by every thread of a block.
#pragma once

#include "backends/cuda/kernels/gemv_decode.cuh"

namespace cellm::kernels {

// Interleaved Q4_0 whose lanes hold one block scale each (for int8 input only): chunk c loads
// the f16 scale of block c — the scale of group c % 8 of its span — and a group's scale comes
// from the span's lane that holds it (a shuffle), so a chunk takes 5 registers instead of 8 and
// more rows fit a block at the same registers (docs/perf/decode.md, version 41). The active lanes
// of a warp are whole spans of 8 (K is a multiple of 256), so every shuffle's source is active.
struct DecodeQ4_0Lane : InterleavedDecoderBase {
  static constexpr bool kHasMin = false;
  static constexpr int kMinBlocksPerSm = 8;  // its point: more rows at 64 registers
  struct Chunk {
    uint4 qs;    // this lane's 32 nibbles
    uint32_t d;  // the f16 scale of block c (low 16 bits)
  };
  __device__ __forceinline__ static Chunk load(const uint8_t* row, int64_t num_cols, int64_t c) {
    Chunk chunk;
    chunk.qs = load_stream_u4(row + 16 * c);
    chunk.d = __ldcs(reinterpret_cast<const unsigned short*>(row + num_cols / 2) + c);
    return chunk;
  }
};

template <>
struct Int8Words<DecodeQ4_0Lane> {
  static constexpr bool kMinus8 = true;
  __device__ __forceinline__ static uint32_t word(const DecodeQ4_0Lane::Chunk& w, int g) {
    return interleaved_group_nibbles(w.qs, g);
  }
  __device__ __forceinline__ static uint16_t scale_bits(const DecodeQ4_0Lane::Chunk& w, int g) {
    const int source = static_cast<int>(threadIdx.x & 24) | g;
    return static_cast<uint16_t>(__shfl_sync(__activemask(), w.d, source));
  }
};

// Where a row group's R weight rows lie, in few registers: two halves of R / 2 rows (kSwiglu:
// the gate rows and their up rows; else the group's first and second half), each a first row and
// the last of its rows inside the matrix (rows past it read that row: loaded, never stored).
// Local row r is half r / (R / 2), row min(r % (R / 2), last) of it.
template <int R>
struct LaneRows {
  const uint8_t* first[2];
  int last[2];

  __device__ __forceinline__ LaneRows(const DecodeGemvArgs& a, int64_t group) {
    CELLM_UNROLL
    for (int h = 0; h < 2; ++h) {
      bool valid = false;
      const int64_t row = decode_group_row<R>(a, group, h * (R / 2), &valid);
      int last_valid = 0;
      CELLM_UNROLL
      for (int j = 1; j < R / 2; ++j) {
        bool row_valid = false;
        decode_group_row<R>(a, group, h * (R / 2) + j, &row_valid);
        if (row_valid) last_valid = j;
      }
      first[h] = a.w + (valid ? row : 0) * static_cast<int64_t>(a.row_bytes);
      last[h] = last_valid;
    }
  }
  // Hides the rows from the compiler's hoisting: the eight rows' pointers, computed once, would
  // hold 16 registers through the loop; recomputed per load they cost an IMAD each.
  __device__ __forceinline__ void opaque() {
    CELLM_UNROLL
    for (int h = 0; h < 2; ++h) asm volatile("" : "+l"(first[h]), "+r"(last[h]));
  }
  __device__ __forceinline__ const uint8_t* row(const DecodeGemvArgs& a, int r) const {
    const int h = r / (R / 2);
    return first[h] + static_cast<int64_t>(min(r % (R / 2), last[h])) * a.row_bytes;
  }
};

// The one-token int8 product over interleaved Q4_0 with one block scale a lane (DecodeQ4_0Lane),
// a kernel of its own so that eight rows fit 64 registers: per chunk a lane multiplies its block's
// weight scale by its activations' block scale once per row (the same f32 product
// accumulate_int8_q forms per group) and each group takes that product from the lane of its block
// by a shuffle — no activation scales held, no scale conversion per group. Rows as
// gemv_decode_kernel's (R rows, one group per block), D chunks per row in flight, held to
// kMinBlocksPerSm blocks a SM (64 registers at 8: four rows fit them, six spill 8 bytes, eight 64,
// and 16 at seven blocks); the same epilogue. Sums equal gemv_decode_kernel<DecodeQ4_0, R, 1, D,
// DecodeInt8Input>'s bit for bit.
template <int R, int D, int kMinBlocksPerSm = 8>
__global__ void __launch_bounds__(kDecodeThreads, kMinBlocksPerSm)
    gemv_decode_lane_q4_0_kernel(const DecodeGemvArgs a) {
  static_assert(R % 2 == 0, "pairs (SwiGLU, RoPE) need an even number of rows per block");
  pdl_trigger_at_start(a.trigger);
  const int64_t group = blockIdx.x;
  const int num_chunks = static_cast<int>(a.num_cols / DecodeQ4_0Lane::kChunkElems);
  const uint32_t scales_offset = static_cast<uint32_t>(a.num_cols / 2);
  const int first = static_cast<int>(threadIdx.x);
  constexpr int kStep = D * kDecodeThreads;
  LaneRows<R> rows(a, group);
  const auto load = [&](int r, int c, DecodeQ4_0Lane::Chunk& chunk) {
    const uint8_t* row = rows.row(a, r);
    chunk.qs = load_stream_u4(row + 16 * c);
    chunk.d = __ldcs(reinterpret_cast<const unsigned short*>(row + scales_offset) + c);
  };

  // Weights first: nothing earlier writes them.
  DecodeQ4_0Lane::Chunk chunks[D][R];
  CELLM_UNROLL
  for (int d = 0; d < D; ++d) {
    const int c = first + d * kDecodeThreads;
    if (c < num_chunks) {
      CELLM_UNROLL
      for (int r = 0; r < R; ++r) load(r, c, chunks[d][r]);
    }
  }
  pdl_wait_then_trigger(a.trigger);

  const int lane = first & 31;
  const int span_lane0 = first & 24;
  float acc[R][1];
  CELLM_UNROLL
  for (int r = 0; r < R; ++r) acc[r][0] = 0.0f;
  for (int base = first; base < num_chunks; base += kStep) {
    CELLM_UNROLL
    for (int d = 0; d < D; ++d) {
      const int c = base + d * kDecodeThreads;
      if (c < num_chunks) {
        // The warp's lanes below num_chunks (whole spans of 8: K is a multiple of 256).
        const int num_active = min(32, num_chunks - (c - lane));
        const unsigned mask = num_active >= 32 ? 0xffffffffu : (1u << num_active) - 1u;
        const float dx = a.x_q8_scales[c];
        float scale[R];  // this lane's block: weight scale · activation scale, per row
        CELLM_UNROLL
        for (int r = 0; r < R; ++r) {
          scale[r] = f16_bits_to_float(static_cast<uint16_t>(chunks[d][r].d)) * dx;
        }
        const int8_t* x = a.x_q8 + 32 * static_cast<int64_t>(c);
        CELLM_UNROLL
        for (int h = 0; h < 2; ++h) {
          const uint4 xh = load_u4(x + 16 * h);
          CELLM_UNROLL
          for (int k = 0; k < 4; ++k) {
            const int g = 4 * h + k;
            const uint32_t xw = word_of(xh, k);
            const int minus8 = dp4a(0xf8f8f8f8u, xw, 0);
            CELLM_UNROLL
            for (int r = 0; r < R; ++r) {
              const float s = __shfl_sync(mask, scale[r], span_lane0 | g);
              const int sum = dp4a(interleaved_group_nibbles(chunks[d][r].qs, g), xw, minus8);
              acc[r][0] = fmaf(s, static_cast<float>(sum), acc[r][0]);
            }
          }
        }
        const int next = c + kStep;
        rows.opaque();
        if (next < num_chunks) {
          CELLM_UNROLL
          for (int r = 0; r < R; ++r) load(r, next, chunks[d][r]);
        }
      }
    }
  }

  __shared__ float partial[kDecodeWarps][R];
  __shared__ float sums[R];
  warp_partials<R, 1>(acc, partial);
  __syncthreads();
  if (threadIdx.x < R) {
    float sum = block_sum(partial, static_cast<int>(threadIdx.x));
    if (a.bias != nullptr) {
      bool valid = false;
      const int64_t row = decode_group_row<R>(a, group, static_cast<int>(threadIdx.x), &valid);
      if (valid) sum += a.bias[row];
    }
    sums[threadIdx.x] = sum;
  }
  __syncthreads();
  decode_epilogue<R, 1>(a, group, sums);
}

}  // namespace cellm::kernels
