// gemv_decode_inputs: the input policies of the fused decode product (gemv_decode.cuh) — how a
// block's token rows become what its dp4a / FMA loop reads: f32 rows (gathered, RMS-normed in a
// prologue), int8 rows quantized by a launch (per 32 or per 256 columns), int8 rows a handover
// product wrote normed (the RMS scale from its sums of squares), int8 rows each block quantizes
// into its shared memory. Device code; include only through gemv_decode.cuh. Thread-safety: each
// policy's functions are called by every thread of a block, as the kernel orders them.
#pragma once

#include <type_traits>

#include "backends/cuda/kernels/gemv_chunk.cuh"
#include "backends/cuda/kernels/gemv_decode_args.h"
#include "backends/cuda/kernels/op_math.cuh"
#include "backends/cuda/kernels/quantize_activations.cuh"
#include "backends/cuda/kernels/weight_decode.cuh"

namespace cellm::kernels {

inline constexpr int kDecodeThreads = 128;
inline constexpr int kDecodeWarps = kDecodeThreads / 32;

// ---- input policies --------------------------------------------------------------------------
// An input policy turns the block's token rows into what accumulate() reads: prepare() runs once
// per block after pdl_wait() (kPrologue: it reads every row in full, so the launch caps the grid);
// smem_bytes() is the dynamic shared memory it needs.

// Token t's f32 input row: x row x_rows[t] (t when null); rows past num_tokens read row 0.
template <int M>
__device__ __forceinline__ void decode_x_rows(const DecodeGemvArgs& a, const float* (&x)[M]) {
  CELLM_UNROLL
  for (int t = 0; t < M; ++t) {
    const int64_t row = t < a.num_tokens ? (a.x_rows != nullptr ? a.x_rows[t] : t) : 0;
    x[t] = a.x + row * a.x_stride;
  }
}

// The RMS scale of each token's row (a.num_cols floats): squares rounded to f32, summed in double
// (as cpu_rms_norm; each thread's share by row_sum_squares_share, as quantize_activations).
template <int M>
__device__ __forceinline__ void decode_rms_scales(const DecodeGemvArgs& a,
                                                  const float* const (&x)[M], float (&scale)[M]) {
  double sum[M];
  CELLM_UNROLL
  for (int t = 0; t < M; ++t) {
    sum[t] =
        M > 1 && t >= a.num_tokens ? 0.0 : row_sum_squares_share<kDecodeThreads>(x[t], a.num_cols);
  }
  __shared__ double partial[kDecodeWarps][M];
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  CELLM_UNROLL
  for (int t = 0; t < M; ++t) {
    double v = sum[t];
    CELLM_UNROLL
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    if (lane == 0) partial[warp][t] = v;
  }
  __syncthreads();
  CELLM_UNROLL
  for (int t = 0; t < M; ++t) {
    double total = 0.0;
    CELLM_UNROLL
    for (int w = 0; w < kDecodeWarps; ++w) total += partial[w][t];
    scale[t] = rms_inverse(total, a.num_cols, a.norm_eps);
  }
}

// (x · scale) · w, rounded as rms_norm rounds it.
__device__ __forceinline__ float4 rms_apply(float4 x, float scale, const float4& w) {
  x.x = __fmul_rn(__fmul_rn(x.x, scale), w.x);
  x.y = __fmul_rn(__fmul_rn(x.y, scale), w.y);
  x.z = __fmul_rn(__fmul_rn(x.z, scale), w.z);
  x.w = __fmul_rn(__fmul_rn(x.w, scale), w.w);
  return x;
}

// f32 activations, optionally gathered by x_rows and RMS-normalized (kNorm).
template <bool kNorm>
struct DecodeF32Input {
  static constexpr bool kPrologue = kNorm;
  static size_t smem_bytes(const DecodeGemvArgs& /*a*/, int /*m*/) { return 0; }

  template <int M>
  struct State {
    const float* x[M];  // token t's input row
    float scale[M];     // its RMS scale (kNorm)
  };

  template <int M>
  __device__ __forceinline__ static void prepare(const DecodeGemvArgs& a, State<M>& s) {
    decode_x_rows<M>(a, s.x);
    CELLM_UNROLL
    for (int t = 0; t < M; ++t) s.scale[t] = 1.0f;
    if constexpr (kNorm) decode_rms_scales<M>(a, s.x, s.scale);
  }

  // acc[r][t] += Σ over chunk c of w_r · x_t (x_t normalized first with kNorm): the same
  // operations in the same order as accumulate_chunk (gemv_chunk.cuh).
  template <class Decoder, int R, int M>
  __device__ __forceinline__ static void accumulate(const typename Decoder::Chunk (&w)[R],
                                                    const DecodeGemvArgs& a, const State<M>& s,
                                                    int64_t c, float (&acc)[R][M]) {
    accumulate_chunk_from<Decoder, R, M>(
        w, M == 1 ? 1 : a.num_tokens, c,  // M = 1: the one token is there
        [&](int t, int64_t offset) {
          const float4 xv = load_f4(s.x[t] + offset);
          if constexpr (kNorm) return rms_apply(xv, s.scale[t], load_f4(a.norm_weight + offset));
          return xv;
        },
        acc);
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
    return interleaved_group_nibbles(w.qs, g);
  }
  __device__ __forceinline__ static uint16_t scale_bits(const DecodeQ4_0::Chunk& w, int g) {
    return half_of(w.d, g);
  }
};

// Token rows of int8 activations (interleaved order) and their per-32 scales, in global memory
// (kShared false) or in the block's shared memory.
template <int M>
struct Int8Rows {
  const int8_t* x[M];
  const float* scales[M];
};

// Q8_0 / Q4_0: one scale per group (kPer16: the activations' scales per 16 columns, at
// per16_scale_index — a chunk's eight groups lie in one half of their blocks of 32).
template <class Decoder, int R, int M, bool kShared, bool kPer16 = false>
__device__ __forceinline__ void accumulate_int8_q(const typename Decoder::Chunk (&w)[R],
                                                  int num_tokens, const Int8Rows<M>& s, int64_t c,
                                                  float (&acc)[R][M]) {
  using Words = Int8Words<Decoder>;
  CELLM_UNROLL
  for (int t = 0; t < M; ++t) {
    if (M == 1 || t < num_tokens) {  // M = 1: the one token is there
      const int8_t* x = s.x[t] + 32 * c;
      const float* block_scales =
          kPer16 ? s.scales[t] + 16 * (c >> 3) + 8 * ((c >> 2) & 1) : s.scales[t] + 8 * (c >> 3);
      uint4 lo;
      uint4 hi;
      float4 s_lo;
      float4 s_hi;
      if constexpr (kShared) {
        lo = *reinterpret_cast<const uint4*>(x);
        hi = *reinterpret_cast<const uint4*>(x + 16);
        s_lo = *reinterpret_cast<const float4*>(block_scales);
        s_hi = *reinterpret_cast<const float4*>(block_scales + 4);
      } else {
        lo = load_u4(x);
        hi = load_u4(x + 16);
        s_lo = load_f4(block_scales);
        s_hi = load_f4(block_scales + 4);
      }
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

// Q4_K / Q6_K: scales and mins per group (accumulate_chunk_int8_k, gemv_chunk.cuh).
template <class Decoder>
inline constexpr bool kInt8KQuant =
    std::is_same_v<Decoder, DecodeQ4_K> || std::is_same_v<Decoder, DecodeQ6_K>;

// Per group, acc += (d_w · d_x) · Σ q_w q_x — the same values as accumulate_chunk_q8
// (gemv_chunk.cuh); K-quants as accumulate_chunk_int8_k.
template <class Decoder, int R, int M, bool kShared>
__device__ __forceinline__ void accumulate_int8(const typename Decoder::Chunk (&w)[R],
                                                int num_tokens, const Int8Rows<M>& s, int64_t c,
                                                float (&acc)[R][M]) {
  if constexpr (kInt8KQuant<Decoder>) {
    accumulate_chunk_int8_k<Decoder, R, M>(w, s.x, s.scales, num_tokens, c, acc);
  } else {
    accumulate_int8_q<Decoder, R, M, kShared>(w, num_tokens, s, c, acc);
  }
}

// int8 activations quantized by a separate launch (quantize_activations.cuh), read from global
// memory.
struct DecodeInt8Input {
  static constexpr bool kPrologue = false;
  static size_t smem_bytes(const DecodeGemvArgs& /*a*/, int /*m*/) { return 0; }

  template <int M>
  using State = Int8Rows<M>;

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
    accumulate_int8<Decoder, R, M, false>(w, a.num_tokens, s, c, acc);
  }
};

// One token of int8 activations a kAddHandover product handed over (x_q8_sum_squares): the int8
// values of x ⊙ norm weight. The RMS scale s of x, from the producer's sums of squares per block
// of 32, multiplies the block's sums (the loads issued in prepare(), summed after the weights').
struct DecodeInt8NormedInput : DecodeInt8Input {
  // Partials per thread: K ≤ kDecodeThreads · 32 · kParts (decode_matmul.cu checks).
  static constexpr int kParts = 2;
  template <int M>
  struct State : Int8Rows<M> {
    double parts[kParts];  // this thread's partials t and t + 128 (0 past K / 32)
  };

  // The partials' loads are issued here and summed only after the weights' loop, so their round
  // trip overlaps it (summed at once, it stalled every block before its first input loads).
  template <int M>
  __device__ __forceinline__ static void prepare(const DecodeGemvArgs& a, State<M>& s) {
    static_assert(M == 1, "a handed-over normed input is one token's");
    DecodeInt8Input::prepare<M>(a, s);
    CELLM_UNROLL
    for (int j = 0; j < kParts; ++j) {
      const int64_t i = threadIdx.x + j * kDecodeThreads;
      s.parts[j] = i < a.num_cols / 32 ? a.x_q8_sum_squares[i] : 0.0;
    }
  }

  // Each warp's share of Σ x² into partial[warp] (before the block's barrier).
  template <int M>
  __device__ __forceinline__ static void reduce_norm(const State<M>& s,
                                                     double (&partial)[kDecodeWarps]) {
    double v = s.parts[0];
    CELLM_UNROLL
    for (int j = 1; j < kParts; ++j) v += s.parts[j];
    CELLM_UNROLL
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = v;
  }

  // The RMS scale, after the barrier: the warps' shares in order.
  __device__ __forceinline__ static float norm_scale(const DecodeGemvArgs& a,
                                                     const double (&partial)[kDecodeWarps]) {
    double total = partial[0];
    CELLM_UNROLL
    for (int w = 1; w < kDecodeWarps; ++w) total += partial[w];
    return rms_inverse(total, a.num_cols, a.norm_eps);
  }
};

template <class Input>
inline constexpr bool kNormedAfter = std::is_same_v<Input, DecodeInt8NormedInput>;

// One token of int8 activations with one scale per 16 columns (x_q8_per_16: SwiGLU values a
// kSwigluHandover product handed over), on Q8_0 / Q4_0 weights.
struct DecodeInt8Per16Input : DecodeInt8Input {
  template <int M>
  __device__ __forceinline__ static void prepare(const DecodeGemvArgs& a, State<M>& s) {
    static_assert(M == 1, "per-16 input is one token's");
    s.x[0] = a.x_q8;
    s.scales[0] = a.x_q8_scales;
  }

  template <class Decoder, int R, int M>
  __device__ __forceinline__ static void accumulate(const typename Decoder::Chunk (&w)[R],
                                                    const DecodeGemvArgs& a, const State<M>& s,
                                                    int64_t c, float (&acc)[R][M]) {
    static_assert(!kInt8KQuant<Decoder>, "per-16 input is for Q8_0 / Q4_0 weights");
    accumulate_int8_q<Decoder, R, M, false, true>(w, a.num_tokens, s, c, acc);
  }
};

// The same, quantized with one scale per 256 columns (QuantizeActivationsParams::per_256): K-quant
// weights sum a chunk's groups in integers (accumulate_chunk_int8_k256), Q4_K's minimums from the
// blocks' sums (x_q8_sums; null for other types).
struct DecodeInt8Per256Input : DecodeInt8Input {
  template <int M>
  struct State : Int8Rows<M> {
    const int32_t* sums[M];  // token t's block sums, or null
  };

  template <int M>
  __device__ __forceinline__ static void prepare(const DecodeGemvArgs& a, State<M>& s) {
    DecodeInt8Input::prepare<M>(a, s);
    CELLM_UNROLL
    for (int t = 0; t < M; ++t) {
      const int64_t row = t < a.num_tokens ? t : 0;
      s.sums[t] = a.x_q8_sums != nullptr ? a.x_q8_sums + row * (a.num_cols / 32) : nullptr;
    }
  }

  template <class Decoder, int R, int M>
  __device__ __forceinline__ static void accumulate(const typename Decoder::Chunk (&w)[R],
                                                    const DecodeGemvArgs& a, const State<M>& s,
                                                    int64_t c, float (&acc)[R][M]) {
    if constexpr (kInt8KQuant<Decoder>) {
      accumulate_chunk_int8_k256<Decoder, R, M>(w, s.x, s.scales, s.sums, a.num_tokens, c, acc);
    } else {
      accumulate_int8<Decoder, R, M, false>(w, a.num_tokens, s, c, acc);
    }
  }
};

// Four consecutive elements of a block of 32 quantized to int8 (element e in the low byte) and
// the block's scale.
struct QuantizedFour {
  uint32_t word;
  float scale;
};

// Quantizes four elements of a row into int8: the eight lanes 8j .. 8j + 7 of the warp hold one
// block of 32 (every lane takes part) and all get its scale.
__device__ __forceinline__ QuantizedFour quantize_four(const float4& v) {
  float amax = fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w)));
  amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
  amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 2));
  amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 4));
  QuantizedFour out;
  out.scale = q8_block_scale(amax);
  out.word = static_cast<uint8_t>(q8_quantize(v.x, out.scale)) |
             (static_cast<uint32_t>(static_cast<uint8_t>(q8_quantize(v.y, out.scale))) << 8) |
             (static_cast<uint32_t>(static_cast<uint8_t>(q8_quantize(v.z, out.scale))) << 16) |
             (static_cast<uint32_t>(static_cast<uint8_t>(q8_quantize(v.w, out.scale))) << 24);
  return out;
}

// Quantizes elements e .. e + 3 (e a multiple of 4) of a row (quantize_four) into one word of the
// interleaved order of q; the first lane of the eight stores the block's scale in scales[e / 32].
__device__ __forceinline__ void quantize_four_interleaved(const float4& v, int64_t e, int8_t* q,
                                                          float* scales) {
  const QuantizedFour four = quantize_four(v);
  *reinterpret_cast<uint32_t*>(q + interleaved_q8_offset(e)) = four.word;
  if ((threadIdx.x & 7) == 0) scales[e >> 5] = four.scale;
}

// f32 activations (gathered, normed as DecodeF32Input<true>) quantized to int8 by each block into
// its shared memory — the values quantize_activations writes, without its launch and its round
// trip through L2. Shared memory: [M, K / 32] f32 scales, then [M, K] int8 (interleaved order).
struct DecodeInt8FoldInput {
  static constexpr bool kPrologue = true;
  static size_t smem_bytes(const DecodeGemvArgs& a, int m) {
    return decode_int8_fold_smem_bytes(a.num_cols, m);
  }

  template <int M>
  using State = Int8Rows<M>;

  template <int M>
  __device__ __forceinline__ static void prepare(const DecodeGemvArgs& a, State<M>& s) {
    extern __shared__ __align__(16) uint8_t fold_smem[];
    const int64_t k = a.num_cols;
    auto* scales = reinterpret_cast<float*>(fold_smem);                             // [M, K / 32]
    auto* q = reinterpret_cast<int8_t*>(fold_smem + M * (k / 32) * sizeof(float));  // [M, K]
    const float* x[M];
    float norm_scale[M];
    decode_x_rows<M>(a, x);
    CELLM_UNROLL
    for (int t = 0; t < M; ++t) norm_scale[t] = 1.0f;
    if (a.norm_weight != nullptr) decode_rms_scales<M>(a, x, norm_scale);
    // Thread i quantizes elements 4i .. 4i + 3 (+ 512 per step): 8 lanes hold a block of 32
    // (K is a multiple of 256, so whole warps take part), and 4 consecutive elements land in one
    // word of the interleaved order.
    CELLM_UNROLL
    for (int t = 0; t < M; ++t) {
      if (M > 1 && t >= a.num_tokens) continue;
#pragma unroll 2
      for (int64_t e = 4 * static_cast<int64_t>(threadIdx.x); e < k; e += 4 * kDecodeThreads) {
        float4 v = load_f4(x[t] + e);
        if (a.norm_weight != nullptr) v = rms_apply(v, norm_scale[t], load_f4(a.norm_weight + e));
        quantize_four_interleaved(v, e, q + t * k, scales + t * (k / 32));
      }
    }
    __syncthreads();
    CELLM_UNROLL
    for (int t = 0; t < M; ++t) {
      s.x[t] = q + t * k;
      s.scales[t] = scales + t * (k / 32);
    }
  }

  template <class Decoder, int R, int M>
  __device__ __forceinline__ static void accumulate(const typename Decoder::Chunk (&w)[R],
                                                    const DecodeGemvArgs& a, const State<M>& s,
                                                    int64_t c, float (&acc)[R][M]) {
    accumulate_int8<Decoder, R, M, true>(w, a.num_tokens, s, c, acc);
  }
};

}  // namespace cellm::kernels
