// decode_ring_bench: the one-launch chain of a decode step's layer products with its weights
// streamed through a ring of shared-memory slots (see the header). Block b owns a balanced range
// of each stage's tiles (R rows of the stage; gate|up: R / 2 gate rows and their R / 2 up rows);
// the block's tiles of all stages, in stage order, are numbered n = 0, 1, …; tile n goes
// through slot n % slots and is consumer warp n % warps's (slots a multiple of warps, so each
// slot serves one warp, whose waits are then never two phases ahead of the slot's barriers). The
// producer thread waits for the slot's `empty` barrier, then copies the tile into it with one or
// two bulk copies completing on its `full` barrier. The consumer warp waits for `full`,
// multiplies the tile's rows by the stage's int8 input in shared memory (lane l: chunks l,
// l + 32, …), releases the slot and writes the rows' results. Between stages the consumer warps
// meet (a named barrier), count the block in at the grid counter, wait for every block, and
// quantize the next stage's input — or, with the handover, quantize their own blocks of 32
// outputs before counting in and copy the next input as handed over; the producer does not take
// part, so the ring keeps filling.
#include <algorithm>

#include "backends/cuda/kernels/decode_chain_bench.cuh"
#include "backends/cuda/kernels/decode_ring_bench.h"
#include "backends/cuda/kernels/gemv_decode.cuh"
#include "backends/cuda/kernels/weight_layout.h"

namespace cellm::kernels {
namespace {

constexpr int kMaxSlots = 24;
constexpr size_t kMaxRingBytes = 212992;  // the ring and the largest input fit 227 KB
using chain_bench::kDownStage;
using chain_bench::kGateUpStage;
using chain_bench::kOutputStage;
using chain_bench::kQkvStage;
using chain_bench::kStagesPerLayer;
using chain_bench::launch_chain;
using chain_bench::load_acquire;
// float4s per consumer thread a normed input keeps in registers; tile rows at most (more
// consumer warps leave fewer registers per thread).
__host__ __device__ constexpr int norm_vectors(int consumers) {
  return consumers >= 16 ? 2 : 32 / consumers;
}
__host__ __device__ constexpr int max_tile_rows(int consumers) { return consumers >= 16 ? 4 : 8; }

struct RingKernelArgs {
  PersistentChainArgs a;
  uint32_t hidden_row_bytes = 0;  // a device row of `hidden` columns
  uint32_t ffn_row_bytes = 0;     // of `ffn` columns
  int hidden_tile_rows = 0;       // rows per tile of the stages over `hidden` columns
  int ffn_tile_rows = 0;          // of the down stage
  bool stream_weights = true;
  bool block_major = false;
  int slots = 0;  // consumer warps · slots per warp
  uint32_t slot_bytes = 0;
  // Handover (RingShape::handover_scratch): each block owns whole blocks of 32 outputs and
  // quantizes them after the stage into hand_q / hand_scales (the residual's per-32 sums of
  // squares into hand_partials), buffer s & 1 for stage s; the next stage copies them instead of
  // quantizing its f32 input again.
  bool handover = false;
  int8_t* hand_q = nullptr;         // [2][16384]
  float* hand_scales = nullptr;     // [2][512]
  double* hand_partials = nullptr;  // [2][128]
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
  int64_t begin = 0;  // this block's tiles [begin, end)
  int64_t end = 0;
  int64_t first_output = 0;  // handover: the block's first output, its number of blocks of 32
  int num_groups = 0;
};

__device__ __forceinline__ RingStage ring_stage(const RingKernelArgs& k, int s) {
  const PersistentChainArgs& a = k.a;
  const PersistentChainLayer& layer = a.layers[s / kStagesPerLayer];
  RingStage st;
  st.kind = s % kStagesPerLayer;
  st.num_cols = static_cast<int>(a.hidden);
  st.row_bytes = k.hidden_row_bytes;
  st.tile_rows = k.hidden_tile_rows;
  int64_t rows = a.hidden;
  switch (st.kind) {
    case kQkvStage:
      st.w = layer.qkv;
      rows = a.qkv_rows;
      break;
    case kOutputStage:
      st.w = layer.o;
      break;
    case kGateUpStage:
      st.w = layer.gate_up;
      rows = 2 * a.ffn;
      break;
    default:
      st.w = layer.down;
      st.num_cols = static_cast<int>(a.ffn);
      st.row_bytes = k.ffn_row_bytes;
      st.tile_rows = k.ffn_tile_rows;
      break;
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

#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)

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

// The producer thread: every tile of the block, in order, into the ring.
__device__ void produce(const RingKernelArgs& k, uint8_t* ring, uint64_t* full, uint64_t* empty) {
  const uint64_t policy = evict_first_policy();
  const int num_stages = k.a.num_layers * kStagesPerLayer;
  uint32_t n = 0;
  for (int s = 0; s < num_stages; ++s) {
    const RingStage st = ring_stage(k, s);
    const uint32_t tile_bytes = st.row_bytes * static_cast<uint32_t>(st.tile_rows);
    for (int64_t t = st.begin; t < st.end; ++t, ++n) {
      const uint32_t slot = n % static_cast<uint32_t>(k.slots);
      const uint32_t round = n / static_cast<uint32_t>(k.slots);
      if (round > 0) mbarrier_wait(&empty[slot], (round - 1) & 1);
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

// Timing probe (RingShape::block_major; Q4_0, values wrong): the same bytes read as if each lane's
// 16 bytes were one whole block of 32 (low nibbles elements 0..15, high 16..31) against 32
// activations in natural order — one integer sum, one conversion and one multiply-add per block
// and row instead of per group of 4.
template <int R>
__device__ __forceinline__ void multiply_tile_block_major(const uint8_t* tile, const RingStage& st,
                                                          const Int8Rows<1>& input, int lane,
                                                          float (&sums)[8]) {
  float acc[R];
  CELLM_UNROLL
  for (int r = 0; r < R; ++r) acc[r] = 0.0f;
  const int num_chunks = st.num_cols / 32;
#pragma unroll 2
  for (int c = lane; c < num_chunks; c += 32) {
    const uint4 lo = *reinterpret_cast<const uint4*>(input.x[0] + 32 * c);
    const uint4 hi = *reinterpret_cast<const uint4*>(input.x[0] + 32 * c + 16);
    const float dx = input.scales[0][c];
    int x_sum = 0;
    CELLM_UNROLL
    for (int k = 0; k < 4; ++k) {
      x_sum = dp4a(0x08080808u, word_of(lo, k), x_sum);
      x_sum = dp4a(0x08080808u, word_of(hi, k), x_sum);
    }
    CELLM_UNROLL
    for (int r = 0; r < R; ++r) {
      const uint8_t* row = tile + r * st.row_bytes;
      const uint4 q = *reinterpret_cast<const uint4*>(row + 16 * c);
      const uint16_t d = *reinterpret_cast<const uint16_t*>(row + st.num_cols / 2 + 2 * c);
      int sum = -x_sum;
      CELLM_UNROLL
      for (int k = 0; k < 4; ++k) {
        sum = dp4a(word_of(q, k) & 0x0f0f0f0fu, word_of(lo, k), sum);
        sum = dp4a((word_of(q, k) >> 4) & 0x0f0f0f0fu, word_of(hi, k), sum);
      }
      acc[r] = fmaf(f16_bits_to_float(d) * dx, static_cast<float>(sum), acc[r]);
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

template <class Decoder, int R>
__device__ __forceinline__ void multiply(bool block_major, const uint8_t* tile, const RingStage& st,
                                         const Int8Rows<1>& input, int lane, float (&sums)[8]) {
  if constexpr (std::is_same_v<Decoder, DecodeQ4_0>) {
    if (block_major) {
      multiply_tile_block_major<R>(tile, st, input, lane, sums);
      return;
    }
  }
  multiply_tile<Decoder, R>(tile, st, input, lane, sums);
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
    if (staged != nullptr) {
      staged[row - st.first_output] = sums[r];
    } else if (st.kind == kQkvStage) {
      __stcg(a.qkv + row, sums[r]);
    } else {
      __stcg(a.x + row, __ldcg(a.x + row) + sums[r]);
    }
  }
}

template <class Decoder, int kMaxRows>
__device__ __forceinline__ void consume_tile(const PersistentChainArgs& a, const uint8_t* tile,
                                             const RingStage& st, int64_t t,
                                             const Int8Rows<1>& input, int lane, uint64_t* empty,
                                             bool block_major, float* staged) {
  float sums[8];
  const auto finish = [&] {
    __syncwarp();
    if (lane == 0 && empty != nullptr) mbarrier_arrive(empty);
  };
  switch (st.tile_rows) {
    case 8:
      if constexpr (kMaxRows >= 8) {
        multiply<Decoder, 8>(block_major, tile, st, input, lane, sums);
        finish();
        write_tile<8>(a, st, t, lane, sums, staged);
      }
      break;
    case 4:
      multiply<Decoder, 4>(block_major, tile, st, input, lane, sums);
      finish();
      write_tile<4>(a, st, t, lane, sums, staged);
      break;
    case 2:
      multiply<Decoder, 2>(block_major, tile, st, input, lane, sums);
      finish();
      write_tile<2>(a, st, t, lane, sums, staged);
      break;
    default:
      multiply<Decoder, 1>(block_major, tile, st, input, lane, sums);
      finish();
      write_tile<1>(a, st, t, lane, sums, staged);
      break;
  }
}

// The stage's input into shared memory, by the consumer threads on their named barrier.
template <int kThreads, int kNormVectors>
__device__ void prepare_input(const PersistentChainArgs& a, int kind, int8_t* q, float* scales,
                              double* norm_partial) {
  chain_bench::prepare_input<kThreads, kNormVectors>(a, kind, q, scales, norm_partial,
                                                     [] { consumer_barrier<kThreads>(); });
}

// Handover, after stage s's tiles (every consumer warp): warp w takes the block's blocks of 32
// outputs w, w + warps, …: stores them (the residual updated), quantizes what the next stage
// multiplies (the residual times the norm weight; the RMS scale comes later) into buffer s & 1.
template <int kConsumers>
__device__ void hand_over(const RingKernelArgs& k, const RingStage& st, int s, const float* staged,
                          int warp, int lane) {
  const PersistentChainArgs& a = k.a;
  const int buf = s & 1;
  int8_t* hq = k.hand_q + buf * kHandQ;
  float* hs = k.hand_scales + buf * kHandScales;
  double* hp = k.hand_partials + buf * kHandPartials;
  for (int g = warp; g < st.num_groups; g += kConsumers) {
    const int64_t e = st.first_output + 32 * g + lane;
    float v = staged[32 * g + lane];
    bool quantize = true;
    if (st.kind == kQkvStage) {
      __stcg(a.qkv + e, v);
      quantize = st.first_output + 32 * g < a.hidden;  // k and v: no consumer here
    } else if (st.kind == kGateUpStage) {
      __stcg(a.act + e, v);
    } else {
      const float xn = __ldcg(a.x + e) + v;
      __stcg(a.x + e, xn);
      double sq = static_cast<double>(__fmul_rn(xn, xn));
      CELLM_UNROLL
      for (int offset = 16; offset > 0; offset >>= 1) {
        sq += __shfl_xor_sync(0xffffffffu, sq, offset);
      }
      if (lane == 0) hp[e / 32] = sq;
      v = xn * __ldg(a.norm_weight + e);
    }
    if (!quantize) continue;
    float amax = fabsf(v);
    CELLM_UNROLL
    for (int offset = 16; offset > 0; offset >>= 1) {
      amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, offset));
    }
    const float scale = q8_block_scale(amax);
    hq[interleaved_q8_offset(e)] = q8_quantize(v, scale);
    if (lane == 0) hs[e / 32] = scale;
  }
}

// Handover: stage `kind`'s input from buffer `buf` into shared memory; a normed input's block
// scales times the RMS scale of the residual's sums of squares.
template <int kThreads>
__device__ void take_handover(const RingKernelArgs& k, int kind, int buf, int8_t* q, float* scales,
                              double* norm_partial) {
  const PersistentChainArgs& a = k.a;
  const int64_t cols = kind == kDownStage ? a.ffn : a.hidden;
  const bool normed = kind == kQkvStage || kind == kGateUpStage;
  const int8_t* hq = k.hand_q + buf * kHandQ;
  const float* hs = k.hand_scales + buf * kHandScales;
  const double* hp = k.hand_partials + buf * kHandPartials;
  const int tid = static_cast<int>(threadIdx.x);
#pragma unroll 4
  for (int64_t i = tid; i < cols / 16; i += kThreads) {
    reinterpret_cast<uint4*>(q)[i] = __ldcg(reinterpret_cast<const uint4*>(hq) + i);
  }
  float rms = 1.0f;
  if (normed) {
    double sum = tid < a.hidden / 32 ? __ldcg(hp + tid) : 0.0;
    CELLM_UNROLL
    for (int offset = 16; offset > 0; offset >>= 1) {
      sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    }
    if ((tid & 31) == 0) norm_partial[tid >> 5] = sum;
    consumer_barrier<kThreads>();
    double total = 0.0;
    for (int w = 0; w < kThreads / 32; ++w) total += norm_partial[w];
    rms = rms_inverse(total, a.hidden, a.norm_eps);
  }
  for (int64_t j = tid; j < cols / 32; j += kThreads) scales[j] = __ldcg(hs + j) * rms;
  consumer_barrier<kThreads>();
}

#endif  // __CUDA_ARCH__ >= 900

template <class Decoder, int kConsumers>
__global__ void __launch_bounds__((kConsumers + 1) * 32, 1)
    ring_chain_kernel(const RingKernelArgs k) {
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)
  constexpr int kThreads = kConsumers * 32;
  const PersistentChainArgs& a = k.a;
  extern __shared__ __align__(128) uint8_t ring_smem[];
  __shared__ uint64_t full[kMaxSlots];
  __shared__ uint64_t empty[kMaxSlots];
  __shared__ double norm_partial[kConsumers];
  __shared__ float staged[256];  // handover: the block's outputs of the stage
  const int64_t max_cols = a.hidden > a.ffn ? a.hidden : a.ffn;
  uint8_t* ring = ring_smem;  // [slots][slot_bytes]
  auto* scales = reinterpret_cast<float*>(ring_smem + static_cast<size_t>(k.slots) * k.slot_bytes);
  auto* q = reinterpret_cast<int8_t*>(scales + max_cols / 32);  // [max_cols], interleaved
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  if (threadIdx.x == 0) {
    for (int i = 0; i < k.slots; ++i) {
      mbarrier_init(&full[i], 1);
      mbarrier_init(&empty[i], 1);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (warp == kConsumers) {
    if (lane == 0 && k.stream_weights) produce(k, ring, full, empty);
    return;
  }
  Int8Rows<1> input;
  input.x[0] = q;
  input.scales[0] = scales;
  const int num_stages = a.num_layers * kStagesPerLayer;
  uint32_t n = 0;  // the block's first tile of the stage
  RingStage st = ring_stage(k, 0);
  constexpr int kNormVectors = norm_vectors(kConsumers);
  if (!a.skip_inputs) prepare_input<kThreads, kNormVectors>(a, st.kind, q, scales, norm_partial);
  for (int s = 0; s < num_stages; ++s) {
    const int64_t num_tiles = st.end - st.begin;
    // Tile m is warp m % kConsumers's, so a slot (m % slots) serves one warp, in its order.
    const int64_t first = (warp - static_cast<int>(n % kConsumers) + kConsumers) % kConsumers;
    for (int64_t i = first; i < num_tiles; i += kConsumers) {
      const uint32_t m = n + static_cast<uint32_t>(i);
      const uint32_t slot = m % static_cast<uint32_t>(k.slots);
      if (k.stream_weights) mbarrier_wait(&full[slot], (m / static_cast<uint32_t>(k.slots)) & 1);
      consume_tile<Decoder, max_tile_rows(kConsumers)>(
          a, ring + static_cast<size_t>(slot) * k.slot_bytes, st, st.begin + i, input, lane,
          k.stream_weights ? &empty[slot] : nullptr, k.block_major, k.handover ? staged : nullptr);
    }
    n += static_cast<uint32_t>(num_tiles);
    consumer_barrier<kThreads>();  // the block is done with stage s and its input
    if (k.handover) {
      hand_over<kConsumers>(k, st, s, staged, warp, lane);
      consumer_barrier<kThreads>();
    }
    if (s + 1 == num_stages) break;
    st = ring_stage(k, s + 1);
    if (!a.skip_barriers) {
      if (threadIdx.x == 0) {
        // Release: the block's outputs, ordered before by the named barrier, then the count.
        asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(a.barrier) : "memory");
        const unsigned target = static_cast<unsigned>(s + 1) * gridDim.x;
        const uint64_t start = global_ns();
        while (load_acquire(a.barrier) < target) {
          if (global_ns() - start > kWaitLimitNs) __trap();
        }
      }
      consumer_barrier<kThreads>();
    }
    if (!a.skip_inputs) {
      if (k.handover) {
        take_handover<kThreads>(k, st.kind, s & 1, q, scales, norm_partial);
      } else {
        prepare_input<kThreads, kNormVectors>(a, st.kind, q, scales, norm_partial);
      }
    }
  }
#else
  (void)k;
#endif
}

// Rows per tile: the most of 8, 4, 2, 1 whose bytes fit a slot (gate|up: at least 2); 0 if none.
int tile_rows(uint64_t row_bytes, uint64_t slot_bytes, bool pairs) {
  for (const int r : {8, 4, 2, 1}) {
    if (row_bytes * r <= slot_bytes) return r == 1 && pairs ? 0 : r;
  }
  return 0;
}

template <class Decoder, int kConsumers>
cudaError_t launch_typed(const RingKernelArgs& k, cudaStream_t stream) {
  const auto kernel = ring_chain_kernel<Decoder, kConsumers>;
  if (k.hidden_tile_rows > max_tile_rows(kConsumers) ||
      k.ffn_tile_rows > max_tile_rows(kConsumers) ||
      k.a.hidden > 4 * norm_vectors(kConsumers) * 32 * kConsumers) {
    return cudaErrorInvalidValue;
  }
  const int64_t max_cols = std::max(k.a.hidden, k.a.ffn);
  const size_t smem_bytes = static_cast<size_t>(k.slots) * k.slot_bytes +
                            static_cast<size_t>(max_cols / 32 * 4 + max_cols);
  return launch_chain(kernel, k, k.a, (kConsumers + 1) * 32, smem_bytes, stream);
}

template <class Decoder>
cudaError_t launch_decoder(const RingKernelArgs& k, int consumer_warps, cudaStream_t stream) {
  switch (consumer_warps) {
    case 4:
      return launch_typed<Decoder, 4>(k, stream);
    case 8:
      return launch_typed<Decoder, 8>(k, stream);
    case 16:
      return launch_typed<Decoder, 16>(k, stream);
    case 20:
      return launch_typed<Decoder, 20>(k, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace

size_t ring_handover_scratch_bytes() {
  return 2 * (kHandPartials * sizeof(double) + kHandScales * sizeof(float) + kHandQ);
}

cudaError_t launch_ring_chain(const PersistentChainArgs& a, const RingShape& shape,
                              cudaStream_t stream) {
  const bool shape_ok =
      a.num_layers > 0 && a.hidden % 256 == 0 && a.ffn % 256 == 0 && a.qkv_rows >= a.hidden &&
      shape.slots_per_warp >= 1 && shape.consumer_warps * shape.slots_per_warp <= kMaxSlots &&
      shape.slot_bytes % 16 == 0 &&
      static_cast<size_t>(shape.consumer_warps) * shape.slots_per_warp * shape.slot_bytes <=
          kMaxRingBytes;
  if (!shape_ok || a.layers == nullptr || a.x == nullptr || a.qkv == nullptr || a.act == nullptr ||
      a.norm_weight == nullptr || a.barrier == nullptr) {
    return cudaErrorInvalidValue;
  }
  RingKernelArgs k;
  k.a = a;
  k.hidden_row_bytes = static_cast<uint32_t>(device_row_bytes(a.type, a.hidden));
  k.ffn_row_bytes = static_cast<uint32_t>(device_row_bytes(a.type, a.ffn));
  k.hidden_tile_rows = tile_rows(k.hidden_row_bytes, shape.slot_bytes, true);
  k.ffn_tile_rows = tile_rows(k.ffn_row_bytes, shape.slot_bytes, false);
  k.slots = shape.consumer_warps * shape.slots_per_warp;
  k.slot_bytes = shape.slot_bytes;
  k.stream_weights = shape.stream_weights;
  k.block_major = shape.block_major && a.type == TensorType::kQ4_0;
  k.handover = shape.handover_scratch != nullptr;
  if (k.handover) {
    auto* scratch = static_cast<uint8_t*>(shape.handover_scratch);
    k.hand_partials = reinterpret_cast<double*>(scratch);
    k.hand_scales = reinterpret_cast<float*>(scratch + 2 * kHandPartials * sizeof(double));
    k.hand_q = reinterpret_cast<int8_t*>(scratch + 2 * kHandPartials * sizeof(double) +
                                         2 * kHandScales * sizeof(float));
    if (std::max(a.hidden, a.ffn) > kHandQ || a.hidden / 32 > kHandPartials) {
      return cudaErrorInvalidValue;
    }
  }
  const bool tiles_ok = k.hidden_tile_rows >= 2 && k.ffn_tile_rows >= 1 &&
                        a.qkv_rows % k.hidden_tile_rows == 0 &&
                        a.hidden % k.hidden_tile_rows == 0 &&
                        a.ffn % (k.hidden_tile_rows / 2) == 0 && a.hidden % k.ffn_tile_rows == 0;
  if (!tiles_ok) return cudaErrorInvalidValue;
  switch (a.type) {
    case TensorType::kQ8_0:
      return launch_decoder<DecodeQ8_0>(k, shape.consumer_warps, stream);
    case TensorType::kQ4_0:
      return launch_decoder<DecodeQ4_0>(k, shape.consumer_warps, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace cellm::kernels
