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
//
// The cluster variant (launch_decode_attention_tc_cluster) runs the splits of a (head batch,
// token) as one thread-block cluster: each block leaves its split's merged state in its shared
// memory, and after a cluster barrier every block merges a share of the heads' value dims from
// all the cluster's blocks through distributed shared memory and writes the output — the
// combine kernel's arithmetic (splits in order), without its launch or the partials' round trip
// through global memory. Blocks without a split take part with an empty state.
#include <cooperative_groups.h>

#include "backends/cuda/kernels/attention_internal.h"
#include "backends/cuda/kernels/attention_tc.cuh"
#include "backends/cuda/kernels/launch_status.h"
#include "backends/cuda/kernels/pdl.cuh"
#include "backends/cuda/kernels/quantize_activations.cuh"

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
  static constexpr size_t kSplitBytes = size_t{kGroupRows} * (2 + kDim) * 4;  // cluster merge
  static_assert(kMergeBytes + kSplitBytes <= kSmemBytes, "the merges reuse the stage buffers");
};

// Writes the attention output of logical row g, value dim d (and its int8 quantization where
// args.a.out_q8 asks: a warp holds 32 consecutive dims of one head, one quantization block, and
// all its lanes call this together).
__device__ __forceinline__ void write_decode_output(const AttentionArgs& a, const DecodeBlock& b,
                                                    int g, int d, float value) {
  const int dims = a.value_head_dim;
  const int64_t column = static_cast<int64_t>(b.head0 + g) * dims + d;
  a.out[b.token * a.out_stride + column] = value;
  if (a.out_q8 != nullptr) {  // as launch_quantize_activations quantizes the output row
    float amax = fabsf(value);
    CELLM_UNROLL
    for (int offset = 16; offset > 0; offset >>= 1) {
      amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, offset));
    }
    const float scale = q8_block_scale(amax);
    const int64_t width = static_cast<int64_t>(a.num_heads) * dims;
    a.out_q8[b.token * width + interleaved_q8_offset(column)] = q8_quantize(value, scale);
    if ((threadIdx.x & 31) == 0) a.out_q8_scales[b.token * (width / 32) + column / 32] = scale;
  }
}

// The cluster merge: this block's split state (merge_warp_states of its warps) into `split`
// ([kRows] max, [kRows] sum, [kRows, dims] output) in shared memory; a cluster barrier; then
// block rank r takes outputs i = 128r + thread, + 128 · splits, ... of the group's heads × dims
// (a warp: 32 consecutive dims of one head), each merged over the working splits in split order
// (the combine's arithmetic) and written; a last barrier keeps every block's shared memory until
// the others have read it.
template <int kWarps, int kRows>
__device__ __forceinline__ void merge_decode_cluster(const DecodeKernelArgs& args,
                                                     const DecodeBlock& b, const float* red_m,
                                                     const float* red_l, const float* red_o,
                                                     int o_stride, float* split) {
  namespace cg = cooperative_groups;
  const AttentionArgs& a = args.a;
  const int dims = a.value_head_dim;
  float* split_m = split;
  float* split_l = split + kRows;
  float* split_o = split + 2 * kRows;
  for_each_merged_output<kWarps, kRows>(b, dims, red_m, red_l, red_o, o_stride,
                                        [&](int g, int d, float max_all, float sum, float out) {
                                          split_o[g * dims + d] = out;
                                          if (d == 0) {
                                            split_m[g] = max_all;
                                            split_l[g] = sum;
                                          }
                                        });
  cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();
  const int splits = static_cast<int>(cluster.num_blocks());
  const int rank = static_cast<int>(cluster.block_rank());
  const int working = min(splits, b.num_splits);  // ranks past it hold empty states
  for (int i = rank * kWarps * 32 + threadIdx.x; i < b.num_group * dims;
       i += splits * kWarps * 32) {
    const int g = i / dims;
    const int d = i - g * dims;
    float max_all = -INFINITY;
    for (int r = 0; r < working; ++r) {
      max_all = fmaxf(max_all, cluster.map_shared_rank(split_m, r)[g]);
    }
    float sum = 0.0f;
    float out = 0.0f;
    for (int r = 0; r < working; ++r) {
      const float e = exp_diff(cluster.map_shared_rank(split_m, r)[g], max_all);
      sum = fmaf(cluster.map_shared_rank(split_l, r)[g], e, sum);
      out = fmaf(cluster.map_shared_rank(split_o, r)[g * dims + d], e, out);
    }
    write_decode_output(a, b, g, d, __fdiv_rn(out, sum));
  }
  cluster.sync();
}

template <KvDtype kDtype, int kDim, bool kCluster>
__global__ void __launch_bounds__(kThreads)
    decode_attention_tc_kernel(const DecodeKernelArgs args) {
  // The cluster variant lets the next kernel launch only as its blocks leave: an earlier trigger
  // lets the next products crowd the SMs while it runs (docs/perf/decode.md, version 7).
  if constexpr (!kCluster) pdl_launch_dependents();
  constexpr bool kF16 = kDtype == KvDtype::kF16;
  using Shape = DecodeTcShape<kDim>;
  constexpr int kStride = Shape::kStride;
  extern __shared__ __align__(16) uint8_t smem[];
  auto* stages = reinterpret_cast<uint16_t*>(smem);  // [2][K, V][kTileKeys][kStride]

  const AttentionArgs& a = args.a;
  DecodeBlock b;
  if (!decode_block<kGroupRows>(args, &b)) {
    // No split: leave before pdl_wait() (as decode_attention_kernel), or, in a cluster, take part
    // in its merge with an empty state.
    if constexpr (!kCluster) return;
    b.begin = 0;
    b.end = 0;
  }
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
  if constexpr (kCluster) {
    merge_decode_cluster<kWarps, kGroupRows>(
        args, b, red_m, red_l, red_o, kDim,
        reinterpret_cast<float*>(smem + DecodeTcShape<kDim>::kMergeBytes));
  } else {
    merge_decode_warps<kWarps, kGroupRows>(args, b, red_m, red_l, red_o, kDim);
  }
}

}  // namespace

Status prepare_decode_attention_tc_kernels() {
  static const Status result =
      for_each_kernel_shape(k16BitCacheTypes, HeadDims<64, 128>{}, [](auto type_tag, auto dim_tag) {
        constexpr KvDtype kDtype = decltype(type_tag)::value;
        constexpr int kDim = decltype(dim_tag)::value;

        CELLM_RETURN_IF_ERROR(raise_smem_limit(decode_attention_tc_kernel<kDtype, kDim, false>,
                                               DecodeTcShape<kDim>::kSmemBytes,
                                               "decode_attention_tc: cudaFuncSetAttribute"));
        return raise_smem_limit(decode_attention_tc_kernel<kDtype, kDim, true>,
                                DecodeTcShape<kDim>::kSmemBytes,
                                "decode_attention_tc cluster: cudaFuncSetAttribute");
      });
  return result;
}

cudaError_t launch_decode_attention_tc(const DecodeKernelArgs& args, cudaStream_t stream) {
  return with_kernel_shape(k16BitCacheTypes, HeadDims<64, 128>{}, args.a.cache_dtype,
                           args.a.head_dim, [&](auto type_tag, auto dim_tag) {
                             constexpr KvDtype kDtype = decltype(type_tag)::value;
                             constexpr int kDim = decltype(dim_tag)::value;

                             return launch_pdl_if(attention_pdl_enabled(),
                                                  decode_attention_tc_kernel<kDtype, kDim, false>,
                                                  decode_attention_grid(args, kGroupRows),
                                                  dim3(kThreads), DecodeTcShape<kDim>::kSmemBytes,
                                                  stream, args);
                           });
}

int32_t decode_attention_tc_max_cluster() {
  static const int32_t result = [] {
    const auto kernel = decode_attention_tc_kernel<KvDtype::kBF16, 128, true>;
    for (const int32_t size : {8, 4, 2}) {
      cudaLaunchAttribute cluster;
      cluster.id = cudaLaunchAttributeClusterDimension;
      cluster.val.clusterDim.x = 1;
      cluster.val.clusterDim.y = 1;
      cluster.val.clusterDim.z = static_cast<unsigned>(size);
      cudaLaunchConfig_t config = {};
      config.gridDim = dim3(1, 1, static_cast<unsigned>(size));
      config.blockDim = dim3(kThreads);
      config.dynamicSmemBytes = DecodeTcShape<128>::kSmemBytes;
      config.attrs = &cluster;
      config.numAttrs = 1;
      int clusters = 0;
      if (cudaOccupancyMaxActiveClusters(&clusters, kernel, &config) == cudaSuccess &&
          clusters > 0) {
        return size;
      }
      (void)cudaGetLastError();
    }
    return 0;
  }();
  return result;
}

cudaError_t launch_decode_attention_tc_cluster(const DecodeKernelArgs& args, cudaStream_t stream) {
  return with_kernel_shape(k16BitCacheTypes, HeadDims<64, 128>{}, args.a.cache_dtype,
                           args.a.head_dim, [&](auto type_tag, auto dim_tag) {
                             constexpr KvDtype kDtype = decltype(type_tag)::value;
                             constexpr int kDim = decltype(dim_tag)::value;

                             cudaLaunchAttribute cluster;
                             cluster.id = cudaLaunchAttributeClusterDimension;
                             cluster.val.clusterDim.x = 1;
                             cluster.val.clusterDim.y = 1;
                             cluster.val.clusterDim.z = static_cast<unsigned>(args.max_splits);
                             cudaLaunchConfig_t config = {};
                             config.gridDim = decode_attention_grid(args, kGroupRows);
                             config.blockDim = dim3(kThreads);
                             config.dynamicSmemBytes = DecodeTcShape<kDim>::kSmemBytes;
                             config.stream = stream;
                             config.attrs = &cluster;
                             config.numAttrs = 1;
                             return cudaLaunchKernelEx(
                                 &config, decode_attention_tc_kernel<kDtype, kDim, true>, args);
                           });
}

}  // namespace cellm::kernels
