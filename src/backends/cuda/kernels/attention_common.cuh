// attention_common: device helpers shared by the decode and prefill attention kernels — the
// visible range of a token, the split arithmetic and each decode block's share of the work, the
// merge of a decode block's warps, the runs of one sequence's tokens of a prefill block,
// asynchronous global → shared copies, K/V element conversion and warp reductions (and, through
// op_math.cuh, soft_capped for the scores). Device code; include only from .cu files.
#pragma once

#include <climits>

#include "backends/cuda/kernels/attention.cuh"
#include "backends/cuda/kernels/attention_internal.h"
#include "backends/cuda/kernels/kernel_common.cuh"
#include "backends/cuda/kernels/op_math.cuh"
#include "backends/cuda/kernels/wide_act_order.cuh"

namespace cellm::kernels {

struct VisibleRange {
  int32_t begin;  // first visible position
  int32_t end;    // one past the last (pos + 1)
};

__device__ __forceinline__ VisibleRange visible_positions(int32_t pos, int32_t window) {
  VisibleRange r;
  r.begin = window > 0 ? max(0, pos - window + 1) : 0;
  r.end = pos + 1;
  return r;
}

// Cells per split and number of (non-empty) splits for n visible cells.
__device__ __forceinline__ void split_shape(int32_t n, int32_t max_splits, int32_t min_cells,
                                            int32_t* cells_per_split, int32_t* num_splits) {
  const int32_t wanted = max(1, min(max_splits, (n + min_cells - 1) / min_cells));
  *cells_per_split = (n + wanted - 1) / wanted;
  *num_splits = (n + *cells_per_split - 1) / *cells_per_split;
}

__device__ __forceinline__ void copy_async_16(void* smem, const void* gmem) {
  const auto address = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(address), "l"(gmem));
}
__device__ __forceinline__ void copy_async_wait_all() {
  asm volatile("cp.async.commit_group;\n" ::);
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
}

template <KvDtype kDtype>
struct KvTraits;
template <>
struct KvTraits<KvDtype::kF32> {
  static constexpr int kBytes = 4;
  __device__ __forceinline__ static float load(const uint8_t* row, int d) {
    return reinterpret_cast<const float*>(row)[d];
  }
};
template <>
struct KvTraits<KvDtype::kF16> {
  static constexpr int kBytes = 2;
  __device__ __forceinline__ static float load(const uint8_t* row, int d) {
    return f16_bits_to_float(reinterpret_cast<const uint16_t*>(row)[d]);
  }
};
template <>
struct KvTraits<KvDtype::kBF16> {
  static constexpr int kBytes = 2;
  __device__ __forceinline__ static float load(const uint8_t* row, int d) {
    return bf16_bits_to_float(reinterpret_cast<const uint16_t*>(row)[d]);
  }
};

__device__ __forceinline__ float warp_max(float v) {
  for (int offset = 16; offset > 0; offset >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// e^(a − b) where a may be −inf (→ 0).
__device__ __forceinline__ float exp_diff(float a, float b) {
  return a == -INFINITY ? 0.0f : expf(a - b);
}

// A decode block's share: blockIdx = (kv head × batch of up to kRows of its query heads, token,
// split) — heads head0 .. head0 + num_group − 1, positions [begin, end) of the token's sequence.
struct DecodeBlock {
  int kv_head;
  int num_group;
  int head0;
  int token;
  int split;
  int32_t num_splits;
  int32_t begin;
  int32_t end;
  const int32_t* cells;  // the sequence's cells, by position
};

// The block's share; false when its split is past the token's splits (the block has no work).
template <int kRows>
__device__ __forceinline__ bool decode_block(const DecodeKernelArgs& args, DecodeBlock* b) {
  const AttentionArgs& a = args.a;
  const int group = a.num_heads / a.num_kv_heads;
  const int batches = (group + kRows - 1) / kRows;
  b->kv_head = static_cast<int>(blockIdx.x) / batches;
  const int g0 = static_cast<int>(blockIdx.x) % batches * kRows;
  b->num_group = min(kRows, group - g0);
  b->head0 = b->kv_head * group + g0;
  b->token = blockIdx.y;
  b->split = blockIdx.z;
  // The loads first, before the split arithmetic: every round trip of this prologue is on the
  // kernel's critical path (one round with the token's cell offset given, else two).
  const int32_t pos = __ldg(a.cells.token_pos + b->token);
  if (a.cells.token_cell_offsets != nullptr) {
    b->cells = a.cells.seq_cells + __ldg(a.cells.token_cell_offsets + b->token);
  } else {
    const int32_t seq = __ldg(a.cells.token_step_seq + b->token);
    b->cells = a.cells.seq_cells + __ldg(a.cells.seq_cell_offsets + seq);
  }
  const VisibleRange range = visible_positions(pos, a.window);
  int32_t cells_per_split = 0;
  split_shape(range.end - range.begin, args.max_splits, args.min_cells, &cells_per_split,
              &b->num_splits);
  if (b->split >= b->num_splits) return false;
  b->begin = range.begin + b->split * cells_per_split;
  b->end = min(range.end, b->begin + cells_per_split);
  return true;
}

// The merge of a decode block's kWarps online-softmax states — red_m, red_l: [kWarps, kRows]
// running max and sum; red_o: [kWarps, kRows, o_stride] outputs — for logical row g, value dim d:
// the largest max, and the sum and output rescaled to it (in warp order).
template <int kWarps, int kRows>
__device__ __forceinline__ void merge_warp_states(const float* red_m, const float* red_l,
                                                  const float* red_o, int o_stride, int g, int d,
                                                  float* max_all, float* sum, float* out) {
  float m = -INFINITY;
  CELLM_UNROLL
  for (int w = 0; w < kWarps; ++w) m = fmaxf(m, red_m[w * kRows + g]);
  float l = 0.0f;
  float o = 0.0f;
  CELLM_UNROLL
  for (int w = 0; w < kWarps; ++w) {
    const float e = exp_diff(red_m[w * kRows + g], m);
    l = fmaf(red_l[w * kRows + g], e, l);
    o = fmaf(red_o[(w * kRows + g) * o_stride + d], e, o);
  }
  *max_all = m;
  *sum = l;
  *out = o;
}

// Calls use(g, d, max, sum, out) for every logical row g < b.num_group and value dim d < dims of
// a decode block, its warps' states merged (merge_warp_states); the block's threads share them.
template <int kWarps, int kRows, class Use>
__device__ __forceinline__ void for_each_merged_output(const DecodeBlock& b, int dims,
                                                       const float* red_m, const float* red_l,
                                                       const float* red_o, int o_stride,
                                                       const Use& use) {
  for (int i = threadIdx.x; i < b.num_group * dims; i += kWarps * 32) {
    const int g = i / dims;
    const int d = i - g * dims;
    float max_all = 0.0f;
    float sum = 0.0f;
    float out = 0.0f;
    merge_warp_states<kWarps, kRows>(red_m, red_l, red_o, o_stride, g, d, &max_all, &sum, &out);
    use(g, d, max_all, sum, out);
  }
}

// Writes output `column` (head · value_head_dim + dim) of `token`, and its bf16 copy in the next
// product's order where a.out_wide asks.
__device__ __forceinline__ void store_decode_output(const AttentionArgs& a, int64_t token,
                                                    int64_t column, float value) {
  a.out[token * a.out_stride + column] = value;
  if (a.out_wide != nullptr) {
    const int64_t width = static_cast<int64_t>(a.num_heads) * a.value_head_dim;
    a.out_wide[token * width + wide_act_index(a.out_wide_order, column)] =
        float_to_bf16_bits(value);
  }
}

// Merges a decode block's warp states per head and value dim, and writes the output (one split)
// or the split's partials for the combine kernel.
template <int kWarps, int kRows>
__device__ __forceinline__ void merge_decode_warps(const DecodeKernelArgs& args,
                                                   const DecodeBlock& b, const float* red_m,
                                                   const float* red_l, const float* red_o,
                                                   int o_stride) {
  const AttentionArgs& a = args.a;
  const int dims = a.value_head_dim;
  for_each_merged_output<kWarps, kRows>(
      b, dims, red_m, red_l, red_o, o_stride,
      [&](int g, int d, float max_all, float sum, float out) {
        const int h = b.head0 + g;
        if (b.num_splits == 1) {
          store_decode_output(a, b.token, h * dims + d, __fdiv_rn(out, sum));
        } else {
          const int64_t slot =
              (static_cast<int64_t>(b.token) * a.num_heads + h) * args.max_splits + b.split;
          args.partial_out[slot * dims + d] = out;
          if (d == 0) {
            args.partial_ml[2 * slot] = max_all;
            args.partial_ml[2 * slot + 1] = sum;
          }
        }
      });
}

// A prefill block's share: blockIdx = (token tile, kv head × batch of `slots` query heads) —
// query heads slot0 .. slot0 + slots − 1 of kv head kv_head's group (of `group`) for tokens
// [t0, t_end). Tiles are taken heaviest first: later tokens see more keys, so starting them early
// balances the SMs.
struct PrefillBlock {
  int group;
  int kv_head;
  int slot0;
  int t0;
  int t_end;
};

__device__ __forceinline__ PrefillBlock prefill_block(const AttentionArgs& a, int rows, int slots) {
  PrefillBlock b;
  b.group = a.num_heads / a.num_kv_heads;
  const int batches = (b.group + slots - 1) / slots;
  b.kv_head = static_cast<int>(blockIdx.y) / batches;
  b.slot0 = static_cast<int>(blockIdx.y) % batches * slots;
  const int tokens_per_block = rows / slots;
  b.t0 = static_cast<int>(gridDim.x - 1 - blockIdx.x) * tokens_per_block;
  b.t_end = min(b.t0 + tokens_per_block, a.num_tokens);
  return b;
}

// A prefill block's run of consecutive tokens of one sequence: [begin, end), the union of their
// visible positions [key_begin, key_end) and the sequence's cells.
struct TokenRun {
  int end;
  int32_t key_begin;
  int32_t key_end;
  const int32_t* cells;
};

// The run that starts at token `begin` (< t_end) and ends at t_end or the next sequence.
__device__ __forceinline__ TokenRun token_run(const AttentionArgs& a, int begin, int t_end) {
  const int32_t seq = a.cells.token_step_seq[begin];
  TokenRun run{begin + 1, INT_MAX, 0, a.cells.seq_cells + a.cells.seq_cell_offsets[seq]};
  while (run.end < t_end && a.cells.token_step_seq[run.end] == seq) ++run.end;
  for (int t = begin; t < run.end; ++t) {
    const VisibleRange r = visible_positions(a.cells.token_pos[t], a.window);
    run.key_begin = min(run.key_begin, r.begin);
    run.key_end = max(run.key_end, r.end);
  }
  return run;
}

}  // namespace cellm::kernels
