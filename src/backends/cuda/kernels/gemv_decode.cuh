// gemv_decode: the kernel template behind decode_matmul.cuh, instantiated per weight type in
// gemv_decode_<types>.cu (small translation units). Device code; include only from .cu files.
//
// The rows are cut into row groups of R output rows (kSwiglu: R/2 gate rows and the R/2 up rows
// that pair with them), all M ≤ 8 tokens. A block of kDecodeThreads threads runs groups
// blockIdx.x, + gridDim.x, ... (one group per block unless the input has a per-block prologue:
// then the grid is capped near the SMs' capacity, decode_grid_blocks, so the prologue is paid
// once for several groups). Thread t owns chunks t, t + 128, ... of each row (weight_decode.cuh's
// unit: 16-byte loads, a warp's activation loads coalesced) and keeps D chunks per row in
// flight: it refills a chunk's registers right after using them — past the end of a group with
// the next group's first chunks, so the weight stream does not stop at the group's reduction.
// The first D chunks are loaded before pdl_wait(), i.e. while the previous kernel may still run.
// Partial sums are reduced through warp shuffles and shared memory in a fixed order
// (deterministic), then the epilogue adds the bias and stores, adds, applies SwiGLU or RoPE + the
// K/V cache write. The input policies are gemv_decode_inputs.cuh's.
#pragma once

#include <type_traits>

#include "backends/cuda/kernels/decode_matmul.cuh"
#include "backends/cuda/kernels/gemv_decode_args.h"
#include "backends/cuda/kernels/gemv_decode_inputs.cuh"
#include "backends/cuda/kernels/gemv_reduce.cuh"
#include "backends/cuda/kernels/op_math.cuh"
#include "backends/cuda/kernels/pdl.cuh"
#include "backends/cuda/kernels/rope_kv_output.cuh"
#include "backends/cuda/kernels/weight_decode.cuh"

namespace cellm::kernels {

// ---- 16-bit float weights with 16-byte chunks: 8 elements, two groups of 4 ----------------

template <bool kBF16>
struct DecodeHalf8 : FloatDecoderBase<8> {
  using Chunk = uint4;
  __device__ __forceinline__ static Chunk load(const uint8_t* row, int64_t /*num_cols*/,
                                               int64_t c) {
    return load_stream_u4(row + 16 * c);
  }
  __device__ __forceinline__ static void group(const Chunk& w, int g, int64_t /*c*/,
                                               GroupValues* out) {
    const uint32_t a = g == 0 ? w.x : w.z;
    const uint32_t b = g == 0 ? w.y : w.w;
    out->q[0] = half_value<kBF16>(a, 0);
    out->q[1] = half_value<kBF16>(a, 1);
    out->q[2] = half_value<kBF16>(b, 0);
    out->q[3] = half_value<kBF16>(b, 1);
    unit_scale(out);
  }
};
using DecodeBF16x8 = DecodeHalf8<true>;
using DecodeF16x8 = DecodeHalf8<false>;

// ---- row groups ----------------------------------------------------------------------------

// Whether the product's rows are [gate; up] pairs (kSwiglu, kSwigluHandover).
CELLM_HD_INLINE bool decode_output_pairs_rows(DecodeOutput output) {
  return output == DecodeOutput::kSwiglu || output == DecodeOutput::kSwigluHandover;
}

// How many row groups of R rows (SwiGLU: R/2 pairs) the product has.
template <int R>
CELLM_HD_INLINE int64_t decode_row_groups(const DecodeGemvArgs& a) {
  return decode_output_pairs_rows(a.output) ? ceil_div(a.num_rows / 2, R / 2)
                                            : ceil_div(a.num_rows, R);
}

// Weight row of local row r (0 ≤ r < R) of row group `group`; *valid is false past the matrix.
template <int R>
__device__ __forceinline__ int64_t decode_group_row(const DecodeGemvArgs& a, int64_t group, int r,
                                                    bool* valid) {
  if (decode_output_pairs_rows(a.output)) {
    const int64_t half = a.num_rows / 2;
    const int64_t j = group * (R / 2) + (r % (R / 2));
    *valid = j < half;
    return (r < R / 2 ? 0 : half) + j;
  }
  const int64_t row = group * R + r;
  *valid = row < a.num_rows;
  return row;
}

// The weight rows of a group (rows past the matrix read row 0: loaded, never stored).
template <int R>
__device__ __forceinline__ void decode_group_rows(const DecodeGemvArgs& a, int64_t group,
                                                  const uint8_t* (&rows)[R]) {
  CELLM_UNROLL
  for (int r = 0; r < R; ++r) {
    bool valid = false;
    const int64_t row = decode_group_row<R>(a, group, r, &valid);
    rows[r] = a.w + (valid ? row : 0) * static_cast<int64_t>(a.row_bytes);
  }
}

// ---- epilogue --------------------------------------------------------------------------------

// Writes a row group's results; sums[r * M + t] is local row r's product for token t, bias added.
template <int R, int M>
__device__ __forceinline__ void decode_epilogue(const DecodeGemvArgs& a, int64_t group,
                                                const float* sums) {
  const int tid = threadIdx.x;
  if (a.output == DecodeOutput::kStore) {
    if (tid >= R * M) return;
    const int r = tid / M;
    const int t = tid % M;
    bool valid = false;
    const int64_t row = decode_group_row<R>(a, group, r, &valid);
    if (!valid || t >= a.num_tokens) return;
    float* out = a.y + t * a.y_stride + row;
    *out = a.accumulate ? *out + sums[tid] : sums[tid];
    return;
  }
  if (tid >= (R / 2) * M) return;
  const int p = tid / M;  // pair
  const int t = tid % M;
  if (t >= a.num_tokens) return;
  if (a.output == DecodeOutput::kSwiglu) {
    const int64_t j = group * (R / 2) + p;
    if (j >= a.num_rows / 2) return;
    const float g = sums[p * M + t];
    const float u = sums[(R / 2 + p) * M + t];
    a.y[t * a.y_stride + j] = a.gelu_tanh ? gelu_tanh_mul(g, u) : silu_mul(g, u);
    return;
  }
  // kRopeKv: local rows 2p and 2p + 1 are a pair of one head (head_dim, widths even).
  const int64_t row = group * R + 2 * p;
  if (row >= a.num_rows) return;  // num_rows is even: row + 1 is in range too
  rope_kv_store_pair(a.rope, t, row, sums[2 * p * M + t], sums[(2 * p + 1) * M + t], a.y,
                     a.y_stride);
}

// ---- the kernel ------------------------------------------------------------------------------

// The blocks per SM a kernel is held to (its registers: 65,536 / (128 · blocks)) where the
// compiler's choice lets fewer share an SM, and so keeps fewer bytes in flight; 0: the compiler's
// choice (a minimum of one block would let it take up to 255 registers). The int8 kernels of
// four rows, H200, Llama-3.1-8B geometry, same-call pairs:
// - one token: Q8_0 six (80 registers; five at 96: batch-1 step 2.563 → 2.546 ms on average over
//   six pairs; seven at 72: 2.567–2.590; eight spill), Q4_K eight (64 registers, 78 before: q4_k
//   2.094–2.100 → 2.001–2.003 ms, q4_k_m 2.238–2.240 → 2.154–2.157), Q6_K six (80 registers, 96
//   before: q6_k 2.372–2.375 → 2.314–2.315; seven and eight spill); Q4_0 takes 64 by itself;
// - two tokens: Q4_0 seven (72 registers, 80 before: q4_0 at two sessions 800–808 → 807–822
//   tok/s over three pairs; eight spill).
template <class Decoder, int R, int M, class Input>
constexpr int decode_min_blocks_per_sm() {
  constexpr bool kInt8Launched = std::is_base_of_v<DecodeInt8Input, Input>;
  if constexpr (requires { Decoder::kMinBlocksPerSm; }) {
    return Decoder::kMinBlocksPerSm;  // a decoder's own (decode_lane_q4_0.cuh)
  } else if constexpr (R != 4 || !kInt8Launched) {
    return 0;
  } else if constexpr (M == 2) {
    return std::is_same_v<Decoder, DecodeQ4_0> ? 7 : 0;
  } else if constexpr (M != 1) {
    return 0;
  } else if constexpr (std::is_same_v<Decoder, DecodeQ4_K>) {
    return 8;
  } else if constexpr (std::is_same_v<Decoder, DecodeQ8_0> || std::is_same_v<Decoder, DecodeQ6_K>) {
    return 6;
  } else {
    return 0;
  }
}

template <class Decoder, int R, int M, int D, class Input>
__global__ void __launch_bounds__(kDecodeThreads,
                                  (decode_min_blocks_per_sm<Decoder, R, M, Input>()))
    gemv_decode_kernel(const DecodeGemvArgs a) {
  static_assert(R % 2 == 0, "pairs (SwiGLU, RoPE) need an even number of rows per block");
  pdl_trigger_at_start(a.trigger);
  const int64_t num_groups = decode_row_groups<R>(a);
  const int64_t num_chunks = a.num_cols / Decoder::kChunkElems;
  const int64_t first = threadIdx.x;
  constexpr int64_t kStep = static_cast<int64_t>(D) * kDecodeThreads;
  int64_t group = blockIdx.x;
  const uint8_t* rows[R];
  decode_group_rows<R>(a, group, rows);

  // Weights first: nothing earlier writes them.
  typename Decoder::Chunk chunks[D][R];
  CELLM_UNROLL
  for (int d = 0; d < D; ++d) {
    const int64_t c = first + d * kDecodeThreads;
    if (c < num_chunks) {
      CELLM_UNROLL
      for (int r = 0; r < R; ++r) chunks[d][r] = Decoder::load(rows[r], a.num_cols, c);
    }
  }
  pdl_wait_then_trigger(a.trigger);

  typename Input::template State<M> state;
  Input::template prepare<M>(a, state);
  __shared__ float partial[kDecodeWarps][R * M];
  __shared__ float sums[R * M];
  while (true) {  // blockIdx.x < num_groups: the grid has at most one block per group
    const int64_t next_group = group + gridDim.x;
    // One group per block without a prologue (the compiler drops the cross-group refill).
    const bool has_next = Input::kPrologue && next_group < num_groups;
    const uint8_t* next_rows[R];
    decode_group_rows<R>(a, has_next ? next_group : group, next_rows);
    float acc[R][M];
    CELLM_UNROLL
    for (int r = 0; r < R; ++r) {
      CELLM_UNROLL
      for (int t = 0; t < M; ++t) acc[r][t] = 0.0f;
    }
    for (int64_t base = first; base < num_chunks; base += kStep) {
      CELLM_UNROLL
      for (int d = 0; d < D; ++d) {
        const int64_t c = base + d * kDecodeThreads;
        if (c < num_chunks) {
          Input::template accumulate<Decoder, R, M>(chunks[d], a, state, c, acc);
          // Refill: the slot's next chunk of this group, else its first chunk of the next group
          // (first + d · threads, below num_chunks since c is).
          const int64_t next = c + kStep;
          if (next < num_chunks) {
            CELLM_UNROLL
            for (int r = 0; r < R; ++r) chunks[d][r] = Decoder::load(rows[r], a.num_cols, next);
          } else if (has_next) {
            CELLM_UNROLL
            for (int r = 0; r < R; ++r) {
              chunks[d][r] = Decoder::load(next_rows[r], a.num_cols, first + d * kDecodeThreads);
            }
          }
        }
      }
    }

    // partial and sums are free: every thread passed the previous group's barriers.
    warp_partials<R, M>(acc, partial);
    __shared__ double norm_partial[kDecodeWarps];
    if constexpr (kNormedAfter<Input>) Input::template reduce_norm<M>(state, norm_partial);
    __syncthreads();
    if (threadIdx.x < R * M) {
      float sum = block_sum(partial, static_cast<int>(threadIdx.x));
      if constexpr (kNormedAfter<Input>) sum *= Input::norm_scale(a, norm_partial);
      if (a.bias != nullptr) {
        bool valid = false;
        const int64_t row =
            decode_group_row<R>(a, group, static_cast<int>(threadIdx.x) / M, &valid);
        if (valid) sum += a.bias[row];
      }
      sums[threadIdx.x] = sum;
    }
    __syncthreads();
    decode_epilogue<R, M>(a, group, sums);
    if (!has_next) return;
    group = next_group;
    CELLM_UNROLL
    for (int r = 0; r < R; ++r) rows[r] = next_rows[r];
  }
}

// The grid of a product of `num_groups` row groups: one block per group, or for inputs with a
// per-block prologue (prologue_blocks_per_sm > 0: how many of the kernel's blocks fit an SM) at
// most kDecodeBlocksPerSm of them per SM (CELLM_CUDA_DECODE_BLOCKS_PER_SM in the environment
// overrides it; 0: one per group), each running an equal share of the groups: one wave.
int64_t decode_grid_blocks(int64_t num_groups, int prologue_blocks_per_sm);

// Dynamic shared memory that holds the row-group kernel (on inputs without shared memory of their
// own) to CELLM_CUDA_DECODE_MAX_BLOCKS_PER_SM = N ∈ [5, 7] blocks a SM, leaving the rest of the SM
// to the kernel after it (programmatic dependent launch); 0 unset (for measurements).
size_t decode_occupancy_pad_bytes();

// The kernel for M token rows, launched on its grid.
template <class Decoder, int R, int M, int D, class Input>
cudaError_t launch_gemv_decode_m(const DecodeGemvArgs& a, cudaStream_t stream) {
  const auto kernel = gemv_decode_kernel<Decoder, R, M, D, Input>;
  size_t smem_bytes = Input::smem_bytes(a, M);
  if (smem_bytes == 0) smem_bytes = decode_occupancy_pad_bytes();
  int fit = 0;
  if constexpr (Input::kPrologue) {
    const cudaError_t error =
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fit, kernel, kDecodeThreads, smem_bytes);
    if (error != cudaSuccess) return error;
  }
  const dim3 grid(static_cast<unsigned>(decode_grid_blocks(decode_row_groups<R>(a), fit)));
  return launch_pdl(kernel, grid, dim3(kDecodeThreads), smem_bytes, stream, a);
}

// Launches the instantiation for the smallest M ∈ {1, 2, 4, 8} covering a.num_tokens.
template <class Decoder, int R, int D, class Input>
cudaError_t launch_gemv_decode_typed(const DecodeGemvArgs& a, cudaStream_t stream) {
  if (a.num_tokens <= 1) return launch_gemv_decode_m<Decoder, R, 1, D, Input>(a, stream);
  if (a.num_tokens <= 2) return launch_gemv_decode_m<Decoder, R, 2, D, Input>(a, stream);
  if (a.num_tokens <= 4) return launch_gemv_decode_m<Decoder, R, 4, D, Input>(a, stream);
  return launch_gemv_decode_m<Decoder, R, 8, D, Input>(a, stream);
}

// f32 input with or without the RMSNorm prologue.
template <class Decoder, int R, int D>
cudaError_t launch_gemv_decode_f32(const DecodeGemvArgs& a, cudaStream_t stream) {
  return a.norm_weight != nullptr
             ? launch_gemv_decode_typed<Decoder, R, D, DecodeF32Input<true>>(a, stream)
             : launch_gemv_decode_typed<Decoder, R, D, DecodeF32Input<false>>(a, stream);
}

// The per-type launchers (gemv_decode_<types>.cu); the input kind is read from the args.
cudaError_t launch_gemv_decode_f32_weights(const DecodeGemvArgs& a, cudaStream_t stream);
cudaError_t launch_gemv_decode_f16(const DecodeGemvArgs& a, cudaStream_t stream);
cudaError_t launch_gemv_decode_bf16(const DecodeGemvArgs& a, cudaStream_t stream);
cudaError_t launch_gemv_decode_q8_0(const DecodeGemvArgs& a, cudaStream_t stream);
cudaError_t launch_gemv_decode_q4_0(const DecodeGemvArgs& a, cudaStream_t stream);
cudaError_t launch_gemv_decode_q4_k(const DecodeGemvArgs& a, cudaStream_t stream);
cudaError_t launch_gemv_decode_q6_k(const DecodeGemvArgs& a, cudaStream_t stream);
// kAddHandover products (gemv_handover.cu).
cudaError_t launch_gemv_handover_q8_0(const DecodeGemvArgs& a, cudaStream_t stream);
cudaError_t launch_gemv_handover_q4_0(const DecodeGemvArgs& a, cudaStream_t stream);
// kSwigluHandover products (gemv_swiglu_handover.cu).
cudaError_t launch_gemv_swiglu_handover_q8_0(const DecodeGemvArgs& a, cudaStream_t stream);
cudaError_t launch_gemv_swiglu_handover_q4_0(const DecodeGemvArgs& a, cudaStream_t stream);

}  // namespace cellm::kernels
