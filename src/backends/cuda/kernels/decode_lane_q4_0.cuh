// decode_lane_q4_0: a benchmark-only decoder for the fused decode product's tuning table
// (decode_bench_kernels.cu) — interleaved Q4_0 whose lanes hold one block scale each, for int8
// input. Device code; include only from .cu files after gemv_decode.cuh. Thread-safety: called by
// every thread of a block, as gemv_decode_kernel orders it.
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

}  // namespace cellm::kernels
