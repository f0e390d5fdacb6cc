// decode_ring_parts.cuh: the pieces of decode_ring_bench.cu's ring chain (see its header) that
// stream and multiply the weights: the kernel's arguments, a block's tiles of a stage, the
// mbarrier and bulk-copy helpers, the producer, and the consumers' tile products. It knows
// nothing of how a stage's input reaches the block (decode_ring_handover.cuh). Included by
// decode_ring_bench.cu only. Benchmark only. Thread-safety: device functions act on the calling
// block's shared memory and the chain's buffers as the kernel orders them.
#pragma once

#include <cstdint>
#include <type_traits>

#include "backends/cuda/kernels/block_major_q4_0.cuh"
#include "backends/cuda/kernels/decode_chain_bench.cuh"
#include "backends/cuda/kernels/decode_ring_bench.h"
#include "backends/cuda/kernels/gemv_decode.cuh"

namespace cellm::kernels::ring {

constexpr int kMaxSlots = 24;
constexpr size_t kMaxRingBytes = 212992;  // the ring and the largest input fit 227 KB
using chain_bench::kDownStage;
using chain_bench::kGateUpStage;
using chain_bench::kOutputStage;
using chain_bench::kQkvStage;
using chain_bench::kStagesPerLayer;
using chain_bench::launch_chain;
using chain_bench::load_acquire;
// float4s per consumer thread a normed input keeps in registers (more consumer warps leave fewer
// registers per thread).
__host__ __device__ constexpr int norm_vectors(int consumers) {
  return consumers >= 16 ? 2 : 32 / consumers;
}

struct RingKernelArgs {
  PersistentChainArgs a;
  uint32_t hidden_row_bytes = 0;  // a device row of `hidden` columns
  uint32_t ffn_row_bytes = 0;     // of `ffn` columns
  int hidden_tile_rows = 0;       // rows per tile of the stages over `hidden` columns
  int ffn_tile_rows = 0;          // of the down stage
  bool stream_weights = true;
  bool block_major = false;  // Q4_0 weights block-major, inputs in natural order
  int slots = 0;             // consumer warps · slots per warp
  int copies_in_flight = 0;  // ≤ slots (RingShape::copies_in_flight)
  uint32_t slot_bytes = 0;
  // Handover (RingShape::handover_scratch): each block owns whole blocks of 32 outputs and
  // quantizes them after the stage into hand_q / hand_scales (the residual's per-32 sums of
  // squares into hand_partials), buffer s & 1 for stage s; the next stage copies them instead of
  // quantizing its f32 input again.
  bool handover = false;
  int8_t* hand_q = nullptr;         // [2][16384]
  float* hand_scales = nullptr;     // [2][512]
  double* hand_partials = nullptr;  // [2][128]
  uint64_t* timeline = nullptr;     // RingShape::timeline
};
constexpr int kHandQ = 16384;
constexpr int kHandScales = 512;
constexpr int kHandPartials = 128;

struct RingStage {
  const uint8_t* w = nullptr;
  int kind = 0;
  int num_cols = 0;
  uint32_t row_bytes = 0;
  int tile_rows = 0;
  int64_t begin = 0;  // this block's tiles [begin, end), then [second_begin, second_end)
  int64_t end = 0;
  int64_t second_begin = 0;  // q|k|v with the handover: the block's k|v tiles
  int64_t second_end = 0;
  int64_t first_output = 0;  // handover: the block's first output, its number of blocks of 32
  int num_groups = 0;

  __device__ __forceinline__ int64_t num_tiles() const {
    return end - begin + second_end - second_begin;
  }
  // The block's i-th tile of the stage.
  __device__ __forceinline__ int64_t tile(int64_t i) const {
    return i < end - begin ? begin + i : second_begin + (i - (end - begin));
  }
};

// q|k|v with the handover: block b of `num_blocks` owns q's blocks of 32 [q_begin, q_end) whole
// (they are quantized for the output product) and a share of the k|v tiles (stored only) that
// evens its tiles out: k|v tiles [kv_begin(b), kv_begin(b + 1)), counted from the first k|v tile.
// The launcher checks that the shares are never negative.
__host__ __device__ __forceinline__ int64_t qkv_q_group_begin(int64_t hidden, int64_t b,
                                                              int64_t num_blocks) {
  return hidden / 32 * b / num_blocks;
}
__host__ __device__ __forceinline__ int64_t qkv_kv_tile_begin(int64_t hidden, int64_t qkv_rows,
                                                              int tile_rows, int64_t b,
                                                              int64_t num_blocks) {
  const int64_t tiles = qkv_rows / tile_rows;
  return tiles * b / num_blocks - qkv_q_group_begin(hidden, b, num_blocks) * (32 / tile_rows);
}

// A layer's weights of stage kind `kind`.
__device__ __forceinline__ const uint8_t* stage_weights(const PersistentChainLayer& layer,
                                                        int kind) {
  switch (kind) {
    case kQkvStage:
      return layer.qkv;
    case kOutputStage:
      return layer.o;
    case kGateUpStage:
      return layer.gate_up;
    default:
      return layer.down;
  }
}

__device__ __forceinline__ RingStage ring_stage(const RingKernelArgs& k, int s) {
  const PersistentChainArgs& a = k.a;
  RingStage st;
  st.kind = s % kStagesPerLayer;
  st.w = stage_weights(a.layers[s / kStagesPerLayer], st.kind);
  st.num_cols = static_cast<int>(a.hidden);
  st.row_bytes = k.hidden_row_bytes;
  st.tile_rows = k.hidden_tile_rows;
  int64_t rows = a.hidden;
  switch (st.kind) {
    case kQkvStage:
      rows = a.qkv_rows;
      break;
    case kOutputStage:
      break;
    case kGateUpStage:
      rows = 2 * a.ffn;
      break;
    default:
      st.num_cols = static_cast<int>(a.ffn);
      st.row_bytes = k.ffn_row_bytes;
      st.tile_rows = k.ffn_tile_rows;
      break;
  }
  if (k.handover && st.kind == kQkvStage) {
    const int64_t b = blockIdx.x, blocks = gridDim.x;
    const int64_t q_begin = qkv_q_group_begin(a.hidden, b, blocks);
    const int64_t q_end = qkv_q_group_begin(a.hidden, b + 1, blocks);
    const int64_t q_tiles = a.hidden / st.tile_rows;
    st.begin = q_begin * (32 / st.tile_rows);
    st.end = q_end * (32 / st.tile_rows);
    st.second_begin = q_tiles + qkv_kv_tile_begin(a.hidden, rows, st.tile_rows, b, blocks);
    st.second_end = q_tiles + qkv_kv_tile_begin(a.hidden, rows, st.tile_rows, b + 1, blocks);
    st.first_output = 32 * q_begin;
    st.num_groups = static_cast<int>(q_end - q_begin);
    return st;
  }
  if (k.handover) {
    const int64_t outputs = st.kind == kGateUpStage ? rows / 2 : rows;
    const int64_t per_tile = st.kind == kGateUpStage ? st.tile_rows / 2 : st.tile_rows;
    const int64_t groups = outputs / 32;
    const int64_t group_begin = groups * blockIdx.x / gridDim.x;
    const int64_t group_end = groups * (blockIdx.x + 1) / gridDim.x;
    st.begin = group_begin * (32 / per_tile);
    st.end = group_end * (32 / per_tile);
    st.first_output = 32 * group_begin;
    st.num_groups = static_cast<int>(group_end - group_begin);
    return st;
  }
  const int64_t tiles = rows / st.tile_rows;
  st.begin = tiles * blockIdx.x / gridDim.x;
  st.end = tiles * (blockIdx.x + 1) / gridDim.x;
  return st;
}

// The block's stage of each kind, computed once by ring_stage (its divisions kept off the stage
// boundaries); stage s is kinds[s % 4] over layer s / 4's weights.
struct StageTable {
  RingStage kinds[kStagesPerLayer];
  __device__ __forceinline__ RingStage at(const RingKernelArgs& k, int s) const {
    RingStage st = kinds[s % kStagesPerLayer];
    st.w = stage_weights(k.a.layers[s / kStagesPerLayer], st.kind);
    return st;
  }
};

#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)  // to the end of the file

__device__ __forceinline__ uint32_t smem_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void mbarrier_init(uint64_t* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_address(bar)), "r"(count)
               : "memory");
}

__device__ __forceinline__ void mbarrier_expect_bytes(uint64_t* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_address(bar)),
               "r"(bytes)
               : "memory");
}

__device__ __forceinline__ void mbarrier_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_address(bar)) : "memory");
}

__device__ __forceinline__ bool mbarrier_try_wait(uint64_t* bar, unsigned parity) {
  uint32_t done;
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      "selp.u32 %0, 1, 0, p;\n"
      "}\n"
      : "=r"(done)
      : "r"(smem_address(bar)), "r"(parity)
      : "memory");
  return done != 0;
}

__device__ __forceinline__ uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// A prototype must not hang the device: a wait that lasts a second traps (the launch fails).
constexpr uint64_t kWaitLimitNs = 1000000000ull;

// Waits for the phase of `parity` to complete. The caller must know that the phase before it
// has completed (parity names only the current and the previous phase).
__device__ __forceinline__ void mbarrier_wait(uint64_t* bar, unsigned parity) {
  if (mbarrier_try_wait(bar, parity)) return;
  const uint64_t start = global_ns();
  while (!mbarrier_try_wait(bar, parity)) {
    if (global_ns() - start > kWaitLimitNs) __trap();
  }
}

__device__ __forceinline__ uint64_t evict_first_policy() {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}

// `bytes` (a multiple of 16) from global `src` into shared `dst`, completing on `bar`.
__device__ __forceinline__ void bulk_copy(void* dst, const void* src, unsigned bytes, uint64_t* bar,
                                          uint64_t policy) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint "
      "[%0], [%1], %2, [%3], %4;" ::"r"(smem_address(dst)),
      "l"(src), "r"(bytes), "r"(smem_address(bar)), "l"(policy)
      : "memory");
}

template <int kThreads>
__device__ __forceinline__ void consumer_barrier() {
  asm volatile("bar.sync 1, %0;" ::"r"(kThreads) : "memory");
}

// RingShape::timeline, written by consumer thread 0 (RingTimeline's layout); kOn false: nothing,
// not even the clocks' reads.
template <bool kOn>
struct TimelineWriter {
  uint64_t* words = nullptr;
  __device__ __forceinline__ void put(int row, int field, uint64_t value) const {
    if (!kOn || threadIdx.x != 0) return;
    words[(static_cast<size_t>(row) * gridDim.x + blockIdx.x) * RingTimeline::kFields + field] =
        value;
  }
  // globaltimer ns / clock cycles now.
  __device__ __forceinline__ void mark(int row, int field) const {
    if constexpr (kOn) put(row, field, global_ns());
  }
  __device__ __forceinline__ void mark_cycles(int row, int field) const {
    if constexpr (kOn) put(row, field, clock64());
  }
};

// The producer thread: every tile of the block, in order, into the ring.
__device__ inline void produce(const RingKernelArgs& k, const StageTable& table, uint8_t* ring,
                               uint64_t* full, uint64_t* empty) {
  const uint64_t policy = evict_first_policy();
  const int num_stages = k.a.num_layers * kStagesPerLayer;
  uint32_t n = 0;
  for (int s = 0; s < num_stages; ++s) {
    const RingStage st = table.at(k, s);
    const uint32_t tile_bytes = st.row_bytes * static_cast<uint32_t>(st.tile_rows);
    const int64_t num_tiles = st.num_tiles();
    for (int64_t i = 0; i < num_tiles; ++i, ++n) {
      const int64_t t = st.tile(i);
      const uint32_t slot = n % static_cast<uint32_t>(k.slots);
      const uint32_t round = n / static_cast<uint32_t>(k.slots);
      if (round > 0) mbarrier_wait(&empty[slot], (round - 1) & 1);
      if (k.copies_in_flight < k.slots && n >= static_cast<uint32_t>(k.copies_in_flight)) {
        // Tile n - copies_in_flight's slot has not been filled again since (copies_in_flight <
        // slots): its phase is that tile's.
        const uint32_t landed = n - static_cast<uint32_t>(k.copies_in_flight);
        mbarrier_wait(&full[landed % static_cast<uint32_t>(k.slots)],
                      (landed / static_cast<uint32_t>(k.slots)) & 1);
      }
      uint8_t* dst = ring + static_cast<size_t>(slot) * k.slot_bytes;
      mbarrier_expect_bytes(&full[slot], tile_bytes);
      if (st.kind == kGateUpStage) {
        const int64_t half = st.tile_rows / 2;
        const uint32_t half_bytes = tile_bytes / 2;
        bulk_copy(dst, st.w + t * half * st.row_bytes, half_bytes, &full[slot], policy);
        bulk_copy(dst + half_bytes, st.w + (k.a.ffn + t * half) * st.row_bytes, half_bytes,
                  &full[slot], policy);
      } else {
        bulk_copy(dst, st.w + t * st.tile_rows * st.row_bytes, tile_bytes, &full[slot], policy);
      }
    }
  }
}

// Chunk c of a row held in shared memory (the bytes Decoder::load reads from global memory).
__device__ __forceinline__ DecodeQ4_0::Chunk smem_chunk(DecodeQ4_0 /*tag*/, const uint8_t* row,
                                                        int num_cols, int c) {
  DecodeQ4_0::Chunk chunk;
  chunk.qs = *reinterpret_cast<const uint4*>(row + 16 * c);
  chunk.d = *reinterpret_cast<const uint4*>(row + num_cols / 2 + 16 * (c >> 3));
  return chunk;
}
__device__ __forceinline__ DecodeQ8_0::Chunk smem_chunk(DecodeQ8_0 /*tag*/, const uint8_t* row,
                                                        int num_cols, int c) {
  DecodeQ8_0::Chunk chunk;
  chunk.qs_lo = *reinterpret_cast<const uint4*>(row + 32 * c);
  chunk.qs_hi = *reinterpret_cast<const uint4*>(row + 32 * c + 16);
  chunk.d = *reinterpret_cast<const uint4*>(row + num_cols + 16 * (c >> 3));
  return chunk;
}

// One warp: the R rows of a tile against the input; every lane ends with every row's sum.
template <class Decoder, int R>
__device__ __forceinline__ void multiply_tile(const uint8_t* tile, const RingStage& st,
                                              const Int8Rows<1>& input, int lane,
                                              float (&sums)[8]) {
  float acc[R][1];
  CELLM_UNROLL
  for (int r = 0; r < R; ++r) acc[r][0] = 0.0f;
  const int num_chunks = st.num_cols / Decoder::kChunkElems;
#pragma unroll 2
  for (int c = lane; c < num_chunks; c += 32) {
    typename Decoder::Chunk w[R];
    CELLM_UNROLL
    for (int r = 0; r < R; ++r)
      w[r] = smem_chunk(Decoder{}, tile + r * st.row_bytes, st.num_cols, c);
    accumulate_int8<Decoder, R, 1, true>(w, 1, input, c, acc);
  }
  CELLM_UNROLL
  for (int r = 0; r < R; ++r) {
    float v = acc[r][0];
    CELLM_UNROLL
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    sums[r] = v;
  }
}

// Block-major Q4_0 (RingShape::block_major): lane l multiplies blocks l, l + 32, … of the tile's
// rows — 16 bytes of nibbles (byte i: elements i and i + 16) and one f16 scale each — by 32
// inputs in natural order: 16 · Σ (q − 8) x in integers (block_major_q4_0.cuh: no nibble shifted,
// the −8 as an offset per block shared by the rows), one conversion and one multiply-add per
// block and row with the activation scale / 16 — the same float product as (d · dx) · Σ (q − 8) x
// bit for bit (the scalings by 16 are exact).
template <int R>
__device__ __forceinline__ void multiply_tile_block_major(const uint8_t* tile, const RingStage& st,
                                                          const Int8Rows<1>& input, int lane,
                                                          float (&sums)[8]) {
  float acc[R];
  CELLM_UNROLL
  for (int r = 0; r < R; ++r) acc[r] = 0.0f;
  const int num_chunks = st.num_cols / 32;
  const uint8_t* rows[R];  // the rows' nibbles; their scales follow at num_cols / 2
  CELLM_UNROLL
  for (int r = 0; r < R; ++r) rows[r] = tile + r * st.row_bytes;
  const int scales_offset = st.num_cols / 2;
#pragma unroll 2
  for (int c = lane; c < num_chunks; c += 32) {
    const uint4 lo = *reinterpret_cast<const uint4*>(input.x[0] + 32 * c);
    const uint4 hi = *reinterpret_cast<const uint4*>(input.x[0] + 32 * c + 16);
    const float dx16 = input.scales[0][c] * 0.0625f;  // the sums below are 16 ×
    const int offset = block_major_q4_0_offset(lo, hi);
    CELLM_UNROLL
    for (int r = 0; r < R; ++r) {
      const uint4 q = *reinterpret_cast<const uint4*>(rows[r] + 16 * c);
      const uint16_t d = *reinterpret_cast<const uint16_t*>(rows[r] + scales_offset + 2 * c);
      const int sum16 = block_major_q4_0_dot16(q, lo, hi, offset);
      acc[r] = fmaf(f16_bits_to_float(d) * dx16, static_cast<float>(sum16), acc[r]);
    }
  }
  CELLM_UNROLL
  for (int r = 0; r < R; ++r) {
    float v = acc[r];
    CELLM_UNROLL
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    sums[r] = v;
  }
}

// Tile t's results: q|k|v stored, output and down added to the residual, SwiGLU of gate|up.
template <int R>
__device__ __forceinline__ void write_tile(const PersistentChainArgs& a, const RingStage& st,
                                           int64_t t, int lane, const float (&sums)[8],
                                           float* staged) {
  if (st.kind == kGateUpStage) {
    CELLM_UNROLL
    for (int p = 0; p < R / 2; ++p) {
      if (lane != p) continue;
      const int64_t j = t * (R / 2) + p;
      const float v = silu_mul(sums[p], sums[R / 2 + p]);
      if (staged != nullptr) {
        staged[j - st.first_output] = v;
      } else {
        __stcg(a.act + j, v);
      }
    }
    return;
  }
  CELLM_UNROLL
  for (int r = 0; r < R; ++r) {
    if (lane != r) continue;
    const int64_t row = t * R + r;
    if (staged != nullptr && (st.kind != kQkvStage || row < a.hidden)) {
      staged[row - st.first_output] = sums[r];  // k|v rows are not handed over
    } else if (st.kind == kQkvStage) {
      __stcg(a.qkv + row, sums[r]);
    } else {
      __stcg(a.x + row, __ldcg(a.x + row) + sums[r]);
    }
  }
}

// One consumer warp's tile of R rows (kBlockMajor: Q4_0 weights block-major): multiplied, the
// slot released (`empty`, unless nullptr), the results written.
template <class Decoder, bool kBlockMajor, int R>
__device__ __forceinline__ void consume_tile(const PersistentChainArgs& a, const uint8_t* tile,
                                             const RingStage& st, int64_t t,
                                             const Int8Rows<1>& input, int lane, uint64_t* empty,
                                             float* staged) {
  float sums[8];
  if constexpr (kBlockMajor) {
    static_assert(std::is_same_v<Decoder, DecodeQ4_0>, "block-major weights are Q4_0's");
    multiply_tile_block_major<R>(tile, st, input, lane, sums);
  } else {
    multiply_tile<Decoder, R>(tile, st, input, lane, sums);
  }
  __syncwarp();
  if (lane == 0 && empty != nullptr) mbarrier_arrive(empty);
  write_tile<R>(a, st, t, lane, sums, staged);
}

#endif  // __CUDA_ARCH__ >= 900

}  // namespace cellm::kernels::ring
