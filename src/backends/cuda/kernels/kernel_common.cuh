// kernel_common: small helpers shared by the kernel files — host/device qualifiers that also
// compile as plain C++ (so decoding logic is unit-tested on the CPU), bit casts, f16/bf16
// conversions, correctly rounded float ops that never contract into FMAs, and loads that read
// device memory with a cache hint on the GPU and plainly on the host.
// Host-compatible: includes only cuda_runtime.h (vector types) beside cellm's core headers.
// Thread-safety: pure functions.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#ifdef __CUDACC__
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#define CELLM_HD __host__ __device__
#define CELLM_HD_INLINE __host__ __device__ __forceinline__
#else
#define CELLM_HD
#define CELLM_HD_INLINE inline
#endif

#ifdef __CUDA_ARCH__
#define CELLM_UNROLL _Pragma("unroll")
#else
#define CELLM_UNROLL
#endif

#include "core/float16.h"

namespace cellm::kernels {

CELLM_HD_INLINE float bits_to_float(uint32_t bits) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(bits);
#else
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
#endif
}

CELLM_HD_INLINE uint32_t float_to_bits(float value) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(value);
#else
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
#endif
}

CELLM_HD_INLINE float f16_bits_to_float(uint16_t bits) {
#ifdef __CUDA_ARCH__
  return __half2float(__ushort_as_half(bits));
#else
  return f16_to_f32(bits);
#endif
}

CELLM_HD_INLINE float bf16_bits_to_float(uint16_t bits) {
  return bits_to_float(static_cast<uint32_t>(bits) << 16);
}

// f32 → f16 / bf16 bits, round to nearest even (the same results as core/float16.h).
CELLM_HD_INLINE uint16_t float_to_f16_bits(float value) {
#ifdef __CUDA_ARCH__
  return __half_as_ushort(__float2half_rn(value));
#else
  return f32_to_f16(value);
#endif
}

CELLM_HD_INLINE uint16_t float_to_bf16_bits(float value) {
#ifdef __CUDA_ARCH__
  return __bfloat16_as_ushort(__float2bfloat16_rn(value));
#else
  return f32_to_bf16(value);
#endif
}

// Single correctly rounded operations that the compiler may not fuse (the CPU oracle is built
// with -ffp-contract=off, so these reproduce its values bit for bit).
CELLM_HD_INLINE float mul_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

CELLM_HD_INLINE float sub_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}

CELLM_HD_INLINE float add_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

// PTX prmt (default mode): byte k of the result is byte (selector >> 4k) & 7 of {y:x}.
CELLM_HD_INLINE uint32_t byte_perm(uint32_t x, uint32_t y, uint32_t selector) {
#ifdef __CUDA_ARCH__
  return __byte_perm(x, y, selector);
#else
  const uint64_t both = (static_cast<uint64_t>(y) << 32) | x;
  uint32_t result = 0;
  for (int k = 0; k < 4; ++k) {
    const uint32_t pick = (selector >> (4 * k)) & 7u;
    result |= static_cast<uint32_t>((both >> (8 * pick)) & 0xffu) << (8 * k);
  }
  return result;
#endif
}

// 2^23 + byte i of `word` as a float, exactly (the mantissa holds the byte).
CELLM_HD_INLINE float magic_byte(uint32_t word, int i) {
  return bits_to_float(byte_perm(word, 0x4b000000u, 0x7540u | static_cast<uint32_t>(i)));
}
inline constexpr float kMagic = 8388608.0f;  // 2^23

CELLM_HD_INLINE uint32_t word_of(const uint4& v, int k) {
  return k == 0 ? v.x : k == 1 ? v.y : k == 2 ? v.z : v.w;
}
CELLM_HD_INLINE uint32_t byte_of(const uint4& v, int b) {
  return (word_of(v, b >> 2) >> (8 * (b & 3))) & 0xffu;
}
CELLM_HD_INLINE uint16_t half_of(const uint4& v, int h) {
  return static_cast<uint16_t>(word_of(v, h >> 1) >> (16 * (h & 1)));
}

// Streaming loads of weights (read once: evict first) and cached loads of activations.
CELLM_HD_INLINE uint4 load_stream_u4(const uint8_t* p) {
#ifdef __CUDA_ARCH__
  return __ldcs(reinterpret_cast<const uint4*>(p));
#else
  uint4 v;
  std::memcpy(&v, p, sizeof(v));
  return v;
#endif
}
CELLM_HD_INLINE uint2 load_stream_u2(const uint8_t* p) {
#ifdef __CUDA_ARCH__
  return __ldcs(reinterpret_cast<const uint2*>(p));
#else
  uint2 v;
  std::memcpy(&v, p, sizeof(v));
  return v;
#endif
}
CELLM_HD_INLINE uint16_t load_u16(const uint8_t* p) {
#ifdef __CUDA_ARCH__
  return __ldg(reinterpret_cast<const unsigned short*>(p));
#else
  uint16_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
#endif
}
CELLM_HD_INLINE float4 load_f4(const float* p) {
#ifdef __CUDA_ARCH__
  return __ldg(reinterpret_cast<const float4*>(p));
#else
  float4 v;
  std::memcpy(&v, p, sizeof(v));
  return v;
#endif
}

CELLM_HD_INLINE uint4 load_u4(const void* p) {  // cached (activations)
#ifdef __CUDA_ARCH__
  return __ldg(reinterpret_cast<const uint4*>(p));
#else
  uint4 v;
  std::memcpy(&v, p, sizeof(v));
  return v;
#endif
}

// Σ of the four signed byte products of a and b, plus c (PTX dp4a.s32.s32).
CELLM_HD_INLINE int dp4a(uint32_t a, uint32_t b, int c) {
#ifdef __CUDA_ARCH__
  return __dp4a(static_cast<int>(a), static_cast<int>(b), c);
#else
  for (int k = 0; k < 4; ++k) {
    c += static_cast<int8_t>(static_cast<uint8_t>(a >> (8 * k))) *
         static_cast<int8_t>(static_cast<uint8_t>(b >> (8 * k)));
  }
  return c;
#endif
}

// Σ of the four unsigned bytes of a times the four signed bytes of b, plus c (PTX
// dp4a.u32.s32): bytes of a up to 255, e.g. a nibble left in the high half of its byte.
CELLM_HD_INLINE int dp4a_unsigned_signed(uint32_t a, uint32_t b, int c) {
#ifdef __CUDA_ARCH__
  int d;
  asm("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
#else
  for (int k = 0; k < 4; ++k) {
    c += static_cast<int>(static_cast<uint8_t>(a >> (8 * k))) *
         static_cast<int8_t>(static_cast<uint8_t>(b >> (8 * k)));
  }
  return c;
#endif
}

// Σ of the two signed 16-bit halves of a times signed bytes 0 and 1 of b (kHigh: bytes 2 and 3),
// plus c (PTX dp2a.lo / dp2a.hi .s32.s32).
template <bool kHigh>
CELLM_HD_INLINE int dp2a(uint32_t a, uint32_t b, int c) {
#ifdef __CUDA_ARCH__
  return kHigh ? __dp2a_hi(static_cast<int>(a), static_cast<int>(b), c)
               : __dp2a_lo(static_cast<int>(a), static_cast<int>(b), c);
#else
  for (int k = 0; k < 2; ++k) {
    c += static_cast<int16_t>(static_cast<uint16_t>(a >> (16 * k))) *
         static_cast<int8_t>(static_cast<uint8_t>(b >> (8 * (k + (kHigh ? 2 : 0)))));
  }
  return c;
#endif
}

// The low 16 bits of a (low half) and of b (high half): two values in [-32768, 32767] packed for
// dp2a.
CELLM_HD_INLINE uint32_t pack_low_halves(int a, int b) {
  return byte_perm(static_cast<uint32_t>(a), static_cast<uint32_t>(b), 0x5410);
}

// Four unsigned nibbles n (one per byte, n < 16) → the signed bytes n − 8, without carries
// between bytes: set bit 7, subtract 8, flip bit 7 back.
CELLM_HD_INLINE uint32_t nibbles_minus_8(uint32_t nibbles) {
  return ((nibbles | 0x80808080u) - 0x08080808u) ^ 0x80808080u;
}

CELLM_HD_INLINE int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace cellm::kernels
