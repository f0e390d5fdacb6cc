// decode_fused_front_bench: a layer's front as one cluster launch (see the header).
#include "backends/cuda/kernels/attention_common.cuh"
#include "backends/cuda/kernels/cluster_common.cuh"
#include "backends/cuda/kernels/decode_fused_front_bench.h"
#include "backends/cuda/kernels/decode_ring_parts.cuh"
#include "backends/cuda/kernels/kernel_common.cuh"
#include "backends/cuda/kernels/pdl.cuh"
#include "backends/cuda/kernels/quantize_activations.cuh"

namespace cellm::kernels {
namespace {

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;
constexpr int kCluster = kFusedFrontClusterBlocks;
constexpr int kHidden = static_cast<int>(kFusedFrontHidden);
constexpr int kHeadDim = 128;
constexpr int kGroupHeads = 4;  // q heads per kv head
constexpr int kKvHeads = kFusedFrontClusters;
constexpr int kGroupRows = (kGroupHeads + 2) * kHeadDim;  // 768 q|k|v rows per group
constexpr int kQkvRows = kFusedFrontQkvRows;              // ⌈768 / 14⌉ rounded to 8
constexpr int kRowBytes = kHidden / 2 + kHidden / 16;     // block-major Q4_0, 2304
constexpr int kORows = kFusedFrontOutputRows;             // ⌈4096 / 14⌉
constexpr int kOCols = kGroupHeads * kHeadDim;            // 512: the group's outputs
constexpr int kOBlocks = kOCols / 32;                     // 16 units of 32
constexpr int kORowBytes = kOCols / 2 + kOCols / 16;      // 288
constexpr int kQkvBytes = kQkvRows * kRowBytes;
constexpr int kOBytes = kORows * kORowBytes;
constexpr int kChunkBytes = kQkvBytes + kOBytes;  // a block's weights
constexpr int kOUnitsPerThread = (kORows * kOBlocks + kThreads - 1) / kThreads;
constexpr int kPositions = static_cast<int>(kFusedFrontPositions);
constexpr int kTile = (kPositions + kCluster - 1) / kCluster;  // positions per block
constexpr int kLastPosition = kPositions - 1;
constexpr int kQkvCopies = (kQkvRows + kWarps - 1) / kWarps;  // copies of ≤ 16 rows, a row a warp
constexpr int kUnitsPerOwner = (kOBlocks + kCluster - 1) / kCluster;
constexpr uint32_t kLowNibbles = 0x0f0f0f0fu;
static_assert(kQkvRows >= 48 && kTile <= 64 && kUnitsPerOwner <= 2 && kThreads % kOBlocks == 0);
static_assert(int64_t{kCluster} * kKvHeads * kChunkBytes == kFusedFrontLayerBytes);

struct alignas(128) FrontShared {
  uint8_t w_qkv[kQkvBytes];          // [rows][2304] block-major Q4_0
  uint16_t k_tile[kTile][kHeadDim];  // bf16, this block's positions
  uint16_t v_tile[kTile][kHeadDim];
  alignas(16) int8_t x_q[kHidden];  // the normed residual, int8, natural order
  float x_d[kHidden / 32];
  int x_sum[kHidden / 32];
  float q_all[kGroupHeads][kHeadDim];  // all-gathered, rotated
  float k_new[kHeadDim], v_new[kHeadDim];
  float probs[kGroupHeads][kTile];
  float head_ms[kGroupHeads][2];               // max, sum of this block's positions
  float recv_o[kUnitsPerOwner][kCluster][32];  // reduce-scatter: every block's partial of a unit
  float recv_ms[kUnitsPerOwner][kCluster][2];
  alignas(16) int8_t attn_q[kOCols];  // all-gathered int8 attention output
  float attn_d[kOBlocks];
  float red[kWarps];
  float rows_out[kQkvRows];
  uint64_t bars[kQkvCopies + 1];  // q|k|v copies, the K/V tile's
};

#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)
using ring::bulk_copy;
using ring::evict_first_policy;
using ring::mbarrier_expect_bytes;
using ring::mbarrier_init;
using ring::mbarrier_wait;

// Σ over one block of 32: 16 bytes of nibbles (byte k: element k low, k + 16 high) against the
// int8 values' two halves, − 8 · their sum.
__device__ __forceinline__ int q4_block_dot(uint4 nibbles, uint4 lo, uint4 hi, int x_sum) {
  int sum = -8 * x_sum;
  CELLM_UNROLL
  for (int q = 0; q < 4; ++q) {
    const uint32_t n = word_of(nibbles, q);
    sum = __dp4a(static_cast<int>(n & kLowNibbles), static_cast<int>(word_of(lo, q)), sum);
    sum = __dp4a(static_cast<int>((n >> 4) & kLowNibbles), static_cast<int>(word_of(hi, q)), sum);
  }
  return sum;
}

// Row `row` of block `rank`'s q|k|v chunk: the group's row rank · 56 + row, in the order q heads
// 0 … 3, k, v (128 dims each); rows past the group's 768 are the uneven split's padding. (The
// timing's stand-in: a real repack would keep RoPE pairs within a block.)
struct QkvDim {
  int kind;  // 0 q, 1 k, 2 v, 3 none
  int head;  // q: the group's head 0 … 3
  int dim;   // 0 … 127
};
__device__ __forceinline__ QkvDim qkv_dim(int rank, int row) {
  const int g = rank * kQkvRows + row;
  if (g < kGroupHeads * kHeadDim) return {0, g / kHeadDim, g % kHeadDim};
  if (g < kGroupRows) return {g / kHeadDim - kGroupHeads + 1, 0, g % kHeadDim};
  return {3, 0, 0};
}
#endif

__global__ void __launch_bounds__(kThreads, 1) fused_front_kernel(const FusedFrontArgs a) {
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)
  extern __shared__ __align__(128) uint8_t smem_raw[];
  FrontShared& s = *reinterpret_cast<FrontShared*>(smem_raw);
  const int tid = static_cast<int>(threadIdx.x), warp = tid / 32, lane = tid % 32;
  const int rank = cluster_block_rank();
  const int group = static_cast<int>(blockIdx.x) / kCluster;
  const uint8_t* chunk = a.weights + static_cast<int64_t>(blockIdx.x) * kChunkBytes;
  if (a.early_trigger) pdl_launch_dependents();

  // The weights and the K/V tile first: nothing earlier in the step writes them.
  if (tid == 0) {
    for (uint64_t& bar : s.bars) mbarrier_init(&bar, 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (tid == 0) {
    const uint64_t policy = evict_first_policy();
    for (int c = 0; c < kQkvCopies; ++c) {
      const int rows = min(kWarps, kQkvRows - kWarps * c);
      mbarrier_expect_bytes(&s.bars[c], rows * kRowBytes);
      bulk_copy(s.w_qkv + c * kWarps * kRowBytes, chunk + c * kWarps * kRowBytes, rows * kRowBytes,
                &s.bars[c], policy);
    }
    if (a.attention) mbarrier_expect_bytes(&s.bars[kQkvCopies], 2 * sizeof(s.k_tile));
  }
  if (a.attention && warp == 1) {  // position rank · kTile + p (mod 512) of kv head `group`
    const uint64_t policy = evict_first_policy();
    for (int p = lane; p < kTile; p += 32) {
      const int64_t cell = (static_cast<int64_t>(rank) * kTile + p) % kPositions;
      const int64_t row = cell * kKvHeads + group;
      bulk_copy(s.k_tile[p], a.k_cache + row * kHeadDim, 2 * kHeadDim, &s.bars[kQkvCopies], policy);
      bulk_copy(s.v_tile[p], a.v_cache + row * kHeadDim, 2 * kHeadDim, &s.bars[kQkvCopies], policy);
    }
  }
  // The output rows in registers: unit u = tid + 512 k is row u / 16, block u % 16 (= tid % 16).
  uint4 o_nibbles[kOUnitsPerThread];
  uint16_t o_scales[kOUnitsPerThread];
  const uint8_t* o_weights = chunk + kQkvBytes;
  CELLM_UNROLL
  for (int k = 0; k < kOUnitsPerThread; ++k) {
    const int u = tid + kThreads * k;
    if (u < kORows * kOBlocks) {
      const int row = u / kOBlocks, b = u % kOBlocks;
      o_nibbles[k] = load_stream_u4(o_weights + row * kORowBytes + 16 * b);
      o_scales[k] = __ldcs(reinterpret_cast<const unsigned short*>(o_weights + row * kORowBytes +
                                                                   kOCols / 2 + 2 * b));
    }
  }
  const float4 w0 = *reinterpret_cast<const float4*>(a.norm_weight + 8 * tid);
  const float4 w1 = *reinterpret_cast<const float4*>(a.norm_weight + 8 * tid + 4);
  pdl_wait();
  cluster_arrive_relaxed();  // every block has started: pushes may target it after the wait

  // The normed residual as int8, every block for itself: thread t holds elements 8t … 8t + 7,
  // four threads one block of 32.
  const float4 x0 = *reinterpret_cast<const float4*>(a.x + 8 * tid);
  const float4 x1 = *reinterpret_cast<const float4*>(a.x + 8 * tid + 4);
  float v[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
  const float w[8] = {w0.x, w0.y, w0.z, w0.w, w1.x, w1.y, w1.z, w1.w};
  float squares = 0.0f;
  CELLM_UNROLL
  for (int i = 0; i < 8; ++i) squares = fmaf(v[i], v[i], squares);
  squares = warp_sum(squares);
  if (lane == 0) s.red[warp] = squares;
  __syncthreads();
  float total = 0.0f;
  CELLM_UNROLL
  for (int i = 0; i < kWarps; ++i) total += s.red[i];
  const float inverse_rms = rsqrtf(total / kHidden + a.norm_eps);
  float amax = 0.0f;
  CELLM_UNROLL
  for (int i = 0; i < 8; ++i) {
    v[i] *= inverse_rms * w[i];
    amax = fmaxf(amax, fabsf(v[i]));
  }
  amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
  amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 2));
  const float scale = q8_block_scale(amax);
  uint32_t word_lo = 0, word_hi = 0;
  int q_sum = 0;
  CELLM_UNROLL
  for (int i = 0; i < 8; ++i) {
    const int q = q8_quantize(v[i], scale);
    q_sum += q;
    const uint32_t byte = (static_cast<uint32_t>(q) & 0xffu) << (8 * (i % 4));
    if (i < 4) {
      word_lo |= byte;
    } else {
      word_hi |= byte;
    }
  }
  q_sum += __shfl_xor_sync(0xffffffffu, q_sum, 1);
  q_sum += __shfl_xor_sync(0xffffffffu, q_sum, 2);
  *reinterpret_cast<uint2*>(s.x_q + 8 * tid) = make_uint2(word_lo, word_hi);
  if (tid % 4 == 0) s.x_d[tid / 4] = scale, s.x_sum[tid / 4] = q_sum;
  __syncthreads();

  // q|k|v: warp w takes rows w, 16 + w, … as their copies land; lane the blocks lane + 32 j.
  for (int c = 0; c < kQkvCopies; ++c) {
    const int row = kWarps * c + warp;
    if (row >= kQkvRows) break;
    mbarrier_wait(&s.bars[c], 0);
    const uint8_t* weights = s.w_qkv + row * kRowBytes;
    float acc = 0.0f;
    CELLM_UNROLL
    for (int j = 0; j < kHidden / 32 / 32; ++j) {
      const int b = lane + 32 * j;
      const uint4 nibbles = *reinterpret_cast<const uint4*>(weights + 16 * b);
      const uint16_t d = *reinterpret_cast<const uint16_t*>(weights + kHidden / 2 + 2 * b);
      const uint4 lo = *reinterpret_cast<const uint4*>(s.x_q + 32 * b);
      const uint4 hi = *reinterpret_cast<const uint4*>(s.x_q + 32 * b + 16);
      acc = fmaf(f16_bits_to_float(d) * s.x_d[b],
                 static_cast<float>(q4_block_dot(nibbles, lo, hi, s.x_sum[b])), acc);
    }
    acc = warp_sum(acc);
    if (lane == 0) s.rows_out[row] = acc;
  }
  __syncthreads();
  // RoPE at the token's position over 20 pairs of rows (i, i + 16) and (32 + i, 36 + i), the
  // arithmetic of a block's q and k pairs.
  if (tid < 20) {
    const bool is_q = tid < 16;
    const int first = is_q ? tid : 32 + (tid - 16), second = first + (is_q ? 16 : 4);
    const int frequency = (rank * 20 + tid) % 64;
    const float angle = static_cast<float>(kLastPosition) *
                        exp2f(-2.0f * frequency / kHeadDim * log2f(a.rope_theta));
    float sin_a, cos_a;
    sincosf(angle, &sin_a, &cos_a);
    const float x = s.rows_out[first], y = s.rows_out[second];
    s.rows_out[first] = x * cos_a - y * sin_a;
    s.rows_out[second] = x * sin_a + y * cos_a;
  }
  __syncthreads();
  if (tid < kQkvRows) {  // the token's k and v into its cell (the last position)
    const QkvDim kd = qkv_dim(rank, tid);
    if (kd.kind == 1 || kd.kind == 2) {
      uint16_t* cache = kd.kind == 1 ? a.k_cache : a.v_cache;
      cache[(static_cast<int64_t>(kLastPosition) * kKvHeads + group) * kHeadDim + kd.dim] =
          float_to_bf16_bits(s.rows_out[tid]);
    }
  }
  cluster_wait_acquire();
  for (int i = tid; i < kQkvRows * kCluster; i += kThreads) {  // all-gather q, k, v
    const int row = i % kQkvRows, to = i / kQkvRows;
    const QkvDim kd = qkv_dim(rank, row);
    if (kd.kind == 3) continue;
    const float* target = kd.kind == 0   ? &s.q_all[kd.head][kd.dim]
                          : kd.kind == 1 ? &s.k_new[kd.dim]
                                         : &s.v_new[kd.dim];
    store_cluster(cluster_address(target, to), s.rows_out[row]);
  }
  cluster_arrive_release();
  cluster_wait_acquire();

  // Units of 32 outputs: unit u (head u / 4, dims (u % 4) · 32 …) is owned by block u % 14, in
  // its slot u / 14. Warp `slot` of the owner merges it.
  const int my_unit = rank + kCluster * warp;
  float unit_value = 0.0f;
  if (a.attention) {
    mbarrier_wait(&s.bars[kQkvCopies], 0);
    const int token_index = kLastPosition - rank * kTile;  // the token's own position, if here
    if (token_index >= 0 && token_index < kTile && tid < kHeadDim) {
      s.k_tile[token_index][tid] = float_to_bf16_bits(s.k_new[tid]);
      s.v_tile[token_index][tid] = float_to_bf16_bits(s.v_new[tid]);
    }
    __syncthreads();
    {  // scores: warp w, head w / 4, positions (w % 4) + 4 i; lane dims 4 lane … 4 lane + 3
      const int head = warp / 4;
      const float4 q = *reinterpret_cast<const float4*>(&s.q_all[head][4 * lane]);
      float mine = 0.0f;
      CELLM_UNROLL
      for (int i = 0; i < (kTile + 3) / 4; ++i) {
        const int p = warp % 4 + 4 * i;
        if (p >= kTile) break;
        const uint2 k = *reinterpret_cast<const uint2*>(&s.k_tile[p][4 * lane]);
        float dot = q.x * bf16_bits_to_float(static_cast<uint16_t>(k.x)) +
                    q.y * bf16_bits_to_float(static_cast<uint16_t>(k.x >> 16)) +
                    q.z * bf16_bits_to_float(static_cast<uint16_t>(k.y)) +
                    q.w * bf16_bits_to_float(static_cast<uint16_t>(k.y >> 16));
        dot = warp_sum(dot);
        if (lane == i) mine = dot * rsqrtf(static_cast<float>(kHeadDim));
      }
      const int p = warp % 4 + 4 * lane;
      if (p < kTile) s.probs[head][p] = mine;
    }
    __syncthreads();
    if (warp < kGroupHeads) {
      const float s0 = s.probs[warp][lane];
      const float s1 = lane + 32 < kTile ? s.probs[warp][lane + 32] : -INFINITY;
      const float m = warp_max(fmaxf(s0, s1));
      const float e0 = __expf(s0 - m), e1 = __expf(s1 - m);
      const float sum = warp_sum(e0 + e1);
      s.probs[warp][lane] = e0;
      if (lane + 32 < kTile) s.probs[warp][lane + 32] = e1;
      if (lane == 0) s.head_ms[warp][0] = m, s.head_ms[warp][1] = sum;
    }
    __syncthreads();
    {  // thread (head, dim): Σ over the block's positions, pushed to the dim's owner
      const int head = tid / kHeadDim, dim = tid % kHeadDim;
      float o = 0.0f;
      CELLM_UNROLL
      for (int p = 0; p < kTile; ++p) {
        o = fmaf(s.probs[head][p], bf16_bits_to_float(s.v_tile[p][dim]), o);
      }
      const int unit = tid / 32, owner = unit % kCluster, slot = unit / kCluster;
      store_cluster(cluster_address(&s.recv_o[slot][rank][dim % 32], owner), o);
      if (dim % 32 < 2) {
        store_cluster(cluster_address(&s.recv_ms[slot][rank][dim % 32], owner),
                      s.head_ms[head][dim % 32]);
      }
    }
    cluster_arrive_release();
    cluster_wait_acquire();
    if (warp < kUnitsPerOwner && my_unit < kOBlocks) {
      float m = -INFINITY;
      CELLM_UNROLL
      for (int i = 0; i < kCluster; ++i) m = fmaxf(m, s.recv_ms[warp][i][0]);
      float num = 0.0f, den = 0.0f;
      CELLM_UNROLL
      for (int i = 0; i < kCluster; ++i) {
        const float f = __expf(s.recv_ms[warp][i][0] - m);
        num = fmaf(f, s.recv_o[warp][i][lane], num);
        den = fmaf(f, s.recv_ms[warp][i][1], den);
      }
      unit_value = num / den;
    }
  } else if (warp < kUnitsPerOwner && my_unit < kOBlocks) {
    unit_value = s.q_all[my_unit / 4][(my_unit % 4) * 32 + lane];
  }
  if (warp < kUnitsPerOwner && my_unit < kOBlocks) {  // the unit as one int8 block, all-gathered
    const float unit_scale = q8_block_scale(warp_max(fabsf(unit_value)));
    uint32_t word = (static_cast<uint32_t>(q8_quantize(unit_value, unit_scale)) & 0xffu)
                    << (8 * (lane & 3));
    word |= __shfl_xor_sync(0xffffffffu, word, 1);
    word |= __shfl_xor_sync(0xffffffffu, word, 2);
    if (lane % 4 == 0) {
      for (int to = 0; to < kCluster; ++to) {
        store_cluster(cluster_address(&s.attn_q[my_unit * 32 + lane], to), word);
      }
    } else if (lane == 1) {
      for (int to = 0; to < kCluster; ++to) {
        store_cluster(cluster_address(&s.attn_d[my_unit], to), unit_scale);
      }
    }
  }
  cluster_arrive_release();
  cluster_wait_acquire();
  if (!a.early_trigger) pdl_launch_dependents();

  // The output product's partial: this thread's units are all of block b = tid % 16.
  const int b = tid % kOBlocks;
  const uint4 lo = *reinterpret_cast<const uint4*>(s.attn_q + 32 * b);
  const uint4 hi = *reinterpret_cast<const uint4*>(s.attn_q + 32 * b + 16);
  int attn_sum = 0;
  CELLM_UNROLL
  for (int q = 0; q < 4; ++q) {
    attn_sum = __dp4a(0x01010101, static_cast<int>(word_of(lo, q)), attn_sum);
    attn_sum = __dp4a(0x01010101, static_cast<int>(word_of(hi, q)), attn_sum);
  }
  const float attn_d = s.attn_d[b];
  CELLM_UNROLL
  for (int k = 0; k < kOUnitsPerThread; ++k) {
    const int u = tid + kThreads * k;
    float acc = 0.0f;
    if (u < kORows * kOBlocks) {
      acc = f16_bits_to_float(o_scales[k]) * attn_d *
            static_cast<float>(q4_block_dot(o_nibbles[k], lo, hi, attn_sum));
    }
    CELLM_UNROLL
    for (int m = 8; m > 0; m /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, m);
    const int out = rank * kORows + u / kOBlocks;
    if (u < kORows * kOBlocks && b == 0 && out < kHidden) {
      if (a.atomic_output) {
        atomicAdd(a.x + out, acc);
      } else {
        a.partials[static_cast<int64_t>(group) * kHidden + out] = acc;
      }
    }
  }
#endif
}

// x[i] += the groups' partials of output i, in group order.
__global__ void __launch_bounds__(256) front_partials_sum_kernel(float* x, const float* partials) {
  pdl_wait();
  pdl_launch_dependents();
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  float sum = 0.0f;
  CELLM_UNROLL
  for (int g = 0; g < kKvHeads; ++g) sum += partials[g * kHidden + i];
  x[i] += sum;
}

cudaLaunchConfig_t front_config(cudaStream_t stream, cudaLaunchAttribute* attributes) {
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(kCluster * kKvHeads);
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = sizeof(FrontShared);
  config.stream = stream;
  attributes[0].id = cudaLaunchAttributeClusterDimension;
  attributes[0].val.clusterDim.x = kCluster;
  attributes[0].val.clusterDim.y = 1;
  attributes[0].val.clusterDim.z = 1;
  attributes[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attributes[1].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attributes;
  config.numAttrs = 2;
  return config;
}

cudaError_t prepare_front_kernel() {
  static const cudaError_t prepared = [] {
    cudaError_t error =
        cudaFuncSetAttribute(fused_front_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(sizeof(FrontShared)));
    if (error != cudaSuccess) return error;
    return cudaFuncSetAttribute(fused_front_kernel, cudaFuncAttributeNonPortableClusterSizeAllowed,
                                1);
  }();
  return prepared;
}

}  // namespace

cudaError_t fused_front_active_clusters(int cluster_blocks, int* clusters) {
  cudaError_t error = prepare_front_kernel();
  if (error != cudaSuccess) return error;
  cudaLaunchAttribute attributes[2];
  cudaLaunchConfig_t config = front_config(nullptr, attributes);
  config.numAttrs = 1;  // the cluster's shape alone
  config.gridDim = dim3(cluster_blocks * kKvHeads);
  attributes[0].val.clusterDim.x = static_cast<unsigned>(cluster_blocks);
  return cudaOccupancyMaxActiveClusters(clusters, fused_front_kernel, &config);
}

cudaError_t launch_fused_front(const FusedFrontArgs& args, cudaStream_t stream) {
  cudaError_t error = prepare_front_kernel();
  if (error != cudaSuccess) return error;
  if (args.num_groups < 1 || args.num_groups > kKvHeads) return cudaErrorInvalidValue;
  cudaLaunchAttribute attributes[2];
  cudaLaunchConfig_t config = front_config(stream, attributes);
  config.gridDim = dim3(static_cast<unsigned>(kCluster * args.num_groups));
  error = cudaLaunchKernelEx(&config, fused_front_kernel, args);
  if (error != cudaSuccess || args.atomic_output) return error;
  return launch_pdl(front_partials_sum_kernel, dim3(kHidden / 256), dim3(256), 0, stream, args.x,
                    static_cast<const float*>(args.partials));
}

}  // namespace cellm::kernels
