// attention_decode: the flash-decoding attention kernel on CUDA cores in f32, its split combine,
// and the launch that picks the tensor-core kernel (attention_decode_tc.cu) for 16-bit caches
// with 64- or 128-dim heads (attention.cuh).
//
// Block (kv head × batch of up to 8 of its query heads, token, split), 4 warps. The block's query
// heads sit in shared memory; each warp takes 32-cell tiles of the split in turn, copies their K
// and V rows into shared memory with cp.async (each row read once for all the block's heads),
// scores them one cell per lane (soft-capped where AttentionArgs::softcap asks), updates its
// running max / sum / output (online softmax), and accumulates P·V with a lane per group of output
// dims. The warps' states are merged at the end; a single split writes the output, several write
// partials that the combine kernel merges.
#include <algorithm>
#include <cstdlib>
#include <string>
#include <string_view>

#include "backends/cuda/kernels/attention_common.cuh"
#include "backends/cuda/kernels/attention_internal.h"
#include "backends/cuda/kernels/launch_status.h"
#include "backends/cuda/kernels/pdl.cuh"

namespace cellm::kernels {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kMaxGroup = 8;  // query heads per block
constexpr HeadDims<64, 128, 256> kDecodeHeadDims;

template <KvDtype kDtype, int kMaxHeadDim>
struct DecodeShape {
  static constexpr int kBytes = KvTraits<kDtype>::kBytes;
  static constexpr int kTile = kMaxHeadDim * kBytes <= 256 ? 32 : 16;  // cells per warp tile
  static constexpr int kRowBytes = kMaxHeadDim * kBytes + 16;  // staged row, padded: no conflicts
  static constexpr int kDimsPerLane = kMaxHeadDim / 32;
  static constexpr size_t kQBytes = size_t{kMaxGroup} * kMaxHeadDim * 4;
  static constexpr size_t kWarpStageBytes = 2 * size_t{kTile} * kRowBytes + kMaxGroup * 32 * 4;
  static constexpr size_t kCombineBytes =
      size_t{kWarps} * (2 * kMaxGroup + kMaxGroup * kMaxHeadDim) * 4;
  static constexpr size_t kStageBytes = std::max(kWarps * kWarpStageBytes, kCombineBytes);
  static constexpr size_t kSmemBytes = kQBytes + kStageBytes;
};

// Loads 8 consecutive K values (d .. d + 7) of a staged row as f32.
template <KvDtype kDtype>
__device__ __forceinline__ void load8(const uint8_t* row, int d, float (&out)[8]) {
  if constexpr (kDtype == KvDtype::kF32) {
    const float4 a = *reinterpret_cast<const float4*>(row + 4 * d);
    const float4 b = *reinterpret_cast<const float4*>(row + 4 * d + 16);
    out[0] = a.x, out[1] = a.y, out[2] = a.z, out[3] = a.w;
    out[4] = b.x, out[5] = b.y, out[6] = b.z, out[7] = b.w;
  } else {
    const uint4 raw = *reinterpret_cast<const uint4*>(row + 2 * d);
    CELLM_UNROLL
    for (int i = 0; i < 8; ++i) {
      const auto bits = static_cast<uint16_t>(word_of(raw, i >> 1) >> (16 * (i & 1)));
      out[i] = kDtype == KvDtype::kF16 ? f16_bits_to_float(bits) : bf16_bits_to_float(bits);
    }
  }
}

// Issues cp.async copies of `count` rows (cells of `cell_of_lane`) of `row_bytes` bytes each
// from `cache` (row stride cache_row_bytes, offset head_offset) into `stage` (stride kRowBytes).
template <int kRowBytes>
__device__ __forceinline__ void stage_rows(uint8_t* stage, const uint8_t* cache,
                                           int32_t cell_of_lane, int count, int row_bytes,
                                           int64_t cache_row_bytes, int64_t head_offset, int lane) {
  const int pieces = row_bytes / 16;
  const int total = count * pieces;
  for (int base = 0; base < total; base += 32) {  // warp-uniform trip count
    const int pc = base + lane;
    const bool valid = pc < total;
    const int row = valid ? pc / pieces : 0;
    const int32_t cell = __shfl_sync(0xffffffffu, cell_of_lane, row);
    if (valid) {
      const int piece = pc - row * pieces;
      copy_async_16(stage + row * kRowBytes + 16 * piece,
                    cache + cell * cache_row_bytes + head_offset + 16 * piece);
    }
  }
}

// Like every decode attention kernel, it never calls pdl_launch_dependents(): the next kernel
// launches as its blocks leave (docs/perf/prefill_and_batch.md, version 3 — an earlier trigger
// lets the next product's blocks crowd the SMs and the bus while the attention still runs).
template <KvDtype kDtype, int kMaxHeadDim>
__global__ void __launch_bounds__(kThreads) decode_attention_kernel(const DecodeKernelArgs args) {
  using Shape = DecodeShape<kDtype, kMaxHeadDim>;
  using Kv = KvTraits<kDtype>;
  constexpr int kTile = Shape::kTile;
  constexpr int kDims = Shape::kDimsPerLane;
  extern __shared__ __align__(16) uint8_t smem[];
  const AttentionArgs& a = args.a;
  DecodeBlock b;
  // A block with no split to do leaves before pdl_wait(): the step's cell arrays it reads are
  // uploaded by copies, and the blocks with work wait, so the grid still ends after the kernel
  // before it.
  if (!decode_block<kMaxGroup>(args, &b)) return;
  pdl_wait();  // q and the cache rows come from the q|k|v product
  const int num_group = b.num_group;
  const int head0 = b.head0;
  const int kv_head = b.kv_head;
  const int t = b.token;
  const int32_t split_begin = b.begin;
  const int32_t split_end = b.end;
  const int32_t* cells = b.cells;

  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  auto* q_smem = reinterpret_cast<float*>(smem);  // [kMaxGroup, kMaxHeadDim]
  uint8_t* stage = smem + Shape::kQBytes;
  for (int i = threadIdx.x; i < num_group * a.head_dim; i += kThreads) {
    const int g = i / a.head_dim;
    const int d = i - g * a.head_dim;
    q_smem[g * kMaxHeadDim + d] = a.q[t * a.q_stride + (head0 + g) * a.head_dim + d];
  }
  __syncthreads();

  uint8_t* k_stage = stage + warp * Shape::kWarpStageBytes;
  uint8_t* v_stage = k_stage + kTile * Shape::kRowBytes;
  auto* p_stage = reinterpret_cast<float*>(v_stage + kTile * Shape::kRowBytes);  // [kMaxGroup, 32]
  const int k_row_bytes = a.head_dim * Shape::kBytes;
  const int v_row_bytes = a.value_head_dim * Shape::kBytes;
  const auto* k_cache = static_cast<const uint8_t*>(a.k_cache);
  const auto* v_cache = static_cast<const uint8_t*>(a.v_cache);
  const int64_t k_cell_bytes = static_cast<int64_t>(a.num_kv_heads) * k_row_bytes;
  const int64_t v_cell_bytes = static_cast<int64_t>(a.num_kv_heads) * v_row_bytes;
  const int d0 = lane * kDims;  // this lane's output dims: d0 .. d0 + kDims - 1

  float m[kMaxGroup];
  float l[kMaxGroup];
  float acc[kMaxGroup][kDims];
  CELLM_UNROLL
  for (int g = 0; g < kMaxGroup; ++g) {
    m[g] = -INFINITY;
    l[g] = 0.0f;
    CELLM_UNROLL
    for (int i = 0; i < kDims; ++i) acc[g][i] = 0.0f;
  }

  for (int32_t tile = split_begin + warp * kTile; tile < split_end; tile += kWarps * kTile) {
    const int count = min(kTile, split_end - tile);
    const int32_t my_cell = lane < count ? cells[tile + lane] : 0;
    stage_rows<Shape::kRowBytes>(k_stage, k_cache, my_cell, count, k_row_bytes, k_cell_bytes,
                                 static_cast<int64_t>(kv_head) * k_row_bytes, lane);
    stage_rows<Shape::kRowBytes>(v_stage, v_cache, my_cell, count, v_row_bytes, v_cell_bytes,
                                 static_cast<int64_t>(kv_head) * v_row_bytes, lane);
    copy_async_wait_all();
    __syncwarp();

    // Scores: lane j scores cell j of the tile for every query head of the block.
    const bool valid = lane < count;
    float s[kMaxGroup];
    CELLM_UNROLL
    for (int g = 0; g < kMaxGroup; ++g) s[g] = 0.0f;
    if (valid) {
      const uint8_t* k_row = k_stage + lane * Shape::kRowBytes;
      for (int d = 0; d < a.head_dim; d += 8) {
        float k8[8];
        load8<kDtype>(k_row, d, k8);
        CELLM_UNROLL
        for (int g = 0; g < kMaxGroup; ++g) {
          if (g < num_group) {
            const float4 qa = *reinterpret_cast<const float4*>(q_smem + g * kMaxHeadDim + d);
            const float4 qb = *reinterpret_cast<const float4*>(q_smem + g * kMaxHeadDim + d + 4);
            float dot = s[g];
            dot = fmaf(qa.x, k8[0], dot);
            dot = fmaf(qa.y, k8[1], dot);
            dot = fmaf(qa.z, k8[2], dot);
            dot = fmaf(qa.w, k8[3], dot);
            dot = fmaf(qb.x, k8[4], dot);
            dot = fmaf(qb.y, k8[5], dot);
            dot = fmaf(qb.z, k8[6], dot);
            dot = fmaf(qb.w, k8[7], dot);
            s[g] = dot;
          }
        }
      }
    }

    // Scaled, then soft-capped where asked (gemma2): before the mask, as the CPU caps them.
    CELLM_UNROLL
    for (int g = 0; g < kMaxGroup; ++g) s[g] *= a.scale;
    if (a.softcap > 0.0f) {  // kernel-uniform: uncapped, one branch per tile
      CELLM_UNROLL
      for (int g = 0; g < kMaxGroup; ++g) {
        if (g < num_group) s[g] = soft_capped(s[g], a.softcap, args.softcap_inverse);
      }
    }

    // Online softmax: new running max, rescale what was accumulated, probabilities to smem.
    CELLM_UNROLL
    for (int g = 0; g < kMaxGroup; ++g) {
      if (g < num_group) {
        const float score = valid ? s[g] : -INFINITY;
        const float m_new = fmaxf(m[g], warp_max(score));
        const float alpha = exp_diff(m[g], m_new);
        const float p = valid ? expf(score - m_new) : 0.0f;
        l[g] = fmaf(l[g], alpha, warp_sum(p));
        m[g] = m_new;
        p_stage[g * 32 + lane] = p;
        CELLM_UNROLL
        for (int i = 0; i < kDims; ++i) acc[g][i] *= alpha;
      }
    }
    __syncwarp();

    // P·V: lane owns dims d0 .. d0 + kDims - 1 of every head.
    for (int j = 0; j < count; ++j) {
      const uint8_t* v_row = v_stage + j * Shape::kRowBytes;
      float v[kDims];
      CELLM_UNROLL
      for (int i = 0; i < kDims; ++i)
        v[i] = d0 + i < a.value_head_dim ? Kv::load(v_row, d0 + i) : 0.0f;
      CELLM_UNROLL
      for (int g = 0; g < kMaxGroup; ++g) {
        if (g < num_group) {
          const float p = p_stage[g * 32 + j];
          CELLM_UNROLL
          for (int i = 0; i < kDims; ++i) acc[g][i] = fmaf(p, v[i], acc[g][i]);
        }
      }
    }
    __syncwarp();  // the staging buffers are refilled by the next tile
  }

  // Merge the warps: max, rescaled sums and outputs.
  __syncthreads();
  auto* red_m = reinterpret_cast<float*>(stage);  // [kWarps, kMaxGroup]
  float* red_l = red_m + kWarps * kMaxGroup;      // [kWarps, kMaxGroup]
  float* red_o = red_l + kWarps * kMaxGroup;      // [kWarps, kMaxGroup, kMaxHeadDim]
  CELLM_UNROLL
  for (int g = 0; g < kMaxGroup; ++g) {
    if (lane == 0) {
      red_m[warp * kMaxGroup + g] = m[g];
      red_l[warp * kMaxGroup + g] = l[g];
    }
    CELLM_UNROLL
    for (int i = 0; i < kDims; ++i)
      red_o[(warp * kMaxGroup + g) * kMaxHeadDim + d0 + i] = acc[g][i];
  }
  __syncthreads();
  merge_decode_warps<kWarps, kMaxGroup>(args, b, red_m, red_l, red_o, kMaxHeadDim);
}

// One block per (token, head): merges the splits' partial outputs.
__global__ void __launch_bounds__(kThreads) decode_combine_kernel(const DecodeKernelArgs args) {
  pdl_wait();
  const AttentionArgs& a = args.a;
  const int t = blockIdx.x;
  const int h = blockIdx.y;
  const VisibleRange range = visible_positions(a.cells.token_pos[t], a.window);
  int32_t cells_per_split = 0;
  int32_t num_splits = 0;
  split_shape(range.end - range.begin, args.max_splits, args.min_cells, &cells_per_split,
              &num_splits);
  if (num_splits == 1) return;
  const int64_t slot0 = (static_cast<int64_t>(t) * a.num_heads + h) * args.max_splits;
  float max_all = -INFINITY;
  for (int s = 0; s < num_splits; ++s) max_all = fmaxf(max_all, args.partial_ml[2 * (slot0 + s)]);
  float sum = 0.0f;
  for (int s = 0; s < num_splits; ++s) {
    sum = fmaf(args.partial_ml[2 * (slot0 + s) + 1],
               expf(args.partial_ml[2 * (slot0 + s)] - max_all), sum);
  }
  for (int d = threadIdx.x; d < a.value_head_dim; d += kThreads) {
    float out = 0.0f;
    for (int s = 0; s < num_splits; ++s) {
      out = fmaf(args.partial_out[(slot0 + s) * a.value_head_dim + d],
                 expf(args.partial_ml[2 * (slot0 + s)] - max_all), out);
    }
    store_decode_output(a, t, h * a.value_head_dim + d, __fdiv_rn(out, sum));
  }
}

}  // namespace

Status prepare_decode_attention_kernels() {
  // A function-local static: initialized once, thread-safely.
  static const Status result = [] {
    CELLM_RETURN_IF_ERROR(
        for_each_kernel_shape(kAllCacheTypes, kDecodeHeadDims, [](auto type_tag, auto dim_tag) {
          constexpr KvDtype kDtype = decltype(type_tag)::value;
          constexpr int kMaxHeadDim = decltype(dim_tag)::value;

          return raise_smem_limit(decode_attention_kernel<kDtype, kMaxHeadDim>,
                                  DecodeShape<kDtype, kMaxHeadDim>::kSmemBytes,
                                  "decode_attention: cudaFuncSetAttribute");
        }));
    return prepare_decode_attention_tc_kernels();
  }();
  return result;
}

size_t decode_attention_scratch_bytes(int32_t num_tokens, int32_t num_heads, int32_t value_head_dim,
                                      int32_t max_splits) {
  if (max_splits <= 1) return 0;
  return static_cast<size_t>(num_tokens) * static_cast<size_t>(num_heads) *
         static_cast<size_t>(max_splits) * static_cast<size_t>(value_head_dim + 2) * sizeof(float);
}

int32_t decode_attention_default_splits(int32_t num_tokens, int32_t num_kv_heads,
                                        int32_t max_context, int32_t num_sms) {
  const int64_t blocks = std::max<int64_t>(1, static_cast<int64_t>(num_tokens) * num_kv_heads);
  const int64_t sms = std::max<int64_t>(1, num_sms);
  // Contexts the cluster-merged kernel takes (it runs min(8, splits)), and grids of at least
  // one block per SM per split: about four blocks per SM — three of the tensor-core kernel's fit
  // at once, and a fourth evens out the tail.
  int64_t wanted = (4 * sms + blocks - 1) / blocks;
  // Longer contexts with fewer (token, kv head) pairs than SMs: one block per SM. A block
  // streams its split's tiles with the cell lists loaded a tile ahead, so more blocks only add
  // partials and a second wave (docs/perf/decode.md, version 21; H200, Llama-3.1-8B heads, one
  // token: 16 splits take 29.8–30.1 / 46.0 / 143.4 µs at 16K / 32K / 128K positions, 64 splits
  // 41.2–42.0 / 59.6–59.7 / 174.8–175.7; four tokens at 32K: 4 splits 142.7–143.5 µs, 17
  // splits 167.8–168.7).
  if (max_context > kDecodeClusterMaxContext && blocks < sms) wanted = sms / blocks;
  const int64_t useful = std::max<int64_t>(1, (max_context + 63) / 64);
  return static_cast<int32_t>(std::clamp<int64_t>(std::min(wanted, useful), 1, 64));
}

namespace {

// False when the environment variable is "0" (read once per name by the callers' statics).
bool env_allows(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr || std::string_view(value) != "0";
}

// The splits of the cluster-merged tensor-core kernel for these params — 8, 4 or 2: at most
// max_splits and the largest cluster the device runs, and few enough that every block of the
// grid is resident at once (decode_attention_tc_cluster_blocks_per_sm) — or 0 when the launch takes
// the split kernel and the combine. Eight, not more: on the H200, batch-1 decode (Llama-3.1-8B
// geometry, 512 positions) measured 2.664–2.675 ms per token for q8_0 with clusters of 8, 2.720
// with 16, 2.734–2.746 without clusters.
int32_t cluster_splits(const DecodeAttentionParams& p) {
  static const bool enabled = env_allows("CELLM_CUDA_ATTENTION_CLUSTER");
  static const int32_t num_sms = [] {
    int device = 0;
    int sms = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
      (void)cudaGetLastError();
      return 0;
    }
    return sms;
  }();
  if (!enabled || !p.cluster_merge || p.max_splits < 2 || !tensor_core_attention_applies(p.args) ||
      !prepare_decode_attention_kernels().ok()) {
    return 0;
  }
  const int32_t largest = decode_attention_tc_max_cluster();
  DecodeKernelArgs one;
  one.a = p.args;
  one.max_splits = 1;
  const dim3 grid = decode_attention_grid(one, kMaxGroup);  // the tensor-core kernel's too
  const int64_t blocks_per_split = static_cast<int64_t>(grid.x) * grid.y;
  for (const int32_t splits : {8, 4, 2}) {
    if (splits <= largest && splits <= p.max_splits &&
        blocks_per_split * splits <=
            decode_attention_tc_cluster_blocks_per_sm() * static_cast<int64_t>(num_sms)) {
      return splits;
    }
  }
  return 0;
}

}  // namespace

bool decode_attention_writes_q8(const DecodeAttentionParams& p) {
  const int64_t width = static_cast<int64_t>(p.args.num_heads) * p.args.value_head_dim;
  return width % 256 == 0 && cluster_splits(p) > 0;
}

Status launch_decode_attention(const DecodeAttentionParams& p, cudaStream_t stream) {
  CELLM_RETURN_IF_ERROR(check_attention_args(p.args, "decode_attention"));
  const AttentionArgs& a = p.args;
  if (p.max_splits < 1 || p.max_splits > 65535 || p.min_cells_per_split < 1 ||
      (p.max_splits > 1 &&
       (p.scratch == nullptr ||
        p.scratch_bytes < decode_attention_scratch_bytes(a.num_tokens, a.num_heads,
                                                         a.value_head_dim, p.max_splits)))) {
    return invalid_argument("decode_attention: " + std::to_string(p.max_splits) +
                            " splits of at least " + std::to_string(p.min_cells_per_split) +
                            " cells with " + std::to_string(p.scratch_bytes) +
                            " bytes of scratch (need " +
                            std::to_string(decode_attention_scratch_bytes(
                                a.num_tokens, a.num_heads, a.value_head_dim, p.max_splits)) +
                            ")");
  }
  const int32_t cluster = cluster_splits(p);
  if ((a.out_q8 == nullptr) != (a.out_q8_scales == nullptr)) {
    return invalid_argument("decode_attention: out_q8 and out_q8_scales go together");
  }
  if (a.out_wide != nullptr && a.out_wide_order == WideOrder::kFused &&
      (a.num_heads * a.value_head_dim) % 32 != 0) {
    return invalid_argument(
        "decode_attention: a fused-order output needs a multiple of 32 columns");
  }
  if (a.out_q8 != nullptr && !decode_attention_writes_q8(p)) {
    return invalid_argument(
        "decode_attention: an int8 output needs the cluster-merged kernel "
        "(decode_attention_writes_q8)");
  }
  if (a.num_tokens == 0) return ok_status();
  CELLM_RETURN_IF_ERROR(prepare_decode_attention_kernels());
  DecodeKernelArgs args;
  args.a = a;
  args.max_splits = p.max_splits;
  args.min_cells = p.min_cells_per_split;
  args.softcap_inverse = soft_cap_inverse(a.softcap);
  if (cluster > 0) {
    args.max_splits = cluster;
    return pdl_launch_status(launch_decode_attention_tc_cluster(args, p.early_launch, stream),
                             "decode_attention (cluster)");
  }
  if (p.max_splits > 1) {
    args.partial_out = p.scratch;
    args.partial_ml = p.scratch + static_cast<size_t>(a.num_tokens) * a.num_heads * p.max_splits *
                                      a.value_head_dim;
  }
  const int max_dim = std::max(a.head_dim, a.value_head_dim);
  const cudaError_t launched =
      tensor_core_attention_applies(a)
          ? launch_decode_attention_tc(args, stream)
          : with_kernel_shape(kAllCacheTypes, kDecodeHeadDims, a.cache_dtype, max_dim,
                              [&](auto type_tag, auto dim_tag) {
                                constexpr KvDtype kDtype = decltype(type_tag)::value;
                                constexpr int kMaxHeadDim = decltype(dim_tag)::value;

                                return launch_pdl_if(
                                    attention_pdl_enabled(),
                                    decode_attention_kernel<kDtype, kMaxHeadDim>,
                                    decode_attention_grid(args, kMaxGroup), dim3(kThreads),
                                    DecodeShape<kDtype, kMaxHeadDim>::kSmemBytes, stream, args);
                              });
  CELLM_RETURN_IF_ERROR(pdl_launch_status(launched, "decode_attention"));
  if (p.max_splits > 1) {
    const dim3 grid(static_cast<unsigned>(a.num_tokens), static_cast<unsigned>(a.num_heads));
    CELLM_RETURN_IF_ERROR(
        pdl_launch_status(launch_pdl_if(attention_pdl_enabled(), decode_combine_kernel, grid,
                                        dim3(kThreads), 0, stream, args),
                          "decode_attention combine"));
  }
  return ok_status();
}

}  // namespace cellm::kernels
