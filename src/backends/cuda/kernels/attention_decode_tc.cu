// attention_decode_tc: the flash-decoding attention kernel on tensor cores, for f16 / bf16 caches
// with key and value heads of 64 or 128 dims (attention_internal.h).
//
// Block (kv head × batch of up to 8 of its query heads, token, split), 4 warps. The block's query
// heads are the 8 logical rows of every warp (attention_tc.cuh: high and low parts in one m16
// tile, so each K/V row is read once for the whole GQA group). The split's cells are walked in
// 64-key tiles, copied (cp.async) through the cell list into a two-stage shared-memory ring:
// tile i + 1 is in flight while tile i is scored. Warp w takes keys 16w .. 16w + 15 of each
// tile, keeping its own running max / sum / output; the warps are merged at the end, and a
// single split writes the output, several write the partials that the combine kernel merges.
// Shared memory: 2 stages × (K, V) × 64 rows × (dims + 8) × 2 bytes — 69.6 KB at 128 dims, so
// three blocks (12 warps, six tiles in flight) share an SM.
#include "backends/cuda/kernels/attention_internal.h"
#include "backends/cuda/kernels/attention_tc.cuh"
#include "backends/cuda/kernels/launch_status.h"

namespace cellm::kernels {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kGroupRows = 8;  // query heads per block: the logical rows of a warp
constexpr int kTileKeys = 16 * kWarps;

template <int kDim>
struct DecodeTcShape {
  static constexpr int kStride = kDim + 8;
  static constexpr int kTileElems = kTileKeys * kStride;  // one K or V tile
  static constexpr size_t kSmemBytes = size_t{2} * 2 * kTileElems * 2;
  static constexpr size_t kMergeBytes = size_t{kWarps} * kGroupRows * (2 + kDim) * 4;
  static_assert(kMergeBytes <= kSmemBytes, "the merge reuses the stage buffers");
};

template <KvDtype kDtype, int kDim>
__global__ void __launch_bounds__(kThreads)
    decode_attention_tc_kernel(const DecodeKernelArgs args) {
  constexpr bool kF16 = kDtype == KvDtype::kF16;
  using Shape = DecodeTcShape<kDim>;
  constexpr int kStride = Shape::kStride;
  extern __shared__ __align__(16) uint8_t smem[];
  auto* stages = reinterpret_cast<uint16_t*>(smem);  // [2][K, V][kTileKeys][kStride]

  const AttentionArgs& a = args.a;
  const int group = a.num_heads / a.num_kv_heads;
  const int batches = (group + kGroupRows - 1) / kGroupRows;
  const int kv_head = static_cast<int>(blockIdx.x) / batches;
  const int g0 = static_cast<int>(blockIdx.x) % batches * kGroupRows;
  const int num_group = min(kGroupRows, group - g0);
  const int head0 = kv_head * group + g0;
  const int token = blockIdx.y;
  const int split = blockIdx.z;

  const int32_t seq = a.cells.token_step_seq[token];
  const VisibleRange range = visible_positions(a.cells.token_pos[token], a.window);
  int32_t cells_per_split = 0;
  int32_t num_splits = 0;
  split_shape(range.end - range.begin, args.max_splits, args.min_cells, &cells_per_split,
              &num_splits);
  if (split >= num_splits) return;
  const int32_t split_begin = range.begin + split * cells_per_split;
  const int32_t split_end = min(range.end, split_begin + cells_per_split);
  const int32_t* cells = a.cells.seq_cells + a.cells.seq_cell_offsets[seq];

  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int g = lane >> 2;
  const int quad = lane & 3;
  WarpRowsState<kDim, kF16> st;
  warp_rows_init<kDim, kF16>(
      st, g < num_group ? a.q + token * a.q_stride + (head0 + g) * a.head_dim : nullptr, a.scale,
      lane);

  const auto* k_cache = static_cast<const uint8_t*>(a.k_cache);
  const auto* v_cache = static_cast<const uint8_t*>(a.v_cache);
  const int64_t cell_bytes = static_cast<int64_t>(a.num_kv_heads) * kDim * 2;
  const int64_t head_offset = static_cast<int64_t>(kv_head) * kDim * 2;
  const int32_t num_tiles = (split_end - split_begin + kTileKeys - 1) / kTileKeys;
  const auto stage = [&](int32_t tile) {
    uint16_t* k_dst = stages + (tile & 1) * 2 * Shape::kTileElems;
    stage_kv_tile<kDim, kTileKeys, kThreads>(
        k_dst, k_dst + Shape::kTileElems, k_cache, v_cache, cell_bytes, head_offset, cells,
        split_begin + tile * kTileKeys, split_end, threadIdx.x);
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
    const int32_t warp_pos = split_begin + tile * kTileKeys + 16 * warp;
    if (warp_pos < split_end) {  // warp-uniform
      const uint16_t* k_rows = stages + (tile & 1) * 2 * Shape::kTileElems + 16 * warp * kStride;
      attend_keys<kDim, kF16, 1>(st, k_rows, k_rows + Shape::kTileElems, kStride, warp_pos,
                                 KeysBefore{split_end}, lane);
    }
    __syncthreads();  // the buffer is refilled two tiles later
  }

  // Merge the warps: max, rescaled sums and outputs (the stage buffers are free now).
  const float l_row = row_group_sum(st.l);
  auto* red_m = reinterpret_cast<float*>(smem);  // [kWarps, kGroupRows]
  float* red_l = red_m + kWarps * kGroupRows;    // [kWarps, kGroupRows]
  float* red_o = red_l + kWarps * kGroupRows;    // [kWarps, kGroupRows, kDim]
  if (quad == 0) {
    red_m[warp * kGroupRows + g] = st.m;
    red_l[warp * kGroupRows + g] = l_row;
  }
  CELLM_UNROLL
  for (int nt = 0; nt < kDim / 8; ++nt) {
    CELLM_UNROLL
    for (int j = 0; j < 2; ++j) {
      red_o[(warp * kGroupRows + g) * kDim + 8 * nt + 2 * quad + j] = output_value(st, nt, j);
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < num_group * kDim; i += kThreads) {
    const int gi = i / kDim;
    const int d = i - gi * kDim;
    float max_all = -INFINITY;
    CELLM_UNROLL
    for (int w = 0; w < kWarps; ++w) max_all = fmaxf(max_all, red_m[w * kGroupRows + gi]);
    float sum = 0.0f;
    float out = 0.0f;
    CELLM_UNROLL
    for (int w = 0; w < kWarps; ++w) {
      const float e = exp_diff(red_m[w * kGroupRows + gi], max_all);
      sum = fmaf(red_l[w * kGroupRows + gi], e, sum);
      out = fmaf(red_o[(w * kGroupRows + gi) * kDim + d], e, out);
    }
    const int h = head0 + gi;
    if (num_splits == 1) {
      a.out[token * a.out_stride + h * kDim + d] = __fdiv_rn(out, sum);
    } else {
      const int64_t slot =
          (static_cast<int64_t>(token) * a.num_heads + h) * args.max_splits + split;
      args.partial_out[slot * kDim + d] = out;
      if (d == 0) {
        args.partial_ml[2 * slot] = max_all;
        args.partial_ml[2 * slot + 1] = sum;
      }
    }
  }
}

template <KvDtype kDtype, int kDim>
Status set_smem_limit() {
  cudaFuncSetAttribute(decode_attention_tc_kernel<kDtype, kDim>,
                       cudaFuncAttributeMaxDynamicSharedMemorySize,
                       static_cast<int>(DecodeTcShape<kDim>::kSmemBytes));
  return launch_status("decode_attention_tc: cudaFuncSetAttribute");
}

template <KvDtype kDtype, int kDim>
void launch_typed(const DecodeKernelArgs& args, cudaStream_t stream) {
  const AttentionArgs& a = args.a;
  const int group = a.num_heads / a.num_kv_heads;
  const dim3 grid(static_cast<unsigned>(a.num_kv_heads * ((group + kGroupRows - 1) / kGroupRows)),
                  static_cast<unsigned>(a.num_tokens), static_cast<unsigned>(args.max_splits));
  decode_attention_tc_kernel<kDtype, kDim>
      <<<grid, kThreads, DecodeTcShape<kDim>::kSmemBytes, stream>>>(args);
}

template <KvDtype kDtype>
void launch_for_dtype(const DecodeKernelArgs& args, cudaStream_t stream) {
  if (args.a.head_dim == 64) {
    launch_typed<kDtype, 64>(args, stream);
  } else {
    launch_typed<kDtype, 128>(args, stream);
  }
}

}  // namespace

Status prepare_decode_attention_tc_kernels() {
  static const Status result = [] {
    CELLM_RETURN_IF_ERROR((set_smem_limit<KvDtype::kF16, 64>()));
    CELLM_RETURN_IF_ERROR((set_smem_limit<KvDtype::kF16, 128>()));
    CELLM_RETURN_IF_ERROR((set_smem_limit<KvDtype::kBF16, 64>()));
    return set_smem_limit<KvDtype::kBF16, 128>();
  }();
  return result;
}

void launch_decode_attention_tc(const DecodeKernelArgs& args, cudaStream_t stream) {
  if (args.a.cache_dtype == KvDtype::kF16) {
    launch_for_dtype<KvDtype::kF16>(args, stream);
  } else {
    launch_for_dtype<KvDtype::kBF16>(args, stream);
  }
}

}  // namespace cellm::kernels
