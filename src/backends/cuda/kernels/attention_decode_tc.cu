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
#include "backends/cuda/kernels/pdl.cuh"

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
  pdl_launch_dependents();
  constexpr bool kF16 = kDtype == KvDtype::kF16;
  using Shape = DecodeTcShape<kDim>;
  constexpr int kStride = Shape::kStride;
  extern __shared__ __align__(16) uint8_t smem[];
  auto* stages = reinterpret_cast<uint16_t*>(smem);  // [2][K, V][kTileKeys][kStride]

  const AttentionArgs& a = args.a;
  DecodeBlock b;
  if (!decode_block<kGroupRows>(args, &b)) return;  // before pdl_wait(): as decode_attention_kernel
  pdl_wait();  // q and the cache rows come from the q|k|v product

  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int g = lane >> 2;
  const int quad = lane & 3;
  WarpRowsState<kDim, kF16> st;
  warp_rows_init<kDim, kF16>(
      st, g < b.num_group ? a.q + b.token * a.q_stride + (b.head0 + g) * a.head_dim : nullptr,
      a.scale, lane);

  const KvSource src{static_cast<const uint8_t*>(a.k_cache), static_cast<const uint8_t*>(a.v_cache),
                     static_cast<int64_t>(a.num_kv_heads) * kDim * 2,
                     static_cast<int64_t>(b.kv_head) * kDim * 2, b.cells};
  walk_kv_tiles<kDim, kTileKeys, kThreads>(
      stages, src, b.begin, b.end, [&](const uint16_t* k_tile, int32_t pos0) {
        const int32_t warp_pos = pos0 + 16 * warp;
        if (warp_pos < b.end) {  // warp-uniform
          const uint16_t* k_rows = k_tile + 16 * warp * kStride;
          attend_keys<kDim, kF16, 1>(st, k_rows, k_rows + Shape::kTileElems, kStride, warp_pos,
                                     KeysBefore{b.end}, lane);
        }
      });

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
  merge_decode_warps<kWarps, kGroupRows>(args, b, red_m, red_l, red_o, kDim);
}

}  // namespace

Status prepare_decode_attention_tc_kernels() {
  static const Status result =
      for_each_kernel_shape(k16BitCacheTypes, HeadDims<64, 128>{}, [](auto type_tag, auto dim_tag) {
        constexpr KvDtype kDtype = decltype(type_tag)::value;
        constexpr int kDim = decltype(dim_tag)::value;

        return raise_smem_limit(decode_attention_tc_kernel<kDtype, kDim>,
                                DecodeTcShape<kDim>::kSmemBytes,
                                "decode_attention_tc: cudaFuncSetAttribute");
      });
  return result;
}

cudaError_t launch_decode_attention_tc(const DecodeKernelArgs& args, cudaStream_t stream) {
  return with_kernel_shape(k16BitCacheTypes, HeadDims<64, 128>{}, args.a.cache_dtype,
                           args.a.head_dim, [&](auto type_tag, auto dim_tag) {
                             constexpr KvDtype kDtype = decltype(type_tag)::value;
                             constexpr int kDim = decltype(dim_tag)::value;

                             return launch_pdl_if(
                                 attention_pdl_enabled(), decode_attention_tc_kernel<kDtype, kDim>,
                                 decode_attention_grid(args, kGroupRows), dim3(kThreads),
                                 DecodeTcShape<kDim>::kSmemBytes, stream, args);
                           });
}

}  // namespace cellm::kernels
