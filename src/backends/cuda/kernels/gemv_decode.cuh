// gemv_decode: the kernel template behind decode_matmul.cuh, instantiated per weight type in
// gemv_decode_<types>.cu (small translation units). Device code; include only from .cu files.
//
// A block of kDecodeThreads threads owns R output rows (kSwiglu: R/2 gate rows and the R/2 up
// rows that pair with them) for all M ≤ 8 tokens. Thread t owns chunks t, t + 128, ... of each
// row (weight_decode.cuh's unit: 16-byte loads, a warp's activation loads coalesced) and keeps D
// chunks per row in flight: it refills a chunk's registers right after using them. The first D
// chunks are loaded before pdl_wait(), i.e. while the previous kernel may still run. Partial sums
// are reduced through warp shuffles and shared memory in a fixed order (deterministic), then the
// epilogue adds the bias and stores, adds, applies SwiGLU or RoPE + the K/V cache write.
#pragma once

#include "backends/cuda/kernels/decode_matmul.cuh"
#include "backends/cuda/kernels/gemv_decode_args.h"
#include "backends/cuda/kernels/op_math.cuh"
#include "backends/cuda/kernels/pdl.cuh"
#include "backends/cuda/kernels/weight_decode.cuh"

namespace cellm::kernels {

inline constexpr int kDecodeThreads = 128;
inline constexpr int kDecodeWarps = kDecodeThreads / 32;

// ---- 16-bit float weights with 16-byte chunks: 8 elements, two groups of 4 ----------------

template <bool kBF16>
struct DecodeHalf8 {
  static constexpr int kChunkElems = 8;
  static constexpr int kGroups = 2;
  static constexpr bool kScaled = false;
  static constexpr bool kHasMin = false;
  using Chunk = uint4;
  __device__ __forceinline__ static Chunk load(const uint8_t* row, int64_t /*num_cols*/,
                                               int64_t c) {
    return load_stream_u4(row + 16 * c);
  }
  __device__ __forceinline__ static int64_t x_offset(int64_t c, int g) { return 8 * c + 4 * g; }
  __device__ __forceinline__ static float value(uint32_t word, int high) {
    if constexpr (kBF16) {
      return bits_to_float(high ? (word & 0xffff0000u) : (word << 16));
    } else {
      return f16_bits_to_float(static_cast<uint16_t>(high ? word >> 16 : word));
    }
  }
  __device__ __forceinline__ static void group(const Chunk& w, int g, int64_t /*c*/,
                                               GroupValues* out) {
    const uint32_t a = g == 0 ? w.x : w.z;
    const uint32_t b = g == 0 ? w.y : w.w;
    out->q[0] = value(a, 0);
    out->q[1] = value(a, 1);
    out->q[2] = value(b, 0);
    out->q[3] = value(b, 1);
    out->scale = 1.0f;
    out->min = 0.0f;
  }
};
using DecodeBF16x8 = DecodeHalf8<true>;
using DecodeF16x8 = DecodeHalf8<false>;

// ---- rows of a block ------------------------------------------------------------------------

// Weight row of the block's local row r (0 ≤ r < R); *valid is false past the matrix.
template <int R>
__device__ __forceinline__ int64_t decode_block_row(const DecodeGemvArgs& a, int r, bool* valid) {
  if (a.output == DecodeOutput::kSwiglu) {
    const int64_t half = a.num_rows / 2;
    const int64_t j = static_cast<int64_t>(blockIdx.x) * (R / 2) + (r % (R / 2));
    *valid = j < half;
    return (r < R / 2 ? 0 : half) + j;
  }
  const int64_t row = static_cast<int64_t>(blockIdx.x) * R + r;
  *valid = row < a.num_rows;
  return row;
}

// ---- input policies --------------------------------------------------------------------------

// f32 activations, optionally gathered by x_rows and RMS-normalized (kNorm).
template <bool kNorm>
struct DecodeF32Input {
  template <int M>
  struct State {
    const float* x[M];  // token t's input row
    float scale[M];     // its RMS scale (kNorm)
  };

  template <int M>
  __device__ __forceinline__ static void prepare(const DecodeGemvArgs& a, State<M>& s) {
    CELLM_UNROLL
    for (int t = 0; t < M; ++t) {
      const int64_t row = t < a.num_tokens ? (a.x_rows != nullptr ? a.x_rows[t] : t) : 0;
      s.x[t] = a.x + row * a.x_stride;
      s.scale[t] = 1.0f;
    }
    if constexpr (kNorm) {
      // Squares rounded to f32, summed in double (as cpu_rms_norm), per token. The loads of an
      // iteration are unconditional (past the row: its first element, not summed) so they issue
      // together: one L2 round trip per kNormUnroll float4s instead of one per float4.
      constexpr int kNormUnroll = 4;
      constexpr int64_t kNormStep = 4 * kDecodeThreads;
      double sum[M];
      CELLM_UNROLL
      for (int t = 0; t < M; ++t) {
        sum[t] = 0.0;
        if (M > 1 && t >= a.num_tokens) continue;
        for (int64_t base = 4 * static_cast<int64_t>(threadIdx.x); base < a.num_cols;
             base += kNormUnroll * kNormStep) {
          float4 v[kNormUnroll];
          CELLM_UNROLL
          for (int u = 0; u < kNormUnroll; ++u) {
            const int64_t i = base + u * kNormStep;
            v[u] = load_f4(s.x[t] + (i < a.num_cols ? i : 0));
          }
          CELLM_UNROLL
          for (int u = 0; u < kNormUnroll; ++u) {
            if (base + u * kNormStep < a.num_cols) {
              sum[t] += static_cast<double>(__fmul_rn(v[u].x, v[u].x));
              sum[t] += static_cast<double>(__fmul_rn(v[u].y, v[u].y));
              sum[t] += static_cast<double>(__fmul_rn(v[u].z, v[u].z));
              sum[t] += static_cast<double>(__fmul_rn(v[u].w, v[u].w));
            }
          }
        }
      }
      __shared__ double partial[kDecodeWarps][M];
      const int lane = threadIdx.x & 31;
      const int warp = threadIdx.x >> 5;
      CELLM_UNROLL
      for (int t = 0; t < M; ++t) {
        double v = sum[t];
        CELLM_UNROLL
        for (int offset = 16; offset > 0; offset >>= 1) {
          v += __shfl_xor_sync(0xffffffffu, v, offset);
        }
        if (lane == 0) partial[warp][t] = v;
      }
      __syncthreads();
      CELLM_UNROLL
      for (int t = 0; t < M; ++t) {
        double total = 0.0;
        CELLM_UNROLL
        for (int w = 0; w < kDecodeWarps; ++w) total += partial[w][t];
        s.scale[t] = rms_inverse(total, a.num_cols, a.norm_eps);
      }
    }
  }

  // acc[r][t] += Σ over chunk c of w_r · x_t (x_t normalized first with kNorm): the same
  // operations in the same order as accumulate_chunk (gemv_chunk.cuh).
  template <class Decoder, int R, int M>
  __device__ __forceinline__ static void accumulate(const typename Decoder::Chunk (&w)[R],
                                                    const DecodeGemvArgs& a, const State<M>& s,
                                                    int64_t c, float (&acc)[R][M]) {
    CELLM_UNROLL
    for (int g = 0; g < Decoder::kGroups; ++g) {
      GroupValues v[R];
      CELLM_UNROLL
      for (int r = 0; r < R; ++r) Decoder::group(w[r], g, c, &v[r]);
      const int64_t offset = Decoder::x_offset(c, g);
      float4 norm = make_float4(1.0f, 1.0f, 1.0f, 1.0f);
      if constexpr (kNorm) norm = load_f4(a.norm_weight + offset);
      CELLM_UNROLL
      for (int t = 0; t < M; ++t) {
        if (M == 1 || t < a.num_tokens) {  // M = 1: the one token is there
          float4 xv = load_f4(s.x[t] + offset);
          if constexpr (kNorm) {
            xv.x = __fmul_rn(__fmul_rn(xv.x, s.scale[t]), norm.x);
            xv.y = __fmul_rn(__fmul_rn(xv.y, s.scale[t]), norm.y);
            xv.z = __fmul_rn(__fmul_rn(xv.z, s.scale[t]), norm.z);
            xv.w = __fmul_rn(__fmul_rn(xv.w, s.scale[t]), norm.w);
          }
          if constexpr (Decoder::kScaled) {
            const float x_sum = Decoder::kHasMin ? (xv.x + xv.y) + (xv.z + xv.w) : 0.0f;
            CELLM_UNROLL
            for (int r = 0; r < R; ++r) {
              float dot = v[r].q[0] * xv.x;
              dot = fmaf(v[r].q[1], xv.y, dot);
              dot = fmaf(v[r].q[2], xv.z, dot);
              dot = fmaf(v[r].q[3], xv.w, dot);
              acc[r][t] = fmaf(v[r].scale, dot, acc[r][t]);
              if constexpr (Decoder::kHasMin) acc[r][t] = fmaf(-v[r].min, x_sum, acc[r][t]);
            }
          } else {
            CELLM_UNROLL
            for (int r = 0; r < R; ++r) {
              float sum = acc[r][t];
              sum = fmaf(v[r].q[0], xv.x, sum);
              sum = fmaf(v[r].q[1], xv.y, sum);
              sum = fmaf(v[r].q[2], xv.z, sum);
              sum = fmaf(v[r].q[3], xv.w, sum);
              acc[r][t] = sum;
            }
          }
        }
      }
    }
  }
};

// Q8_0 / Q4_0 group words for dp4a: Q8_0's signed bytes as stored; Q4_0's nibbles n as
// unsigned bytes, whose offset −8 is folded into the dp4a's addend (−8 · Σ x, one dp4a per
// token and group, shared by the block's rows).
template <class Decoder>
struct Int8Words;

template <>
struct Int8Words<DecodeQ8_0> {
  static constexpr bool kMinus8 = false;
  __device__ __forceinline__ static uint32_t word(const DecodeQ8_0::Chunk& w, int g) {
    return word_of(g < 4 ? w.qs_lo : w.qs_hi, g & 3);
  }
  __device__ __forceinline__ static uint16_t scale_bits(const DecodeQ8_0::Chunk& w, int g) {
    return half_of(w.d, g);
  }
};

template <>
struct Int8Words<DecodeQ4_0> {
  static constexpr bool kMinus8 = true;
  __device__ __forceinline__ static uint32_t word(const DecodeQ4_0::Chunk& w, int g) {
    return (word_of(w.qs, g >> 1) >> (4 * (g & 1))) & 0x0f0f0f0fu;
  }
  __device__ __forceinline__ static uint16_t scale_bits(const DecodeQ4_0::Chunk& w, int g) {
    return half_of(w.d, g);
  }
};

// int8 activations (quantize_activations.cuh): per group, acc += (d_w · d_x) · Σ q_w q_x —
// the same values as accumulate_chunk_q8 (gemv_chunk.cuh).
struct DecodeInt8Input {
  template <int M>
  struct State {
    const int8_t* x[M];
    const float* scales[M];
  };

  template <int M>
  __device__ __forceinline__ static void prepare(const DecodeGemvArgs& a, State<M>& s) {
    CELLM_UNROLL
    for (int t = 0; t < M; ++t) {
      const int64_t row = t < a.num_tokens ? t : 0;
      s.x[t] = a.x_q8 + row * a.num_cols;
      s.scales[t] = a.x_q8_scales + row * (a.num_cols / 32);
    }
  }

  template <class Decoder, int R, int M>
  __device__ __forceinline__ static void accumulate(const typename Decoder::Chunk (&w)[R],
                                                    const DecodeGemvArgs& a, const State<M>& s,
                                                    int64_t c, float (&acc)[R][M]) {
    using Words = Int8Words<Decoder>;
    CELLM_UNROLL
    for (int t = 0; t < M; ++t) {
      if (M == 1 || t < a.num_tokens) {  // M = 1: the one token is there
        const uint4 lo = load_u4(s.x[t] + 32 * c);
        const uint4 hi = load_u4(s.x[t] + 32 * c + 16);
        const float* block_scales = s.scales[t] + 8 * (c >> 3);
        const float4 s_lo = load_f4(block_scales);
        const float4 s_hi = load_f4(block_scales + 4);
        const float dx[8] = {s_lo.x, s_lo.y, s_lo.z, s_lo.w, s_hi.x, s_hi.y, s_hi.z, s_hi.w};
        CELLM_UNROLL
        for (int g = 0; g < 8; ++g) {
          const uint32_t xw = word_of(g < 4 ? lo : hi, g & 3);
          const int base = Words::kMinus8 ? dp4a(0xf8f8f8f8u, xw, 0) : 0;
          CELLM_UNROLL
          for (int r = 0; r < R; ++r) {
            const float scale = f16_bits_to_float(Words::scale_bits(w[r], g));
            const int sum = dp4a(Words::word(w[r], g), xw, base);
            acc[r][t] = fmaf(scale * dx[g], static_cast<float>(sum), acc[r][t]);
          }
        }
      }
    }
  }
};

// ---- epilogue --------------------------------------------------------------------------------

// Writes the block's results; sums[r * M + t] is local row r's product for token t, bias added.
template <int R, int M>
__device__ __forceinline__ void decode_epilogue(const DecodeGemvArgs& a, const float* sums) {
  const int tid = threadIdx.x;
  if (a.output == DecodeOutput::kStore) {
    if (tid >= R * M) return;
    const int r = tid / M;
    const int t = tid % M;
    bool valid = false;
    const int64_t row = decode_block_row<R>(a, r, &valid);
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
    const int64_t j = static_cast<int64_t>(blockIdx.x) * (R / 2) + p;
    if (j >= a.num_rows / 2) return;
    a.y[t * a.y_stride + j] = silu_mul(sums[p * M + t], sums[(R / 2 + p) * M + t]);
    return;
  }
  // kRopeKv: local rows 2p and 2p + 1 are a pair of one head (head_dim, widths even).
  const RopeKvOutput& rope = a.rope;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * R + 2 * p;
  if (row >= a.num_rows) return;  // num_rows is even: row + 1 is in range too
  float y0 = sums[2 * p * M + t];
  float y1 = sums[(2 * p + 1) * M + t];
  const int64_t k_begin = rope.q_width;
  const int64_t v_begin = k_begin + rope.kv_width;
  if (row < v_begin) {
    const int64_t d = (row < k_begin ? row : row - k_begin) % rope.head_dim;
    if (d < rope.num_rotary_dims) {
      float c = 0.0f;
      float s = 0.0f;
      rope_cos_sin(rope.positions[t], static_cast<int32_t>(d / 2), rope.num_rotary_dims,
                   rope.freq_base, rope.freq_scale, rope.freq_factors, &c, &s);
      const float x0 = y0;
      const float x1 = y1;
      rope_rotate(x0, x1, c, s, &y0, &y1);
    }
  }
  if (row < k_begin) {
    a.y[t * a.y_stride + row] = y0;
    a.y[t * a.y_stride + row + 1] = y1;
    return;
  }
  const int64_t cell = rope.cells[t];
  if (row < v_begin) {
    const int64_t index = cell * rope.kv_width + (row - k_begin);
    store_cache_value(rope.k_cache, rope.cache_dtype, index, y0);
    store_cache_value(rope.k_cache, rope.cache_dtype, index + 1, y1);
  } else {
    const int64_t index = cell * rope.v_width + (row - v_begin);
    store_cache_value(rope.v_cache, rope.cache_dtype, index, y0);
    store_cache_value(rope.v_cache, rope.cache_dtype, index + 1, y1);
  }
}

// ---- the kernel ------------------------------------------------------------------------------

template <class Decoder, int R, int M, int D, class Input>
__global__ void __launch_bounds__(kDecodeThreads) gemv_decode_kernel(const DecodeGemvArgs a) {
  static_assert(R % 2 == 0, "pairs (SwiGLU, RoPE) need an even number of rows per block");
  pdl_launch_dependents();
  const uint8_t* rows[R];
  CELLM_UNROLL
  for (int r = 0; r < R; ++r) {
    bool valid = false;
    const int64_t row = decode_block_row<R>(a, r, &valid);
    rows[r] = a.w + (valid ? row : 0) * static_cast<int64_t>(a.row_bytes);
  }
  const int64_t num_chunks = a.num_cols / Decoder::kChunkElems;
  const int64_t first = threadIdx.x;
  constexpr int64_t kStep = static_cast<int64_t>(D) * kDecodeThreads;

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
  pdl_wait();

  typename Input::template State<M> state;
  Input::template prepare<M>(a, state);
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
        const int64_t next = c + kStep;
        if (next < num_chunks) {
          CELLM_UNROLL
          for (int r = 0; r < R; ++r) chunks[d][r] = Decoder::load(rows[r], a.num_cols, next);
        }
      }
    }
  }

  __shared__ float partial[kDecodeWarps][R * M];
  __shared__ float sums[R * M];
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  CELLM_UNROLL
  for (int r = 0; r < R; ++r) {
    CELLM_UNROLL
    for (int t = 0; t < M; ++t) {
      float v = acc[r][t];
      CELLM_UNROLL
      for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
      if (lane == 0) partial[warp][r * M + t] = v;
    }
  }
  __syncthreads();
  if (threadIdx.x < R * M) {
    float sum = partial[0][threadIdx.x];
    CELLM_UNROLL
    for (int w = 1; w < kDecodeWarps; ++w) sum += partial[w][threadIdx.x];
    if (a.bias != nullptr) {
      bool valid = false;
      const int64_t row = decode_block_row<R>(a, static_cast<int>(threadIdx.x) / M, &valid);
      if (valid) sum += a.bias[row];
    }
    sums[threadIdx.x] = sum;
  }
  __syncthreads();
  decode_epilogue<R, M>(a, sums);
}

// Launches the instantiation for the smallest M ∈ {1, 2, 4, 8} covering a.num_tokens.
template <class Decoder, int R, int D, class Input>
cudaError_t launch_gemv_decode_typed(const DecodeGemvArgs& a, cudaStream_t stream) {
  const int64_t blocks =
      a.output == DecodeOutput::kSwiglu ? ceil_div(a.num_rows / 2, R / 2) : ceil_div(a.num_rows, R);
  const dim3 grid(static_cast<unsigned>(blocks));
  const dim3 block(kDecodeThreads);
  if (a.num_tokens <= 1) {
    return launch_pdl(gemv_decode_kernel<Decoder, R, 1, D, Input>, grid, block, 0, stream, a);
  }
  if (a.num_tokens <= 2) {
    return launch_pdl(gemv_decode_kernel<Decoder, R, 2, D, Input>, grid, block, 0, stream, a);
  }
  if (a.num_tokens <= 4) {
    return launch_pdl(gemv_decode_kernel<Decoder, R, 4, D, Input>, grid, block, 0, stream, a);
  }
  return launch_pdl(gemv_decode_kernel<Decoder, R, 8, D, Input>, grid, block, 0, stream, a);
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

}  // namespace cellm::kernels
