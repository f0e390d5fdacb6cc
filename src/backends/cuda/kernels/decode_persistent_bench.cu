// decode_persistent_bench: the one-launch chain of a decode step's layer products (see the
// header). Sub-block `sub` of block b runs row groups begin + sub, + kSubs, … of the stage's
// range [begin, end) for block b (ranges balanced by group count); its thread i owns chunks
// i, i + 128, … of each of the group's four rows, one chunk per row in flight (as the shipped
// one-token kernel), refilled right after use: with the next group's first chunk past a group's
// end, with the next stage's past the stage's last group. Partial sums: warp shuffles, then the
// sub-block's four warps through shared memory (double-buffered, one named barrier per group).
#include <algorithm>

#include "backends/cuda/kernels/decode_chain_bench.cuh"
#include "backends/cuda/kernels/decode_persistent_bench.h"
#include "backends/cuda/kernels/gemv_decode.cuh"
#include "backends/cuda/kernels/weight_layout.h"

namespace cellm::kernels {
namespace {

constexpr int kSubThreads = 128;
constexpr int kSubWarps = kSubThreads / 32;
constexpr int kRows = 4;  // rows per group (gate|up: two gate rows, the two up rows they pair with)
constexpr int kMaxNormVectors = 4;  // float4s per thread a normed input keeps in registers
using chain_bench::kDownStage;
using chain_bench::kGateUpStage;
using chain_bench::kOutputStage;
using chain_bench::kQkvStage;
using chain_bench::kStagesPerLayer;
using chain_bench::launch_chain;
using chain_bench::load_acquire;

struct ChainKernelArgs {
  PersistentChainArgs a;
  uint64_t hidden_row_bytes = 0;  // a weight row of `hidden` columns, device layout
  uint64_t ffn_row_bytes = 0;     // of `ffn` columns
};

struct Stage {
  const uint8_t* w = nullptr;  // [rows, row_bytes]
  int64_t num_cols = 0;
  uint64_t row_bytes = 0;
  int64_t half_rows = 0;  // gate|up: the first up row
  int kind = 0;
  int64_t begin = 0;  // this block's row groups [begin, end)
  int64_t end = 0;
};

__device__ __forceinline__ Stage stage_of(const ChainKernelArgs& k, int s) {
  const PersistentChainArgs& a = k.a;
  const PersistentChainLayer& layer = a.layers[s / kStagesPerLayer];
  Stage stage;
  stage.kind = s % kStagesPerLayer;
  stage.num_cols = a.hidden;
  stage.row_bytes = k.hidden_row_bytes;
  int64_t groups = a.hidden / kRows;
  switch (stage.kind) {
    case kQkvStage:
      stage.w = layer.qkv;
      groups = a.qkv_rows / kRows;
      break;
    case kOutputStage:
      stage.w = layer.o;
      break;
    case kGateUpStage:
      stage.w = layer.gate_up;
      stage.half_rows = a.ffn;
      groups = a.ffn / (kRows / 2);
      break;
    default:
      stage.w = layer.down;
      stage.num_cols = a.ffn;
      stage.row_bytes = k.ffn_row_bytes;
      break;
  }
  stage.begin = groups * blockIdx.x / gridDim.x;
  stage.end = groups * (blockIdx.x + 1) / gridDim.x;
  return stage;
}

// A group's four weight rows: row r at base + (r & 1) · row_bytes + (r >> 1) · pair_bytes (two
// consecutive rows, then the next two — for gate|up, the up rows that pair with the gate rows).
struct GroupRows {
  const uint8_t* base = nullptr;
  uint32_t row_bytes = 0;
  uint32_t pair_bytes = 0;
  int32_t num_cols = 0;
};

__device__ __forceinline__ GroupRows rows_of(const Stage& stage, int64_t group) {
  GroupRows g;
  g.row_bytes = static_cast<uint32_t>(stage.row_bytes);
  g.num_cols = static_cast<int32_t>(stage.num_cols);
  if (stage.kind == kGateUpStage) {
    g.base = stage.w + group * (kRows / 2) * static_cast<int64_t>(stage.row_bytes);
    g.pair_bytes = static_cast<uint32_t>(stage.half_rows * stage.row_bytes);
  } else {
    g.base = stage.w + group * kRows * static_cast<int64_t>(stage.row_bytes);
    g.pair_bytes = 2 * g.row_bytes;
  }
  return g;
}

template <class Decoder>
__device__ __forceinline__ void load_rows(const GroupRows& g, int64_t c,
                                          typename Decoder::Chunk (&chunks)[kRows]) {
  CELLM_UNROLL
  for (int r = 0; r < kRows; ++r) {
    chunks[r] =
        Decoder::load(g.base + (r & 1) * g.row_bytes + (r >> 1) * g.pair_bytes, g.num_cols, c);
  }
}

// Every block of the grid arrives; returns when `target` arrivals (all blocks, all barriers so
// far) have been counted. The counter only grows (zeroed before the launch).
__device__ __forceinline__ void grid_barrier(unsigned* counter, unsigned target) {
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    atomicAdd(counter, 1u);
    while (load_acquire(counter) < target) {
    }
    __threadfence();
  }
  __syncthreads();
}

__device__ __forceinline__ void sub_barrier(int sub) {
  asm volatile("bar.sync %0, %1;" ::"r"(sub + 1), "r"(kSubThreads) : "memory");
}

// The stage's input into the block's shared memory; every thread takes part.
template <int kThreads>
__device__ void prepare_block_input(const PersistentChainArgs& a, int kind, int8_t* q,
                                    float* scales, double* norm_partial) {
  chain_bench::prepare_input<kThreads, kMaxNormVectors>(a, kind, q, scales, norm_partial, true,
                                                        [] { __syncthreads(); });
}

// Writes group `group`'s results: q|k|v stored, output and down added to the residual, SwiGLU of
// gate|up. sums: partial[warp][row] of the sub-block's warps.
__device__ __forceinline__ void write_group(const PersistentChainArgs& a, int kind, int64_t group,
                                            int i, const float (&partial)[kSubWarps][kRows]) {
  const auto sum_of = [&](int r) {
    float sum = partial[0][r];
    CELLM_UNROLL
    for (int w = 1; w < kSubWarps; ++w) sum += partial[w][r];
    return sum;
  };
  if (kind == kGateUpStage) {
    if (i >= kRows / 2) return;
    const int64_t j = group * (kRows / 2) + i;
    if (j < a.ffn) __stcg(a.act + j, silu_mul(sum_of(i), sum_of(kRows / 2 + i)));
    return;
  }
  if (i >= kRows) return;
  const int64_t row = group * kRows + i;
  if (kind == kQkvStage) {
    __stcg(a.qkv + row, sum_of(i));
  } else {
    __stcg(a.x + row, __ldcg(a.x + row) + sum_of(i));
  }
}

template <class Decoder, int kSubs>
__global__ void __launch_bounds__(kSubs* kSubThreads, 1)
    persistent_chain_kernel(const ChainKernelArgs k) {
  constexpr int kThreads = kSubs * kSubThreads;
  const PersistentChainArgs& a = k.a;
  extern __shared__ __align__(16) uint8_t chain_smem[];
  __shared__ float partial[2][kSubs][kSubWarps][kRows];
  __shared__ double norm_partial[kThreads / 32];
  const int64_t max_cols = a.hidden > a.ffn ? a.hidden : a.ffn;
  auto* scales = reinterpret_cast<float*>(chain_smem);                                // [K / 32]
  auto* q = reinterpret_cast<int8_t*>(chain_smem + (max_cols / 32) * sizeof(float));  // [K]
  Int8Rows<1> input;
  input.x[0] = q;
  input.scales[0] = scales;

  const int sub = static_cast<int>(threadIdx.x) / kSubThreads;
  const int i = static_cast<int>(threadIdx.x) % kSubThreads;  // the thread's first chunk
  const int lane = i & 31;
  const int warp = i >> 5;
  const int num_stages = a.num_layers * kStagesPerLayer;

  Stage stage = stage_of(k, 0);
  int64_t group = stage.begin + sub;
  GroupRows rows;
  typename Decoder::Chunk chunks[kRows];
  if (group < stage.end) {
    rows = rows_of(stage, group);
    load_rows<Decoder>(rows, i, chunks);
  }
  prepare_block_input<kThreads>(a, stage.kind, q, scales, norm_partial);
  int parity = 0;
  for (int s = 0; s < num_stages; ++s) {
    const bool has_next_stage = s + 1 < num_stages;
    const int64_t num_chunks = stage.num_cols / Decoder::kChunkElems;
    bool next_stage_loaded = false;
    while (group < stage.end) {
      const int64_t next_group = group + kSubs;
      const bool same_stage = next_group < stage.end;
      bool has_next = same_stage;
      GroupRows next;
      if (same_stage) {
        next = rows_of(stage, next_group);
      } else if (has_next_stage) {
        const Stage next_stage = stage_of(k, s + 1);
        has_next = next_stage.begin + sub < next_stage.end;
        if (has_next) next = rows_of(next_stage, next_stage.begin + sub);
      }
      float acc[kRows][1];
      CELLM_UNROLL
      for (int r = 0; r < kRows; ++r) acc[r][0] = 0.0f;
      for (int64_t c = i; c < num_chunks; c += kSubThreads) {
        accumulate_int8<Decoder, kRows, 1, true>(chunks, 1, input, c, acc);
        const int64_t c_next = c + kSubThreads;
        if (c_next < num_chunks) {
          load_rows<Decoder>(rows, c_next, chunks);
        } else if (has_next) {
          load_rows<Decoder>(next, i, chunks);
        }
      }
      CELLM_UNROLL
      for (int r = 0; r < kRows; ++r) {
        float v = acc[r][0];
        CELLM_UNROLL
        for (int offset = 16; offset > 0; offset >>= 1) {
          v += __shfl_xor_sync(0xffffffffu, v, offset);
        }
        if (lane == 0) partial[parity][sub][warp][r] = v;
      }
      sub_barrier(sub);
      write_group(a, stage.kind, group, i, partial[parity][sub]);
      parity ^= 1;
      rows = next;
      if (!same_stage) {
        next_stage_loaded = true;
        break;
      }
      group = next_group;
    }
    if (!has_next_stage) break;
    stage = stage_of(k, s + 1);
    group = stage.begin + sub;
    if (!next_stage_loaded && group < stage.end) {  // no group here: load before the barrier
      rows = rows_of(stage, group);
      load_rows<Decoder>(rows, i, chunks);
    }
    if (!a.skip_barriers) grid_barrier(a.barrier, static_cast<unsigned>(s + 1) * gridDim.x);
    if (!a.skip_inputs) prepare_block_input<kThreads>(a, stage.kind, q, scales, norm_partial);
  }
}

template <class Decoder, int kSubs>
cudaError_t launch_typed(const ChainKernelArgs& k, cudaStream_t stream) {
  const auto kernel = persistent_chain_kernel<Decoder, kSubs>;
  const int64_t max_cols = std::max(k.a.hidden, k.a.ffn);
  const size_t smem_bytes = static_cast<size_t>(max_cols / 32 * 4 + max_cols);
  return launch_chain(kernel, k, k.a, kSubs * kSubThreads, smem_bytes, stream);
}

template <class Decoder>
cudaError_t launch_decoder(const ChainKernelArgs& k, cudaStream_t stream) {
  switch (k.a.subs_per_block) {
    case 4:
      return launch_typed<Decoder, 4>(k, stream);
    case 6:
      return launch_typed<Decoder, 6>(k, stream);
    case 8:
      return launch_typed<Decoder, 8>(k, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace

cudaError_t launch_persistent_chain(const PersistentChainArgs& a, cudaStream_t stream) {
  // Whole 256-element spans, every thread of a sub-block owning a chunk of each row, a normed
  // input in kMaxNormVectors float4s per thread of the smallest block.
  const bool shape_ok =
      a.num_layers > 0 && a.hidden % 256 == 0 && a.ffn % 256 == 0 && a.hidden >= 32 * kSubThreads &&
      a.ffn >= 32 * kSubThreads && a.qkv_rows >= a.hidden && a.qkv_rows % kRows == 0 &&
      a.ffn % (kRows / 2) == 0 && a.hidden <= 4 * kMaxNormVectors * 4 * kSubThreads;
  if (!shape_ok || a.layers == nullptr || a.x == nullptr || a.qkv == nullptr || a.act == nullptr ||
      a.norm_weight == nullptr || a.barrier == nullptr) {
    return cudaErrorInvalidValue;
  }
  ChainKernelArgs k;
  k.a = a;
  k.hidden_row_bytes = device_row_bytes(a.type, a.hidden);
  k.ffn_row_bytes = device_row_bytes(a.type, a.ffn);
  switch (a.type) {
    case TensorType::kQ8_0:
      return launch_decoder<DecodeQ8_0>(k, stream);
    case TensorType::kQ4_0:
      return launch_decoder<DecodeQ4_0>(k, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace cellm::kernels
