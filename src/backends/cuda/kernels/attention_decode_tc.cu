// attention_decode_tc: the flash-decoding attention kernel on tensor cores, for f16 / bf16 caches
// with key and value heads of 64, 96 or 128 dims (attention_internal.h).
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
// token) as one thread-block cluster and merges them without partials in global memory or a
// combine launch. The group's outputs are cut into units of 32 value dims (one quantization
// block), each owned by one block of the cluster; every warp *pushes* its state (max, sum and its
// outputs) straight into the owners' receive buffers in distributed shared memory, a cluster
// barrier publishes them, and each owner merges its units from its own shared memory — the
// warps' merge, then the splits' merge, in the order and with the arithmetic of
// merge_warp_states and the combine kernel — and writes the output. Nothing reads another
// block's shared memory after that barrier, so blocks leave as soon as their units are written
// (docs/perf/decode.md, version 9: the pull merge waited on remote loads and on a last barrier).
// The receive buffers overlay the stage ring: a block arrives at a first cluster barrier when it
// is done with its ring, and pushes only after every block of the cluster has arrived (a separate
// receive area let only two blocks share an SM: 2–4% slower at 4–8 sessions).
#include <cooperative_groups.h>

#include "backends/cuda/kernels/attention_internal.h"
#include "backends/cuda/kernels/attention_tc.cuh"
#include "backends/cuda/kernels/cluster_common.cuh"
#include "backends/cuda/kernels/launch_status.h"
#include "backends/cuda/kernels/pdl.cuh"
#include "backends/cuda/kernels/quantize_activations.cuh"

namespace cellm::kernels {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kGroupRows = 8;  // query heads per block: the logical rows of a warp
constexpr int kTileKeys = 16 * kWarps;
constexpr int kMaxClusterSplits = 8;  // the largest cluster launched
static_assert(kWarps * kMaxClusterSplits == 32, "the owners' scalars: one lane per (split, warp)");

template <int kDim>
struct DecodeTcShape {
  static constexpr int kStride = kDim + 8;
  static constexpr int kTileElems = kTileKeys * kStride;  // one K or V tile
  static constexpr size_t kSmemBytes = size_t{2} * 2 * kTileElems * 2;
  static constexpr size_t kMergeBytes = size_t{kWarps} * kGroupRows * (2 + kDim) * 4;
  static_assert(kMergeBytes <= kSmemBytes, "the warps' merge reuses the stage buffers");
  // The cluster variant's receive buffers, over the stage ring: per (split, warp) the max and sum
  // of each logical row ([kMaxClusterSplits][kWarps][kGroupRows][2]), and the outputs of the
  // units this block owns ([splits][kWarps][units per rank][32]; splits × units per rank <
  // kUnits + splits).
  static constexpr int kUnits = kGroupRows * kDim / 32;
  static constexpr size_t kRecvMlFloats = size_t{kMaxClusterSplits} * kWarps * kGroupRows * 2;
  static constexpr size_t kRecvOFloats = size_t{kUnits + kMaxClusterSplits - 1} * kWarps * 32;
  static_assert((kRecvMlFloats + kRecvOFloats) * 4 <= kSmemBytes, "they overlay the ring");
};

// Writes the attention output of logical row g, value dim d (and its int8 quantization where
// args.a.out_q8 asks: a warp holds 32 consecutive dims of one head, one quantization block, and
// all its lanes call this together).
__device__ __forceinline__ void write_decode_output(const AttentionArgs& a, const DecodeBlock& b,
                                                    int g, int d, float value) {
  const int dims = a.value_head_dim;
  const int64_t column = static_cast<int64_t>(b.head0 + g) * dims + d;
  store_decode_output(a, b.token, column, value);
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

// The cluster merge (see the file comment). The group's num_units = num_group · dims / 32 units
// (unit u: logical row u / (dims / 32), dims 32 · (u mod dims / 32) ..) are owned in runs of
// units_per_rank by the blocks of the cluster in rank order. Every block has arrived at the
// cluster barrier once done with its stage ring (cluster_arrive_relaxed), so after the first wait
// every receive buffer may be written.
template <int kDim, bool kF16>
__device__ __forceinline__ void merge_decode_cluster(const DecodeKernelArgs& args,
                                                     const DecodeBlock& b,
                                                     const WarpRowsState<kDim, kF16>& st,
                                                     float* recv_ml, float* recv_o) {
  namespace cg = cooperative_groups;
  const AttentionArgs& a = args.a;
  cg::cluster_group cluster = cg::this_cluster();
  const int splits = static_cast<int>(cluster.num_blocks());
  const int rank = static_cast<int>(cluster.block_rank());
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  constexpr int kUnitsPerRow = kDim / 32;
  const int num_units = b.num_group * kUnitsPerRow;
  const int units_per_rank = (num_units + splits - 1) / splits;

  // Push: logical row g = lane / 4's max and sum to the owners of its units, and its outputs
  // (dims 8nt + 2·(lane % 4), + 1: unit nt / 4) to each unit's owner.
  const int g = lane >> 2;
  const int quad = lane & 3;
  const float l_row = row_group_sum(st.l);
  cluster_wait_acquire();
  if (b.split < b.num_splits && g < b.num_group) {  // else nothing to merge: no pushes
    const int slot = rank * kWarps + warp;
    if (quad == 0) {
      const int first = g * kUnitsPerRow / units_per_rank;
      const int last = ((g + 1) * kUnitsPerRow - 1) / units_per_rank;
      for (int r = first; r <= last; ++r) {
        store_cluster_float2(cluster_address(recv_ml + (slot * kGroupRows + g) * 2, r), st.m,
                             l_row);
      }
    }
    CELLM_UNROLL
    for (int u = 0; u < kUnitsPerRow; ++u) {  // unit g · kUnitsPerRow + u: dims 32u .. 32u + 31
      const int unit = g * kUnitsPerRow + u;
      const int owner = unit / units_per_rank;
      const int local = unit - owner * units_per_rank;
      const uint32_t dst =
          cluster_address(recv_o + (slot * units_per_rank + local) * 32 + 2 * quad, owner);
      CELLM_UNROLL
      for (int k = 0; k < 4; ++k) {  // n-tile 4u + k: dims 32u + 8k + 2·quad, + 1
        store_cluster_float2(dst + 32 * k, output_value(st, 4 * u + k, 0),
                             output_value(st, 4 * u + k, 1));
      }
    }
  }
  cluster_arrive_release();
  cluster_wait_acquire();

  // Merge the owned units, a warp per unit: lane 4s + w first takes the scalars of (split s,
  // warp w) of the unit's row, then lane k merges dim k.
  const int working = min(splits, b.num_splits);  // ranks past it pushed nothing
  const int s_lane = lane / kWarps;
  const int w_lane = lane % kWarps;
  for (int local = warp; local < units_per_rank; local += kWarps) {
    const int unit = rank * units_per_rank + local;
    if (unit >= num_units) break;  // warp-uniform
    const int row = unit / kUnitsPerRow;
    const int d = (unit - row * kUnitsPerRow) * 32 + lane;
    float m_sw = -INFINITY;  // merge_warp_states of split s_lane, warp w_lane
    float l_sw = 0.0f;
    if (s_lane < working) {
      const float2 ml = *reinterpret_cast<const float2*>(
          recv_ml + ((s_lane * kWarps + w_lane) * kGroupRows + row) * 2);
      m_sw = ml.x;
      l_sw = ml.y;
    }
    float m_s = fmaxf(m_sw, __shfl_xor_sync(0xffffffffu, m_sw, 1));  // max: any order is exact
    m_s = fmaxf(m_s, __shfl_xor_sync(0xffffffffu, m_s, 2));
    const float e_sw = exp_diff(m_sw, m_s);
    float l_s = 0.0f;
    CELLM_UNROLL
    for (int w = 0; w < kWarps; ++w) {
      const int from = (lane & ~(kWarps - 1)) + w;
      l_s = fmaf(__shfl_sync(0xffffffffu, l_sw, from), __shfl_sync(0xffffffffu, e_sw, from), l_s);
    }
    float max_all = m_s;  // the combine's: over the working splits (the others hold −inf)
    CELLM_UNROLL
    for (int offset = kWarps; offset < 32; offset <<= 1) {
      max_all = fmaxf(max_all, __shfl_xor_sync(0xffffffffu, max_all, offset));
    }
    const float e_s = exp_diff(m_s, max_all);
    float sum = 0.0f;
    float out = 0.0f;
    CELLM_UNROLL
    for (int r = 0; r < kMaxClusterSplits; ++r) {
      if (r >= working) break;  // warp-uniform
      float o_r = 0.0f;
      CELLM_UNROLL
      for (int w = 0; w < kWarps; ++w) {
        o_r = fmaf(recv_o[((r * kWarps + w) * units_per_rank + local) * 32 + lane],
                   __shfl_sync(0xffffffffu, e_sw, r * kWarps + w), o_r);
      }
      const float e_r = __shfl_sync(0xffffffffu, e_s, r * kWarps);
      sum = fmaf(__shfl_sync(0xffffffffu, l_s, r * kWarps), e_r, sum);
      out = fmaf(o_r, e_r, out);
    }
    write_decode_output(a, b, row, d, __fdiv_rn(out, sum));
  }
}

template <KvDtype kDtype, int kDim, bool kCluster>
__global__ void __launch_bounds__(kThreads)
    decode_attention_tc_kernel(const DecodeKernelArgs args) {
  // No pdl_launch_dependents(): the next kernel launches only as the blocks leave — an earlier
  // trigger lets the next products crowd the SMs and the bus while the attention runs
  // (docs/perf/decode.md, version 7, for the cluster variant; docs/perf/prefill_and_batch.md,
  // version 3, for the other: −7% at 256 sessions once a product followed it directly).
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
  pdl_wait();  // q and the cache rows come from the q|k|v product or rope_kv

  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int g = lane >> 2;
  const int quad = lane & 3;
  WarpRowsState<kDim, kF16> st;

  const KvSource src{static_cast<const uint8_t*>(a.k_cache), static_cast<const uint8_t*>(a.v_cache),
                     static_cast<int64_t>(a.num_kv_heads) * kDim * 2,
                     static_cast<int64_t>(b.kv_head) * kDim * 2, b.cells};
  walk_kv_tiles<kDim, kTileKeys, kThreads>(
      stages, src, b.begin, b.end,
      [&](const uint16_t* k_tile, int32_t pos0) {
        const int32_t warp_pos = pos0 + 16 * warp;
        if (warp_pos < b.end) {  // warp-uniform
          const uint16_t* k_rows = k_tile + 16 * warp * kStride;
          attend_keys<kDim, kF16, 1>(st, k_rows, k_rows + Shape::kTileElems, kStride, warp_pos,
                                     KeysBefore{b.end}, a.softcap, args.softcap_inverse, lane);
        }
      },
      [&] {  // the query's loads fly with the first tile's
        warp_rows_init<kDim, kF16>(
            st, g < b.num_group ? a.q + b.token * a.q_stride + (b.head0 + g) * a.head_dim : nullptr,
            a.scale, lane);
      },
      /*barrier_after_last=*/!kCluster);  // clusters: their first cluster barrier frees the ring

  if constexpr (kCluster) {
    cluster_arrive_relaxed();                        // this block is done with its ring
    auto* recv_ml = reinterpret_cast<float*>(smem);  // the receive buffers overlay it
    merge_decode_cluster<kDim, kF16>(args, b, st, recv_ml, recv_ml + Shape::kRecvMlFloats);
    return;
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
  merge_decode_warps<kWarps, kGroupRows>(args, b, red_m, red_l, red_o, kDim);
}

}  // namespace

Status prepare_decode_attention_tc_kernels() {
  static const Status result = for_each_kernel_shape(
      k16BitCacheTypes, HeadDims<64, 96, 128, 256>{}, [](auto type_tag, auto dim_tag) {
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
  return with_kernel_shape(k16BitCacheTypes, HeadDims<64, 96, 128, 256>{}, args.a.cache_dtype,
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

int32_t decode_attention_tc_cluster_blocks_per_sm() {
  static const int32_t result = [] {
    int blocks = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(
            &blocks, decode_attention_tc_kernel<KvDtype::kBF16, 128, true>, kThreads,
            DecodeTcShape<128>::kSmemBytes) != cudaSuccess) {
      (void)cudaGetLastError();
      return 0;
    }
    return blocks;
  }();
  return result;
}

cudaError_t launch_decode_attention_tc_cluster(const DecodeKernelArgs& args, bool early,
                                               cudaStream_t stream) {
  return with_kernel_shape(
      k16BitCacheTypes, HeadDims<64, 96, 128, 256>{}, args.a.cache_dtype, args.a.head_dim,
      [&](auto type_tag, auto dim_tag) {
        constexpr KvDtype kDtype = decltype(type_tag)::value;
        constexpr int kDim = decltype(dim_tag)::value;

        cudaLaunchAttribute attrs[2];
        attrs[0].id = cudaLaunchAttributeClusterDimension;
        attrs[0].val.clusterDim.x = 1;
        attrs[0].val.clusterDim.y = 1;
        attrs[0].val.clusterDim.z = static_cast<unsigned>(args.max_splits);
        attrs[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attrs[1].val.programmaticStreamSerializationAllowed = 1;
        cudaLaunchConfig_t config = {};
        config.gridDim = decode_attention_grid(args, kGroupRows);
        config.blockDim = dim3(kThreads);
        config.dynamicSmemBytes = DecodeTcShape<kDim>::kSmemBytes;
        config.stream = stream;
        config.attrs = attrs;
        config.numAttrs = early && pdl_enabled() ? 2 : 1;  // CELLM_CUDA_PDL=0: never
        return cudaLaunchKernelEx(&config, decode_attention_tc_kernel<kDtype, kDim, true>, args);
      });
}

}  // namespace cellm::kernels
