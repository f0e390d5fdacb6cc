// op_math: the per-element arithmetic that the separate kernels (rope_kv, swiglu, rms_norm,
// logit_softcap) and the fused ones (decode_matmul.cuh, the attention kernels) share, so a fused op
// rounds every value exactly as the separate kernel does — the CPU oracle's arithmetic (cpu_ops.h):
// rotary angles in double, rotations, SwiGLU and soft caps in f32 without FMAs, RMS scale from a
// double sum of squares.
// Device code; include only from .cu files. Thread-safety: pure functions.
#pragma once

#include "backends/cuda/kernels/kernel_common.cuh"
#include "program/program_spec.h"

namespace cellm::kernels {

// cos and sin of pair i's angle at `position`, times attn_factor (LongRoPE; 1 otherwise):
// position · freq_scale · freq_base^(−2i / num_rotary_dims) / freq_factors[i].
__device__ __forceinline__ void rope_cos_sin(int32_t position, int32_t i, int32_t num_rotary_dims,
                                             float freq_base, float freq_scale,
                                             const float* freq_factors, float attn_factor, float* c,
                                             float* s) {
  const double pos = static_cast<double>(position) * static_cast<double>(freq_scale);
  double theta = pos * pow(static_cast<double>(freq_base),
                           -2.0 * static_cast<double>(i) / static_cast<double>(num_rotary_dims));
  if (freq_factors != nullptr) theta /= static_cast<double>(freq_factors[i]);
  *c = static_cast<float>(cos(theta) * static_cast<double>(attn_factor));
  *s = static_cast<float>(sin(theta) * static_cast<double>(attn_factor));
}

// (x0, x1) turned by the angle of (c, s), in f32 without FMAs.
__device__ __forceinline__ void rope_rotate(float x0, float x1, float c, float s, float* y0,
                                            float* y1) {
  *y0 = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));
  *y1 = __fadd_rn(__fmul_rn(x0, s), __fmul_rn(x1, c));
}

// cache[index] = value in the cache dtype (f16 / bf16 rounded to nearest even).
__device__ __forceinline__ void store_cache_value(void* cache, KvDtype dtype, int64_t index,
                                                  float value) {
  switch (dtype) {
    case KvDtype::kF32:
      static_cast<float*>(cache)[index] = value;
      break;
    case KvDtype::kF16:
      static_cast<uint16_t*>(cache)[index] = float_to_f16_bits(value);
      break;
    case KvDtype::kBF16:
      static_cast<uint16_t*>(cache)[index] = float_to_bf16_bits(value);
      break;
  }
}

// silu(g) · u rounded as the CPU rounds it: (g / (1 + e^−g)) · u.
__device__ __forceinline__ float silu_mul(float g, float u) {
  return __fmul_rn(__fdiv_rn(g, __fadd_rn(1.0f, expf(-g))), u);
}

// gelu(g) · u with GELU's tanh form, rounded as the CPU (cpu_gelu_tanh_mul) rounds it:
// (0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3)))) · u.
__device__ __forceinline__ float gelu_tanh_mul(float g, float u) {
  const float cube = __fmul_rn(__fmul_rn(__fmul_rn(0.044715f, g), g), g);
  const float inner = __fmul_rn(0.7978845608028654f, __fadd_rn(g, cube));
  const float gelu = __fmul_rn(__fmul_rn(0.5f, g), __fadd_rn(1.0f, tanhf(inner)));
  return __fmul_rn(gelu, u);
}

// 1 / cap rounded, what soft_capped multiplies by (0 without a cap). Host and device.
__host__ __device__ __forceinline__ float soft_cap_inverse(float cap) {
  return cap > 0.0f ? 1.0f / cap : 0.0f;
}

// s soft-capped as the CPU's soft_cap caps it, cap · tanh(s / cap), where cap > 0 (gemma2's
// attention scores and final logits); s itself where cap is 0. s / cap is taken as s · inverse
// (inverse = soft_cap_inverse(cap)), within 2 ulp of the CPU's quotient: the slow-path call of an
// IEEE division made the 256-dim tensor-core prefill kernel, at 255 registers, spill in its key
// loop even uncapped. tanhf is within 2 ulp of std::tanh. The attention kernels test their
// (kernel-uniform) cap once per key tile and call this only when it is set.
__device__ __forceinline__ float soft_capped(float s, float cap, float inverse) {
  return cap > 0.0f ? __fmul_rn(cap, tanhf(__fmul_rn(s, inverse))) : s;
}

// This thread's share of the sum of squares of a row of num_cols floats (x 16-byte aligned,
// num_cols a multiple of 4), as cpu_rms_norm sums: squares rounded to f32, added in double.
// Thread t of kThreads takes float4s t, t + kThreads, …, four of them loaded together
// (unconditionally: past the row they read its first elements, which are not summed) — one L2
// round trip for a 4096-float row at 128 threads.
template <int kThreads>
__device__ __forceinline__ double row_sum_squares_share(const float* x, int64_t num_cols) {
  constexpr int kUnroll = 4;
  constexpr int64_t kStep = 4 * kThreads;
  double sum = 0.0;
  for (int64_t base = 4 * static_cast<int64_t>(threadIdx.x); base < num_cols;
       base += kUnroll * kStep) {
    float4 v[kUnroll];
    CELLM_UNROLL
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t i = base + u * kStep;
      v[u] = load_f4(x + (i < num_cols ? i : 0));
    }
    CELLM_UNROLL
    for (int u = 0; u < kUnroll; ++u) {
      if (base + u * kStep < num_cols) {
        sum += static_cast<double>(__fmul_rn(v[u].x, v[u].x));
        sum += static_cast<double>(__fmul_rn(v[u].y, v[u].y));
        sum += static_cast<double>(__fmul_rn(v[u].z, v[u].z));
        sum += static_cast<double>(__fmul_rn(v[u].w, v[u].w));
      }
    }
  }
  return sum;
}

// 1 / sqrtf(mean + eps) with mean = (float)(sum_squares / dim), as cpu_rms_norm computes it.
__device__ __forceinline__ float rms_inverse(double sum_squares, int64_t dim, float eps) {
  const auto mean = static_cast<float>(sum_squares / static_cast<double>(dim));
  return __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(mean, eps)));
}

}  // namespace cellm::kernels
