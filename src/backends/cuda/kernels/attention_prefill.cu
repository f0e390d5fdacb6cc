// attention_prefill: tiled causal attention for runs of consecutive tokens of one sequence
// (attention.cuh), on CUDA cores in f32 — the kernel for f32 caches and head sizes the
// tensor-core kernel (attention_prefill_tc.cu, picked by the launch below) does not take.
//
// A block takes 64 query rows — Qt consecutive tokens × Gs query heads of one kv head (Gs a power
// of two ≤ 8, Qt = 64 / Gs) — and, for each run of tokens of one sequence among them, walks the
// run's visible positions in 32-key tiles: K and V rows are copied (cp.async) from their cells
// into shared memory, converted to f32 (K transposed), S = Q·Kᵀ is computed in 4×4 register tiles
// (128 threads: rows 4·ty .. 4·ty + 3, keys 4·tx .. 4·tx + 3), scaled, soft-capped where asked,
// masked (causal, window, run), folded into the running max / sum, and P·V accumulated in 4-row ×
// (head_dim / 8) register tiles. Rows of other runs of the block are masked out and written by
// their own pass.
#include <algorithm>
#include <climits>
#include <string>

#include "backends/cuda/kernels/attention_common.cuh"
#include "backends/cuda/kernels/attention_internal.h"
#include "backends/cuda/kernels/launch_status.h"

namespace cellm::kernels {
namespace {

constexpr int kThreads = 128;
constexpr int kRows = 64;  // query rows per block
constexpr int kKeys = 32;  // keys per tile
constexpr int kMaxGroupSlots = 8;
constexpr HeadDims<64, 128, 256> kPrefillHeadDims;

template <KvDtype kDtype, int kHeadDim>
struct PrefillShape {
  static constexpr int kBytes = KvTraits<kDtype>::kBytes;
  static constexpr int kQStride = kRows + 4;                 // Qs[d][row]
  static constexpr int kKStride = kKeys + 4;                 // Ks[d][key]
  static constexpr int kVStride = kHeadDim + 4;              // Vs[key][d]
  static constexpr int kPStride = kRows + 4;                 // Ps[key][row]
  static constexpr int kRawStride = kHeadDim * kBytes + 16;  // staged K/V rows, cache dtype
  static constexpr size_t kQFloats = size_t{kHeadDim} * kQStride;
  static constexpr size_t kKFloats = size_t{kHeadDim} * kKStride;
  static constexpr size_t kVFloats = size_t{kKeys} * kVStride;
  static constexpr size_t kPFloats = size_t{kKeys} * kPStride;
  static constexpr size_t kFloatBytes = (kQFloats + kKFloats + kVFloats + kPFloats) * 4;
  static constexpr size_t kSmemBytes = kFloatBytes + 2 * size_t{kKeys} * kRawStride;
  static constexpr int kChunks = kHeadDim / 32;  // float4 chunks of output dims per thread
};

template <KvDtype kDtype, int kHeadDim>
__global__ void __launch_bounds__(kThreads)
    prefill_attention_kernel(const AttentionArgs a, int group_slots, float softcap_inverse) {
  using Shape = PrefillShape<kDtype, kHeadDim>;
  using Kv = KvTraits<kDtype>;
  constexpr int kChunks = Shape::kChunks;
  extern __shared__ __align__(16) uint8_t smem[];
  float* q_s = reinterpret_cast<float*>(smem);  // [kHeadDim][kQStride]
  float* k_s = q_s + Shape::kQFloats;           // [kHeadDim][kKStride]
  float* v_s = k_s + Shape::kKFloats;           // [kKeys][kVStride]
  float* p_s = v_s + Shape::kVFloats;           // [kKeys][kPStride]
  uint8_t* k_raw = smem + Shape::kFloatBytes;   // [kKeys][kRawStride]
  uint8_t* v_raw = k_raw + kKeys * Shape::kRawStride;

  const PrefillBlock block = prefill_block(a, kRows, group_slots);
  const int group = block.group;
  const int kv_head = block.kv_head;
  const int slot0 = block.slot0;
  const int t0 = block.t0;
  const int t_end = block.t_end;
  const int tid = threadIdx.x;
  const int ty = tid >> 3;  // rows 4·ty .. 4·ty + 3
  const int tx = tid & 7;   // keys 4·tx .. 4·tx + 3; dims 32·c + 4·tx .. + 3

  const auto* k_cache = static_cast<const uint8_t*>(a.k_cache);
  const auto* v_cache = static_cast<const uint8_t*>(a.v_cache);
  const int k_row_bytes = a.head_dim * Shape::kBytes;
  const int v_row_bytes = a.value_head_dim * Shape::kBytes;
  const int64_t k_cell_bytes = static_cast<int64_t>(a.num_kv_heads) * k_row_bytes;
  const int64_t v_cell_bytes = static_cast<int64_t>(a.num_kv_heads) * v_row_bytes;

  for (int run_begin = t0; run_begin < t_end;) {
    const TokenRun run = token_run(a, run_begin, t_end);
    const int run_end = run.end;
    const int32_t key_begin = run.key_begin;
    const int32_t key_end = run.key_end;
    const int32_t* cells = run.cells;

    // This thread's rows: validity and visible positions.
    bool row_valid[4];
    int32_t row_first[4];
    int32_t row_last[4];
    CELLM_UNROLL
    for (int i = 0; i < 4; ++i) {
      const int r = 4 * ty + i;
      const int t = t0 + r / group_slots;
      row_valid[i] = t >= run_begin && t < run_end && slot0 + r % group_slots < group;
      const VisibleRange vr = visible_positions(row_valid[i] ? a.cells.token_pos[t] : 0, a.window);
      row_first[i] = vr.begin;
      row_last[i] = vr.end - 1;
    }

    // Q rows of the run, transposed; other rows zero.
    for (int i = tid; i < kRows * a.head_dim; i += kThreads) {
      const int d = i / kRows;
      const int r = i - d * kRows;
      const int t = t0 + r / group_slots;
      const int slot = slot0 + r % group_slots;
      const bool valid = t >= run_begin && t < run_end && slot < group;
      q_s[d * Shape::kQStride + r] =
          valid ? a.q[t * a.q_stride + (kv_head * group + slot) * a.head_dim + d] : 0.0f;
    }

    float m[4];
    float l[4];
    float o[4][kChunks][4];
    CELLM_UNROLL
    for (int i = 0; i < 4; ++i) {
      m[i] = -INFINITY;
      l[i] = 0.0f;
      CELLM_UNROLL
      for (int c = 0; c < kChunks; ++c) {
        CELLM_UNROLL
        for (int e = 0; e < 4; ++e) o[i][c][e] = 0.0f;
      }
    }

    for (int32_t key0 = key_begin; key0 < key_end; key0 += kKeys) {
      const int count = min(kKeys, key_end - key0);
      // Stage the tile's K and V rows (cache dtype) with asynchronous copies.
      const int k_pieces = k_row_bytes / 16;
      const int v_pieces = v_row_bytes / 16;
      for (int pc = tid; pc < count * k_pieces; pc += kThreads) {
        const int row = pc / k_pieces;
        const int piece = pc - row * k_pieces;
        copy_async_16(k_raw + row * Shape::kRawStride + 16 * piece,
                      k_cache + cells[key0 + row] * k_cell_bytes +
                          static_cast<int64_t>(kv_head) * k_row_bytes + 16 * piece);
      }
      for (int pc = tid; pc < count * v_pieces; pc += kThreads) {
        const int row = pc / v_pieces;
        const int piece = pc - row * v_pieces;
        copy_async_16(v_raw + row * Shape::kRawStride + 16 * piece,
                      v_cache + cells[key0 + row] * v_cell_bytes +
                          static_cast<int64_t>(kv_head) * v_row_bytes + 16 * piece);
      }
      copy_async_wait_all();
      __syncthreads();
      // Convert to f32: K transposed, V row-major; keys past the tile are zero.
      for (int i = tid; i < kKeys * a.head_dim; i += kThreads) {
        const int d = i / kKeys;
        const int key = i - d * kKeys;
        k_s[d * Shape::kKStride + key] =
            key < count ? Kv::load(k_raw + key * Shape::kRawStride, d) : 0.0f;
      }
      for (int i = tid; i < kKeys * a.value_head_dim; i += kThreads) {
        const int key = i / a.value_head_dim;
        const int d = i - key * a.value_head_dim;
        v_s[key * Shape::kVStride + d] =
            key < count ? Kv::load(v_raw + key * Shape::kRawStride, d) : 0.0f;
      }
      __syncthreads();

      // S = Q·Kᵀ for rows 4ty.., keys 4tx...
      float s[4][4];
      CELLM_UNROLL
      for (int i = 0; i < 4; ++i) {
        CELLM_UNROLL
        for (int j = 0; j < 4; ++j) s[i][j] = 0.0f;
      }
      for (int d = 0; d < a.head_dim; ++d) {
        const float4 qv = *reinterpret_cast<const float4*>(q_s + d * Shape::kQStride + 4 * ty);
        const float4 kv = *reinterpret_cast<const float4*>(k_s + d * Shape::kKStride + 4 * tx);
        const float qa[4] = {qv.x, qv.y, qv.z, qv.w};
        const float ka[4] = {kv.x, kv.y, kv.z, kv.w};
        CELLM_UNROLL
        for (int i = 0; i < 4; ++i) {
          CELLM_UNROLL
          for (int j = 0; j < 4; ++j) s[i][j] = fmaf(qa[i], ka[j], s[i][j]);
        }
      }

      // Scaled, then soft-capped where asked (gemma2): before the mask, as the CPU caps them.
      CELLM_UNROLL
      for (int i = 0; i < 4; ++i) {
        CELLM_UNROLL
        for (int j = 0; j < 4; ++j) s[i][j] *= a.scale;
      }
      if (a.softcap > 0.0f) {  // kernel-uniform: uncapped, one branch per tile
        CELLM_UNROLL
        for (int i = 0; i < 4; ++i) {
          CELLM_UNROLL
          for (int j = 0; j < 4; ++j) s[i][j] = soft_capped(s[i][j], a.softcap, softcap_inverse);
        }
      }

      // Mask, online softmax per row (the 8 threads of a row are 8 consecutive lanes).
      CELLM_UNROLL
      for (int i = 0; i < 4; ++i) {
        float row_max = -INFINITY;
        CELLM_UNROLL
        for (int j = 0; j < 4; ++j) {
          const int32_t pos = key0 + 4 * tx + j;
          const bool visible =
              row_valid[i] && 4 * tx + j < count && pos >= row_first[i] && pos <= row_last[i];
          s[i][j] = visible ? s[i][j] : -INFINITY;
          row_max = fmaxf(row_max, s[i][j]);
        }
        row_max = fmaxf(row_max, __shfl_xor_sync(0xffffffffu, row_max, 1));
        row_max = fmaxf(row_max, __shfl_xor_sync(0xffffffffu, row_max, 2));
        row_max = fmaxf(row_max, __shfl_xor_sync(0xffffffffu, row_max, 4));
        const float m_new = fmaxf(m[i], row_max);
        const float alpha = m_new == -INFINITY ? 1.0f : exp_diff(m[i], m_new);
        float row_sum = 0.0f;
        CELLM_UNROLL
        for (int j = 0; j < 4; ++j) {
          const float p = s[i][j] == -INFINITY ? 0.0f : expf(s[i][j] - m_new);
          row_sum += p;
          p_s[(4 * tx + j) * Shape::kPStride + 4 * ty + i] = p;
        }
        row_sum += __shfl_xor_sync(0xffffffffu, row_sum, 1);
        row_sum += __shfl_xor_sync(0xffffffffu, row_sum, 2);
        row_sum += __shfl_xor_sync(0xffffffffu, row_sum, 4);
        l[i] = fmaf(l[i], alpha, row_sum);
        m[i] = m_new;
        CELLM_UNROLL
        for (int c = 0; c < kChunks; ++c) {
          CELLM_UNROLL
          for (int e = 0; e < 4; ++e) o[i][c][e] *= alpha;
        }
      }
      __syncthreads();

      // O += P·V for rows 4ty.., dims 32c + 4tx + e.
      for (int key = 0; key < count; ++key) {
        const float4 pv = *reinterpret_cast<const float4*>(p_s + key * Shape::kPStride + 4 * ty);
        const float pa[4] = {pv.x, pv.y, pv.z, pv.w};
        CELLM_UNROLL
        for (int c = 0; c < kChunks; ++c) {
          const float4 vv =
              *reinterpret_cast<const float4*>(v_s + key * Shape::kVStride + 32 * c + 4 * tx);
          const float va[4] = {vv.x, vv.y, vv.z, vv.w};
          CELLM_UNROLL
          for (int i = 0; i < 4; ++i) {
            CELLM_UNROLL
            for (int e = 0; e < 4; ++e) o[i][c][e] = fmaf(pa[i], va[e], o[i][c][e]);
          }
        }
      }
      __syncthreads();  // the tile buffers are refilled next
    }

    CELLM_UNROLL
    for (int i = 0; i < 4; ++i) {
      if (!row_valid[i]) continue;
      const int r = 4 * ty + i;
      const int t = t0 + r / group_slots;
      const int h = kv_head * group + slot0 + r % group_slots;
      float* out = a.out + t * a.out_stride + h * a.value_head_dim;
      CELLM_UNROLL
      for (int c = 0; c < kChunks; ++c) {
        CELLM_UNROLL
        for (int e = 0; e < 4; ++e) {
          const int d = 32 * c + 4 * tx + e;
          if (d < a.value_head_dim) out[d] = __fdiv_rn(o[i][c][e], l[i]);
        }
      }
    }
    __syncthreads();  // q_s is reloaded by the next run
    run_begin = run_end;
  }
}

}  // namespace

Status prepare_prefill_attention_kernels() {
  // A function-local static: initialized once, thread-safely.
  static const Status result = [] {
    CELLM_RETURN_IF_ERROR(
        for_each_kernel_shape(kAllCacheTypes, kPrefillHeadDims, [](auto type_tag, auto dim_tag) {
          constexpr KvDtype kDtype = decltype(type_tag)::value;
          constexpr int kHeadDim = decltype(dim_tag)::value;

          return raise_smem_limit(prefill_attention_kernel<kDtype, kHeadDim>,
                                  PrefillShape<kDtype, kHeadDim>::kSmemBytes,
                                  "prefill_attention: cudaFuncSetAttribute");
        }));
    return prepare_prefill_attention_tc_kernels();
  }();
  return result;
}

Status launch_prefill_attention(const AttentionArgs& a, cudaStream_t stream) {
  CELLM_RETURN_IF_ERROR(check_attention_args(a, "prefill_attention"));
  if (a.out_q8 != nullptr || a.out_q8_scales != nullptr || a.out_wide != nullptr) {
    return invalid_argument("prefill_attention: int8 and wide-order outputs are decode's only");
  }
  if (a.num_tokens == 0) return ok_status();
  const int max_dim = std::max(a.head_dim, a.value_head_dim);
  CELLM_RETURN_IF_ERROR(prepare_prefill_attention_kernels());
  if (tensor_core_attention_applies(a)) {
    launch_prefill_attention_tc(a, stream);
    return launch_status("prefill_attention_tc");
  }
  const PrefillGrid g = prefill_attention_grid(a, kRows, kMaxGroupSlots);
  with_kernel_shape(
      kAllCacheTypes, kPrefillHeadDims, a.cache_dtype, max_dim, [&](auto type_tag, auto dim_tag) {
        constexpr KvDtype kDtype = decltype(type_tag)::value;
        constexpr int kHeadDim = decltype(dim_tag)::value;

        prefill_attention_kernel<kDtype, kHeadDim>
            <<<g.grid, kThreads, PrefillShape<kDtype, kHeadDim>::kSmemBytes, stream>>>(
                a, g.slots, soft_cap_inverse(a.softcap));
      });
  return launch_status("prefill_attention");
}

}  // namespace cellm::kernels
