// attention_prefill_tc: tiled causal attention on tensor cores for runs of consecutive tokens of
// one sequence, for f16 / bf16 caches with key and value heads of 64, 96 or 128 dims
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
    prefill_attention_tc_kernel(const AttentionArgs a, int group_slots, float softcap_inverse) {
  constexpr bool kF16 = kDtype == KvDtype::kF16;
  using Shape = PrefillTcShape<kDim>;
  constexpr int kStride = Shape::kStride;
  extern __shared__ __align__(16) uint8_t smem[];
  auto* stages = reinterpret_cast<uint16_t*>(smem);  // [2][K, V][kTileKeys][kStride]

  const PrefillBlock block = prefill_block(a, kRows, group_slots);

  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int quad = lane & 3;
  const int row = 8 * warp + (lane >> 2);  // this lane's logical row
  const int row_token = block.t0 + row / group_slots;
  const int row_slot = block.slot0 + row % group_slots;
  const int row_head = block.kv_head * block.group + row_slot;

  const int64_t cell_bytes = static_cast<int64_t>(a.num_kv_heads) * kDim * 2;
  const int64_t head_offset = static_cast<int64_t>(block.kv_head) * kDim * 2;

  for (int run_begin = block.t0; run_begin < block.t_end;) {
    const TokenRun run = token_run(a, run_begin, block.t_end);
    const bool valid = row_token >= run_begin && row_token < run.end && row_slot < block.group;
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

    const KvSource src{static_cast<const uint8_t*>(a.k_cache),
                       static_cast<const uint8_t*>(a.v_cache), cell_bytes, head_offset, run.cells};
    walk_kv_tiles<kDim, kTileKeys, kThreads>(
        stages, src, run.key_begin, run.key_end, [&](const uint16_t* k_rows, int32_t pos0) {
          if (pos0 <= warp_last && pos0 + kTileKeys - 1 >= warp_first) {  // warp-uniform
            attend_keys<kDim, kF16, kTileKeys / 16>(st, k_rows, k_rows + Shape::kTileElems, kStride,
                                                    pos0, visible, a.softcap, softcap_inverse,
                                                    lane);
          }
        });

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
    run_begin = run.end;
  }
}

}  // namespace

Status prepare_prefill_attention_tc_kernels() {
  static const Status result = for_each_kernel_shape(
      k16BitCacheTypes, HeadDims<64, 96, 128, 256>{}, [](auto type_tag, auto dim_tag) {
        constexpr KvDtype kDtype = decltype(type_tag)::value;
        constexpr int kDim = decltype(dim_tag)::value;

        return raise_smem_limit(prefill_attention_tc_kernel<kDtype, kDim>,
                                PrefillTcShape<kDim>::kSmemBytes,
                                "prefill_attention_tc: cudaFuncSetAttribute");
      });
  return result;
}

void launch_prefill_attention_tc(const AttentionArgs& a, cudaStream_t stream) {
  const PrefillGrid g = prefill_attention_grid(a, kRows, kMaxGroupSlots);
  with_kernel_shape(k16BitCacheTypes, HeadDims<64, 96, 128, 256>{}, a.cache_dtype, a.head_dim,
                    [&](auto type_tag, auto dim_tag) {
                      constexpr KvDtype kDtype = decltype(type_tag)::value;
                      constexpr int kDim = decltype(dim_tag)::value;

                      prefill_attention_tc_kernel<kDtype, kDim>
                          <<<g.grid, kThreads, PrefillTcShape<kDim>::kSmemBytes, stream>>>(
                              a, g.slots, soft_cap_inverse(a.softcap));
                    });
}

}  // namespace cellm::kernels
