// mma_common: warp-level tensor-core helpers shared by the tensor-core attention kernels and the
// quantized matrix products — mma.sync m16n8k16 with bf16 or f16 operands and f32 accumulators,
// m16n8k16 and m16n8k32 with signed bytes and int32 sums, ldmatrix, cp.async with zero fill, and
// packing / splitting f32 values into 16-bit pairs. Device code (sm_80 and later); include only
// from .cu files.
//
// Fragment layout of mma.m16n8k16 (PTX ISA), lane = 4·g + t (g = lane / 4, t = lane % 4):
//   A (16×16, row-major): a0 = (row g, cols 2t, 2t+1), a1 = (row g+8, cols 2t, 2t+1),
//                         a2 = (row g, cols 2t+8, 2t+9), a3 = (row g+8, cols 2t+8, 2t+9);
//   B (16×8, k × n):      b0 = (k 2t, 2t+1; n g), b1 = (k 2t+8, 2t+9; n g);
//   C (16×8):             c0, c1 = (row g, cols 2t, 2t+1), c2, c3 = (row g+8, cols 2t, 2t+1).
// A 32-bit register holds two 16-bit values, the lower index in the low half.
// mma.m16n8k32 with signed bytes (the int8 product, matmul_int8.cuh): a register holds four
// bytes, the lower index in the low byte; a0 = (row g, k 4t .. 4t+3), a1 = (row g+8, same),
// a2 = (row g, k 16+4t ..), a3 = (row g+8, k 16+4t ..); b0 = (k 4t .. 4t+3; n g), b1 = (k
// 16+4t ..; n g); C as above (int32).
// Thread-safety: warp-synchronous device functions (every lane of the warp must call them).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace cellm::kernels {

// d = a · b for one m16n8k16 tile of signed bytes: a0 = (row g, k 4t .. 4t+3), a1 = (row g+8,
// same), b0 = (k 4t .. 4t+3; n g); C as above (int32; the previous d is not added).
__device__ __forceinline__ void mma_s8_16816(int (&d)[4], const uint32_t (&a)[2], uint32_t b0) {
  asm("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, "
      "{%7,%7,%7,%7};\n"
      : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(b0), "r"(0));
}

// d = a · b for one m16n8k32 tile of signed bytes (int32 sums; the previous d is not added).
__device__ __forceinline__ void mma_s8_16832(int (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                             uint32_t b1) {
  asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%10,%10,%10,%10};\n"
      : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "r"(0));
}

// d = a · b + c for one m16n8k32 tile of signed bytes, int32 accumulation.
__device__ __forceinline__ void mma_s8_16832_acc(int (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                                 uint32_t b1, const int (&c)[4]) {
  asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%10,%11,%12,%13};\n"
      : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "r"(c[0]), "r"(c[1]),
        "r"(c[2]), "r"(c[3]));
}

// d += a · b for one m16n8k16 tile; kF16 picks f16 operands, else bf16.
template <bool kF16>
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                          uint32_t b1) {
  if constexpr (kF16) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

__device__ __forceinline__ uint32_t smem_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Four 8×8 16-bit matrices: lanes 8i .. 8i+7 give the row addresses of matrix i (16 bytes each);
// r[i] receives (row lane / 4, cols 2·(lane % 4), +1) of matrix i — or, transposed, (rows
// 2·(lane % 4), +1; col lane / 4).
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_address(row))
               : "memory");
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_address(row))
               : "memory");
}

// 16 bytes global → shared, asynchronously; when !valid the 16 shared bytes are zeroed and
// `gmem` is not read (it must still be a valid address expression).
__device__ __forceinline__ void cp_async_16_zfill(void* smem, const void* gmem, bool valid) {
  const int src_bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_address(smem)),
               "l"(gmem), "r"(src_bytes)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
// Waits until at most kPending committed groups of this thread are still in flight.
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

// Two f32 values as a 16-bit pair, rounded to nearest even (`lo` in the low half).
template <bool kF16>
__device__ __forceinline__ uint32_t pack_pair(float lo, float hi) {
  if constexpr (kF16) {
    const __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&h);
  } else {
    const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&h);
  }
}

// The remainder of split_pair is stored times kSplitLowScale: f16's remainders (about 2^-12 of
// values ≤ 1) would otherwise fall into its subnormal range and lose their precision. Consumers
// multiply products of low parts by kSplitLowInverse (exact: powers of two).
template <bool kF16>
inline constexpr float kSplitLowScale = kF16 ? 4096.0f : 1.0f;
template <bool kF16>
inline constexpr float kSplitLowInverse = kF16 ? 1.0f / 4096.0f : 1.0f;

// Splits (x0, x1) into a rounded high pair and the rounded remainder (times kSplitLowScale):
// x ≈ high + low / kSplitLowScale with an error near 2^-18 |x| (bf16; 2^-22 for f16) — two
// 16-bit products then carry nearly f32 precision.
template <bool kF16>
__device__ __forceinline__ void split_pair(float x0, float x1, uint32_t* high, uint32_t* low) {
  constexpr float kScale = kSplitLowScale<kF16>;
  if constexpr (kF16) {
    const __half2 h = __floats2half2_rn(x0, x1);
    const float2 back = __half22float2(h);
    const __half2 l = __floats2half2_rn(__fmul_rn(__fsub_rn(x0, back.x), kScale),
                                        __fmul_rn(__fsub_rn(x1, back.y), kScale));
    *high = *reinterpret_cast<const uint32_t*>(&h);
    *low = *reinterpret_cast<const uint32_t*>(&l);
  } else {
    const __nv_bfloat162 h = __floats2bfloat162_rn(x0, x1);
    const float2 back = __bfloat1622float2(h);
    const __nv_bfloat162 l = __floats2bfloat162_rn(__fmul_rn(__fsub_rn(x0, back.x), kScale),
                                                   __fmul_rn(__fsub_rn(x1, back.y), kScale));
    *high = *reinterpret_cast<const uint32_t*>(&h);
    *low = *reinterpret_cast<const uint32_t*>(&l);
  }
}

}  // namespace cellm::kernels
