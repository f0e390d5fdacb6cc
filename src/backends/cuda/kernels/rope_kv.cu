// rope_kv: blocks (token, group of 4 heads) (rope_kv.cuh). Each block computes the token's cos/sin
// table into shared memory (or copies it from the step's table); each warp then takes one head:
// copies it into shared memory, normalizes it if asked, rotates the pairs and writes the result (Q
// in place, K into its cache row), or copies a V head into its cache row. The per-step table: one
// block per token, a thread per pair.
#include <string>

#include "backends/cuda/kernels/kernel_common.cuh"
#include "backends/cuda/kernels/launch_status.h"
#include "backends/cuda/kernels/op_math.cuh"
#include "backends/cuda/kernels/pdl.cuh"
#include "backends/cuda/kernels/rope_kv.cuh"

namespace cellm::kernels {
namespace {

constexpr int kWarps = 4;

__device__ double warp_sum(double v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__global__ void __launch_bounds__(kWarps * 32) rope_kv_kernel(const RopeKvParams p) {
  __shared__ float cos_table[kRopeMaxHeadDim / 2];
  __shared__ float sin_table[kRopeMaxHeadDim / 2];
  __shared__ float head_buffer[kWarps][kRopeMaxHeadDim];
  pdl_launch_dependents();
  const int t = blockIdx.x;
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int32_t num_pairs = p.num_rotary_dims / 2;
  if (p.cos_sin == nullptr) {
    // The angles before pdl_wait(): positions come from host copies, not from an earlier kernel.
    for (int32_t i = threadIdx.x; i < num_pairs; i += kWarps * 32) {
      rope_cos_sin(p.positions[t], i, p.num_rotary_dims, p.freq_base, p.freq_scale, p.freq_factors,
                   p.attn_factor, &cos_table[i], &sin_table[i]);
    }
    pdl_wait();
  } else {
    pdl_wait();  // the table comes from an earlier kernel of the step
    for (int32_t i = threadIdx.x; i < num_pairs; i += kWarps * 32) {
      const float2 cs = p.cos_sin[static_cast<int64_t>(t) * num_pairs + i];
      cos_table[i] = cs.x;
      sin_table[i] = cs.y;
    }
  }
  __syncthreads();

  const int32_t num_q = p.q != nullptr ? p.num_heads : 0;
  const int32_t num_k = p.k != nullptr ? p.num_kv_heads : 0;
  const bool neox = p.style == RopeStyle::kNeox;
  const int32_t partner = neox ? num_pairs : 1;
  const int64_t cell = num_k > 0 ? p.cells[t] : 0;
  float* buffer = head_buffer[warp];
  // Units: the q heads, the k heads (rotated), then the v heads (copied); block y's warp w takes
  // unit kWarps · y + w.
  const int32_t unit = static_cast<int32_t>(blockIdx.y) * kWarps + warp;
  if (unit < num_q + num_k) {
    const int32_t hh = unit;
    const bool is_q = hh < num_q;
    const int32_t h = is_q ? hh : hh - num_q;
    const float* src =
        is_q ? p.q + t * p.q_stride + h * p.head_dim : p.k + t * p.k_stride + h * p.head_dim;
    const float* norm = is_q ? p.q_norm : p.k_norm;
    double sum = 0.0;
    for (int32_t d = lane; d < p.head_dim; d += 32) {
      const float x = src[d];
      buffer[d] = x;
      sum += static_cast<double>(__fmul_rn(x, x));
    }
    if (norm != nullptr) {
      sum = warp_sum(sum);
      const float scale = rms_inverse(sum, p.head_dim, p.norm_eps);
      for (int32_t d = lane; d < p.head_dim; d += 32) {
        buffer[d] = __fmul_rn(__fmul_rn(buffer[d], scale), norm[d]);
      }
    }
    __syncwarp();
    float* q_out = is_q ? p.q + t * p.q_stride + h * p.head_dim : nullptr;
    const int64_t k_base = (cell * p.num_kv_heads + h) * p.head_dim;
    const auto write = [&](int32_t d, float value) {
      if (is_q) {
        q_out[d] = value;
      } else {
        store_cache_value(p.k_cache, p.cache_dtype, k_base + d, value);
      }
    };
    for (int32_t i = lane; i < num_pairs; i += 32) {
      const int32_t first = neox ? i : 2 * i;
      const float x0 = buffer[first];
      const float x1 = buffer[first + partner];
      float y0 = 0.0f;
      float y1 = 0.0f;
      rope_rotate(x0, x1, cos_table[i], sin_table[i], &y0, &y1);
      write(first, y0);
      write(first + partner, y1);
    }
    for (int32_t d = p.num_rotary_dims + lane; d < p.head_dim; d += 32) write(d, buffer[d]);
  } else if (unit < num_q + 2 * num_k) {
    const int32_t h = unit - num_q - num_k;
    const float* src = p.v + t * p.v_stride + h * p.value_head_dim;
    const int64_t base = (cell * p.num_kv_heads + h) * p.value_head_dim;
    for (int32_t d = lane; d < p.value_head_dim; d += 32) {
      store_cache_value(p.v_cache, p.cache_dtype, base + d, src[d]);
    }
  }
}

// Block t: token t's pairs (the angles before pdl_wait(): positions come from host copies).
__global__ void __launch_bounds__(kWarps * 32) rope_table_kernel(const RopeTableParams p) {
  pdl_launch_dependents();
  const int t = blockIdx.x;
  const int32_t num_pairs = p.num_rotary_dims / 2;
  float c[kRopeMaxHeadDim / 2 / (kWarps * 32)];
  float s[kRopeMaxHeadDim / 2 / (kWarps * 32)];
  CELLM_UNROLL
  for (int j = 0; j < kRopeMaxHeadDim / 2 / (kWarps * 32); ++j) {
    const int32_t i = static_cast<int32_t>(threadIdx.x) + j * kWarps * 32;
    if (i < num_pairs) {
      rope_cos_sin(p.positions[t], i, p.num_rotary_dims, p.freq_base, p.freq_scale, p.freq_factors,
                   p.attn_factor, &c[j], &s[j]);
    }
  }
  pdl_wait();  // the previous step's products may still read the table
  CELLM_UNROLL
  for (int j = 0; j < kRopeMaxHeadDim / 2 / (kWarps * 32); ++j) {
    const int32_t i = static_cast<int32_t>(threadIdx.x) + j * kWarps * 32;
    if (i < num_pairs) p.table[t * num_pairs + i] = make_float2(c[j], s[j]);
  }
}

}  // namespace

Status launch_rope_kv(const RopeKvParams& p, cudaStream_t stream) {
  const bool has_q = p.q != nullptr;
  const bool has_kv = p.k != nullptr;
  bool ok = p.num_tokens >= 0 && p.head_dim > 0 && p.head_dim <= kRopeMaxHeadDim &&
            p.num_rotary_dims >= 0 && p.num_rotary_dims % 2 == 0 &&
            p.num_rotary_dims <= p.head_dim && (p.num_tokens == 0 || p.positions != nullptr);
  if (has_q) {
    ok = ok && p.num_heads > 0 && p.q_stride >= static_cast<int64_t>(p.num_heads) * p.head_dim;
  }
  if (has_kv) {
    ok = ok && p.num_kv_heads > 0 && p.value_head_dim > 0 && p.v != nullptr && p.cells != nullptr &&
         p.k_cache != nullptr && p.v_cache != nullptr &&
         p.k_stride >= static_cast<int64_t>(p.num_kv_heads) * p.head_dim &&
         p.v_stride >= static_cast<int64_t>(p.num_kv_heads) * p.value_head_dim;
  }
  if (!ok) {
    return invalid_argument(
        "rope_kv: " + std::to_string(p.num_tokens) + " tokens, head_dim " +
        std::to_string(p.head_dim) + " (at most " + std::to_string(kRopeMaxHeadDim) + "), " +
        std::to_string(p.num_rotary_dims) + " rotary dims, heads q " + std::to_string(p.num_heads) +
        " kv " + std::to_string(p.num_kv_heads) + ": a bad size, stride or null pointer");
  }
  if (p.num_tokens == 0 || (!has_q && !has_kv)) return ok_status();
  const int64_t units = (has_q ? p.num_heads : 0) + (has_kv ? 2 * int64_t{p.num_kv_heads} : 0);
  const dim3 grid(static_cast<unsigned>(p.num_tokens),
                  static_cast<unsigned>(ceil_div(units, kWarps)));
  return pdl_launch_status(launch_pdl(rope_kv_kernel, grid, dim3(kWarps * 32), 0, stream, p),
                           "rope_kv");
}

Status launch_rope_table(const RopeTableParams& p, cudaStream_t stream) {
  if (p.num_tokens < 0 || p.num_tokens > 65535 || p.num_rotary_dims <= 0 ||
      p.num_rotary_dims % 2 != 0 || p.num_rotary_dims > kRopeMaxHeadDim ||
      (p.num_tokens > 0 && (p.positions == nullptr || p.table == nullptr))) {
    return invalid_argument("rope_table: " + std::to_string(p.num_tokens) + " tokens, " +
                            std::to_string(p.num_rotary_dims) + " rotary dims (even, at most " +
                            std::to_string(kRopeMaxHeadDim) + "), or a null pointer");
  }
  if (p.num_tokens == 0) return ok_status();
  return pdl_launch_status(launch_pdl(rope_table_kernel, dim3(static_cast<unsigned>(p.num_tokens)),
                                      dim3(kWarps * 32), 0, stream, p),
                           "rope_table");
}

}  // namespace cellm::kernels
