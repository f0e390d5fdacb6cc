// quantize_activations: one warp per block of 32 activations (quantize_activations.cuh), eight
// blocks (256 columns) per CTA; with a norm, every CTA first sums the squares of its row (each CTA
// redoes it: a row is a few KB); with a block output joining the residual, the squares of that
// output's row too. A join of rows up to kMaxShareChunks · 1,024 floats, 16-byte aligned, holds
// each thread's share of the residual, the output and its norm weight in registers from one round
// of loads, so the joined row's squares need no second trip to L2.
#include <string>

#include "backends/cuda/kernels/launch_status.h"
#include "backends/cuda/kernels/op_math.cuh"
#include "backends/cuda/kernels/pdl.cuh"
#include "backends/cuda/kernels/quantize_activations.cuh"

namespace cellm::kernels {
namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;

// The sum of every thread's `value` over the CTA, returned to each; `partial` (kWarps doubles of
// shared memory) is free again when it returns.
__device__ double cta_sum(double value, double* partial) {
  for (int offset = 16; offset > 0; offset >>= 1)
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = value;
  __syncthreads();
  double total = 0.0;
  for (int w = 0; w < kWarps; ++w) total += partial[w];
  __syncthreads();
  return total;
}

// This thread's share of Σ x² over a row of num_cols floats (squares rounded to f32, as
// cpu_rms_norm sums), by float4 loads where the row is 16-byte aligned.
__device__ double share_of_sum_squares(const float* x, int64_t num_cols) {
  if (reinterpret_cast<uintptr_t>(x) % 16 == 0) return row_sum_squares_share<kThreads>(x, num_cols);
  double sum = 0.0;
  for (int64_t i = threadIdx.x; i < num_cols; i += kThreads) {
    sum += static_cast<double>(__fmul_rn(x[i], x[i]));
  }
  return sum;
}

// Element i of the residual after the block's output joined it: x + (add · add_scale) · weight.
__device__ __forceinline__ float joined(float x, float add, float add_scale, float weight) {
  return __fadd_rn(x, __fmul_rn(__fmul_rn(add, add_scale), weight));
}

// The most float4 chunks a thread holds of each row a join reads (rows of up to 8,192 floats).
constexpr int kMaxShareChunks = 8;

// A thread's share of a row in registers: chunk c holds elements 4 · (threadIdx.x + c · kThreads)
// to + 3, the order row_sum_squares_share sums in; a chunk past the row reads the row's first four
// (not summed). The row is 16-byte aligned.
template <int kChunks>
struct RowShare {
  float4 v[kChunks];

  __device__ __forceinline__ static int64_t chunk_start(int c) {
    return 4 * (static_cast<int64_t>(threadIdx.x) + static_cast<int64_t>(c) * kThreads);
  }
  __device__ __forceinline__ static bool chunk_in_row(int c, int64_t num_cols) {
    return chunk_start(c) < num_cols;
  }
  __device__ __forceinline__ void load(const float* row, int64_t num_cols) {
    CELLM_UNROLL
    for (int c = 0; c < kChunks; ++c) {
      v[c] = load_f4(row + (chunk_in_row(c, num_cols) ? chunk_start(c) : 0));
    }
  }
};

// sum + the squares of v's four elements, added one at a time as row_sum_squares_share adds them.
__device__ __forceinline__ double add_squares(double sum, float4 v) {
  sum += static_cast<double>(__fmul_rn(v.x, v.x));
  sum += static_cast<double>(__fmul_rn(v.y, v.y));
  sum += static_cast<double>(__fmul_rn(v.z, v.z));
  return sum + static_cast<double>(__fmul_rn(v.w, v.w));
}

// Grid: (column blocks of kWarps quantization blocks, row). kShareChunks > 0: a join whose rows'
// shares fit that many chunks (launch_quantize_activations checks the size and the alignment);
// 0: every other case, the join's rows read twice.
template <int kShareChunks>
__global__ void __launch_bounds__(kThreads)
    quantize_activations_kernel(const QuantizeActivationsParams p) {
  pdl_trigger_at_start(p.trigger);
  const int64_t blocks_per_row = p.num_cols / 32;
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  // This lane's element e and its norm weight (a weight: loaded before pdl_wait()); the element
  // itself is loaded before the norm's reduction, so no round trip follows it.
  const int64_t block = static_cast<int64_t>(blockIdx.x) * kWarps + warp;
  const int64_t e = block * 32 + lane;
  const bool in_row = block < blocks_per_row;
  const float w = in_row && p.norm_weight != nullptr ? p.norm_weight[e] : 1.0f;
  const float add_w = in_row && p.add != nullptr ? p.add_norm_weight[e] : 1.0f;
  constexpr int kChunks = kShareChunks > 0 ? kShareChunks : 1;
  RowShare<kChunks> add_w_share;  // the joined row's squares need the output's norm weight
  if (kShareChunks > 0 && p.norm_weight != nullptr) add_w_share.load(p.add_norm_weight, p.num_cols);
  pdl_wait_then_trigger(p.trigger);
  const int64_t t = blockIdx.y;
  const int64_t source_row = p.x_rows != nullptr ? p.x_rows[t] : t;
  const float* x = p.x + source_row * p.x_stride;
  float v = in_row ? x[e] : 0.0f;
  if (p.up != nullptr && in_row) v = silu_mul(v, p.up[t * p.x_stride + e]);
  __shared__ double partial[kWarps];
  float norm_scale = 1.0f;
  if constexpr (kShareChunks > 0) {
    // The join from registers: the output's and the residual's shares loaded together, the
    // joined squares summed from them.
    const float* add = p.add + source_row * p.add_stride;
    const float add_value = in_row ? add[e] : 0.0f;
    RowShare<kChunks> add_share;
    RowShare<kChunks> x_share;
    add_share.load(add, p.num_cols);
    if (p.norm_weight != nullptr) x_share.load(x, p.num_cols);
    double add_sum = 0.0;
    CELLM_UNROLL
    for (int c = 0; c < kChunks; ++c) {
      if (RowShare<kChunks>::chunk_in_row(c, p.num_cols))
        add_sum = add_squares(add_sum, add_share.v[c]);
    }
    const float add_scale = rms_inverse(cta_sum(add_sum, partial), p.num_cols, p.norm_eps);
    if (in_row) {
      v = joined(v, add_value, add_scale, add_w);
      p.x_out[t * p.num_cols + e] = v;
    }
    if (p.norm_weight != nullptr) {
      double sum = 0.0;
      CELLM_UNROLL
      for (int c = 0; c < kChunks; ++c) {
        if (!RowShare<kChunks>::chunk_in_row(c, p.num_cols)) continue;
        const float4 xs = x_share.v[c];
        const float4 as = add_share.v[c];
        const float4 ws = add_w_share.v[c];
        sum = add_squares(
            sum,
            make_float4(joined(xs.x, as.x, add_scale, ws.x), joined(xs.y, as.y, add_scale, ws.y),
                        joined(xs.z, as.z, add_scale, ws.z), joined(xs.w, as.w, add_scale, ws.w)));
      }
      norm_scale = rms_inverse(cta_sum(sum, partial), p.num_cols, p.norm_eps);
    }
  } else if (p.add != nullptr) {
    // The block's output normed, added: every CTA sums the whole row (a few KB from L2), so the
    // norm below sees the joined row, which only x_out holds afterwards.
    const float* add = p.add + source_row * p.add_stride;
    const float add_value = in_row ? add[e] : 0.0f;
    const float add_scale = rms_inverse(cta_sum(share_of_sum_squares(add, p.num_cols), partial),
                                        p.num_cols, p.norm_eps);
    if (in_row) {
      v = joined(v, add_value, add_scale, add_w);
      p.x_out[t * p.num_cols + e] = v;
    }
    if (p.norm_weight != nullptr) {
      double sum = 0.0;
#pragma unroll 4
      for (int64_t i = threadIdx.x; i < p.num_cols; i += kThreads) {
        const float joined_i = joined(x[i], add[i], add_scale, p.add_norm_weight[i]);
        sum += static_cast<double>(__fmul_rn(joined_i, joined_i));
      }
      norm_scale = rms_inverse(cta_sum(sum, partial), p.num_cols, p.norm_eps);
    }
  } else if (p.norm_weight != nullptr) {
    norm_scale =
        rms_inverse(cta_sum(share_of_sum_squares(x, p.num_cols), partial), p.num_cols, p.norm_eps);
  }
  if (!in_row) return;
  if (p.norm_weight != nullptr) v = __fmul_rn(__fmul_rn(v, norm_scale), w);
  float amax = fabsf(v);
  for (int offset = 16; offset > 0; offset >>= 1) {
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, offset));
  }
  if (p.per_256) {  // the CTA's eight blocks are one 256 (K % 256 == 0: all of them in the row)
    __shared__ float block_max[kWarps];
    if (lane == 0) block_max[warp] = amax;
    __syncthreads();
    for (int w = 0; w < kWarps; ++w) amax = fmaxf(amax, block_max[w]);
  }
  const float scale = q8_block_scale(amax);
  const int8_t q = q8_quantize(v, scale);
  p.q[t * p.num_cols + interleaved_q8_offset(e)] = q;
  if (lane == 0) p.scales[t * blocks_per_row + block] = scale;
  if (p.sums != nullptr) {
    int sum = q;
    for (int offset = 16; offset > 0; offset >>= 1)
      sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    if (lane == 0) p.sums[t * blocks_per_row + block] = sum;
  }
}

}  // namespace

Status launch_quantize_activations(const QuantizeActivationsParams& p, cudaStream_t stream) {
  if (p.num_tokens < 0 || p.num_cols <= 0 || p.num_cols % 256 != 0 || p.x_stride < p.num_cols ||
      (p.num_tokens > 0 && (p.x == nullptr || p.q == nullptr || p.scales == nullptr)) ||
      reinterpret_cast<uintptr_t>(p.q) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(p.scales) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(p.sums) % alignof(int32_t) != 0 || p.num_tokens > 65535 ||
      (p.up != nullptr && (p.x_rows != nullptr || p.norm_weight != nullptr))) {
    return invalid_argument("quantize_activations: " + std::to_string(p.num_tokens) + " rows of " +
                            std::to_string(p.num_cols) + " (a multiple of 256), stride " +
                            std::to_string(p.x_stride) +
                            ", a null or unaligned pointer, or SwiGLU with a gather or norm");
  }
  if (p.add != nullptr && (p.add_norm_weight == nullptr || p.x_out == nullptr || p.x_out == p.x ||
                           p.up != nullptr || p.add_stride < p.num_cols)) {
    return invalid_argument(
        "quantize_activations: a block output joining the residual needs its "
        "norm weight, an x_out apart from x, add stride " +
        std::to_string(p.add_stride) + " ≥ " + std::to_string(p.num_cols) + " and no SwiGLU");
  }
  if (p.num_tokens == 0) return ok_status();
  const dim3 grid(static_cast<unsigned>(ceil_div(p.num_cols / 32, kWarps)),
                  static_cast<unsigned>(p.num_tokens));
  const auto aligned = [](const float* rows, int64_t stride) {
    return reinterpret_cast<uintptr_t>(rows) % 16 == 0 && stride % 4 == 0;
  };
  const int64_t share_chunks = ceil_div(p.num_cols, int64_t{4} * kThreads);
  const bool join_in_registers = p.add != nullptr && share_chunks <= kMaxShareChunks &&
                                 aligned(p.x, p.x_stride) && aligned(p.add, p.add_stride) &&
                                 aligned(p.add_norm_weight, 0);
  auto* kernel = !join_in_registers  ? quantize_activations_kernel<0>
                 : share_chunks <= 4 ? quantize_activations_kernel<4>
                                     : quantize_activations_kernel<kMaxShareChunks>;
  return pdl_launch_status(launch_pdl(kernel, grid, dim3(kThreads), 0, stream, p),
                           "quantize_activations");
}

}  // namespace cellm::kernels
