// attention_prefill_tc: tiled causal attention on tensor cores for runs of consecutive tokens of
// one sequence, for f16 / bf16 caches with key and value heads of 64 or 128 dims
// (attention_internal.h) — flash-attention style, the Q tile in registers, online softmax in f32.
//
// A block takes 32 logical rows — Qt consecutive tokens × Gs query heads of one kv head (Gs a
// power of two ≤ 8, Qt = 32 / Gs) — 8 per warp (attention_tc.cuh). For each run of tokens of one
// sequence among them it walks the run's visible positions in 64-key tiles: K and V rows are
// copied (cp.async) from their cells into a two-stage shared-memory ring (tile i + 1 in flight
// while tile i is used), every warp scores all 64 keys for its rows (masked: causal, window, run;
// tiles wholly outside a warp's rows are skipped) and accumulates P·V. Rows of other runs of the
// block are masked out and written by their own pass. Blocks start with the last tokens (the most
// keys) so the long ones are not left for the end.
#include <algorithm>
#include <climits>

#include "backends/cuda/kernels/attention_internal.h"
#include "backends/cuda/kernels/attention_tc.cuh"
#include "backends/cuda/kernels/launch_status.h"

namespace cellm::kernels {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kRows = 8 * kWarps;  // logical rows per block
constexpr int kTileKeys = 64;
constexpr int kMaxGroupSlots = 8;

template <int kDim>
struct PrefillTcShape {
  static constexpr int kStride = kDim + 8;
  static constexpr int kTileElems = kTileKeys * kStride;  // one K or V tile
  static constexpr size_t kSmemBytes = size_t{2} * 2 * kTileElems * 2;
};

template <KvDtype kDtype, int kDim>
__global__ void __launch_bounds__(kThreads, 2)
    prefill_attention_tc_kernel(const AttentionArgs a, int group_slots) {
  constexpr bool kF16 = kDtype == KvDtype::kF16;
  using Shape = PrefillTcShape<kDim>;
  constexpr int kStride = Shape::kStride;
  extern __shared__ __align__(16) uint8_t smem[];
  auto* stages = reinterpret_cast<uint16_t*>(smem);  // [2][K, V][kTileKeys][kStride]

  const int group = a.num_heads / a.num_kv_heads;
  const int batches = (group + group_slots - 1) / group_slots;
  const int kv_head = static_cast<int>(blockIdx.y) / batches;
  const int slot0 = static_cast<int>(blockIdx.y) % batches * group_slots;
  const int tokens_per_block = kRows / group_slots;
  const int t0 = static_cast<int>(gridDim.x - 1 - blockIdx.x) * tokens_per_block;
  const int t_end = min(t0 + tokens_per_block, a.num_tokens);

  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int quad = lane & 3;
  const int row = 8 * warp + (lane >> 2);  // this lane's logical row
  const int row_token = t0 + row / group_slots;
  const int row_slot = slot0 + row % group_slots;
  const int row_head = kv_head * group + row_slot;

  const auto* k_cache = static_cast<const uint8_t*>(a.k_cache);
  const auto* v_cache = static_cast<const uint8_t*>(a.v_cache);
  const int64_t cell_bytes = static_cast<int64_t>(a.num_kv_heads) * kDim * 2;
  const int64_t head_offset = static_cast<int64_t>(kv_head) * kDim * 2;

  for (int run_begin = t0; run_begin < t_end;) {
    const int32_t seq = a.cells.token_step_seq[run_begin];
    int run_end = run_begin + 1;
    while (run_end < t_end && a.cells.token_step_seq[run_end] == seq) ++run_end;
    int32_t key_begin = INT_MAX;
    int32_t key_end = 0;
    for (int t = run_begin; t < run_end; ++t) {
      const VisibleRange r = visible_positions(a.cells.token_pos[t], a.window);
      key_begin = min(key_begin, r.begin);
      key_end = max(key_end, r.end);
    }
    const int32_t* cells = a.cells.seq_cells + a.cells.seq_cell_offsets[seq];

    const bool valid = row_token >= run_begin && row_token < run_end && row_slot < group;
    KeysWithin visible{INT_MAX, -1};
    if (valid) {
      const VisibleRange r = visible_positions(a.cells.token_pos[row_token], a.window);
      visible = KeysWithin{r.begin, r.end - 1};
    }
    const int32_t warp_first = warp_min_i32(visible.first);
    const int32_t warp_last = warp_max_i32(visible.last);
    WarpRowsState<kDim, kF16> st;
    warp_rows_init<kDim, kF16>(
        st, valid ? a.q + row_token * a.q_stride + row_head * a.head_dim : nullptr, a.scale, lane);

    const int32_t num_tiles = (key_end - key_begin + kTileKeys - 1) / kTileKeys;
    const auto stage = [&](int32_t tile) {
      uint16_t* k_dst = stages + (tile & 1) * 2 * Shape::kTileElems;
      stage_kv_tile<kDim, kTileKeys, kThreads>(k_dst, k_dst + Shape::kTileElems, k_cache, v_cache,
                                               cell_bytes, head_offset, cells,
                                               key_begin + tile * kTileKeys, key_end, threadIdx.x);
      cp_async_commit();
    };
    stage(0);
    for (int32_t tile = 0; tile < num_tiles; ++tile) {
      if (tile + 1 < num_tiles) {
        stage(tile + 1);  // its buffer was last read before the previous iteration's barrier
        cp_async_wait<1>();
      } else {
        cp_async_wait<0>();
      }
      __syncthreads();
      const int32_t pos0 = key_begin + tile * kTileKeys;
      if (pos0 <= warp_last && pos0 + kTileKeys - 1 >= warp_first) {  // warp-uniform
        const uint16_t* k_rows = stages + (tile & 1) * 2 * Shape::kTileElems;
        attend_keys<kDim, kF16, kTileKeys / 16>(st, k_rows, k_rows + Shape::kTileElems, kStride,
                                                pos0, visible, lane);
      }
      __syncthreads();  // the buffer is refilled two tiles later (or by the next run)
    }

    const float l_row = row_group_sum(st.l);
    if (valid) {
      float* out = a.out + row_token * a.out_stride + row_head * kDim;
      CELLM_UNROLL
      for (int nt = 0; nt < kDim / 8; ++nt) {
        CELLM_UNROLL
        for (int j = 0; j < 2; ++j) {
          out[8 * nt + 2 * quad + j] = __fdiv_rn(output_value(st, nt, j), l_row);
        }
      }
    }
    run_begin = run_end;
  }
}

template <KvDtype kDtype, int kDim>
Status set_smem_limit() {
  cudaFuncSetAttribute(prefill_attention_tc_kernel<kDtype, kDim>,
                       cudaFuncAttributeMaxDynamicSharedMemorySize,
                       static_cast<int>(PrefillTcShape<kDim>::kSmemBytes));
  return launch_status("prefill_attention_tc: cudaFuncSetAttribute");
}

template <KvDtype kDtype, int kDim>
void launch_typed(const AttentionArgs& a, cudaStream_t stream) {
  const int group = a.num_heads / a.num_kv_heads;
  int slots = 1;
  while (slots < std::min(group, kMaxGroupSlots)) slots *= 2;
  const int tokens_per_block = kRows / slots;
  const dim3 grid(static_cast<unsigned>((a.num_tokens + tokens_per_block - 1) / tokens_per_block),
                  static_cast<unsigned>(a.num_kv_heads * ((group + slots - 1) / slots)));
  prefill_attention_tc_kernel<kDtype, kDim>
      <<<grid, kThreads, PrefillTcShape<kDim>::kSmemBytes, stream>>>(a, slots);
}

template <KvDtype kDtype>
void launch_for_dtype(const AttentionArgs& a, cudaStream_t stream) {
  if (a.head_dim == 64) {
    launch_typed<kDtype, 64>(a, stream);
  } else {
    launch_typed<kDtype, 128>(a, stream);
  }
}

}  // namespace

Status prepare_prefill_attention_tc_kernels() {
  static const Status result = [] {
    CELLM_RETURN_IF_ERROR((set_smem_limit<KvDtype::kF16, 64>()));
    CELLM_RETURN_IF_ERROR((set_smem_limit<KvDtype::kF16, 128>()));
    CELLM_RETURN_IF_ERROR((set_smem_limit<KvDtype::kBF16, 64>()));
    return set_smem_limit<KvDtype::kBF16, 128>();
  }();
  return result;
}

void launch_prefill_attention_tc(const AttentionArgs& a, cudaStream_t stream) {
  if (a.cache_dtype == KvDtype::kF16) {
    launch_for_dtype<KvDtype::kF16>(a, stream);
  } else {
    launch_for_dtype<KvDtype::kBF16>(a, stream);
  }
}

}  // namespace cellm::kernels
