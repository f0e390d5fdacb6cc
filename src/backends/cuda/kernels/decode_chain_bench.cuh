// decode_chain_bench.cuh: what the two one-launch chain prototypes of a decode step's layer
// products (decode_persistent_bench.cu, decode_ring_bench.cu) share — the stage kinds, the
// acquire load their grid barriers poll, the quantization of a stage's f32 input into a block's
// shared memory, and the cooperative launch (decode_latency_probe.cu's too). It knows nothing of
// how a chain streams its weights. Benchmark only; not linked into the backend. Thread-safety:
// device functions act on the calling block's shared memory; the launchers launch on the given
// stream.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "backends/cuda/kernels/decode_persistent_bench.h"
#include "backends/cuda/kernels/gemv_decode.cuh"

namespace cellm::kernels::chain_bench {

constexpr int kStagesPerLayer = 4;
enum StageKind : int { kQkvStage = 0, kOutputStage = 1, kGateUpStage = 2, kDownStage = 3 };

__device__ __forceinline__ unsigned load_acquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// Elements e .. e + 3 of an input quantized into q (interleaved order, or natural order for
// block-major weights) and their block's scale into scales[e / 32].
__device__ __forceinline__ void quantize_four_into(const float4& v, int64_t e, int8_t* q,
                                                   float* scales, bool interleaved) {
  if (interleaved) {
    quantize_four_interleaved(v, e, q, scales);
    return;
  }
  const QuantizedFour four = quantize_four(v);
  *reinterpret_cast<uint32_t*>(q + e) = four.word;
  if ((threadIdx.x & 7) == 0) scales[e >> 5] = four.scale;
}

// The stage's f32 input, RMS-normed where it is, quantized into shared memory (per-32 scales as
// quantize_activations; int8 values in its interleaved order, or in natural order when not
// `interleaved`) by threads [0, kThreads) of the block, which meet with `barrier()`
// (__syncthreads or a named barrier of those threads). A normed input is held in kNormVectors
// float4s per thread: hidden ≤ 4 · kNormVectors · kThreads.
template <int kThreads, int kNormVectors, class Barrier>
__device__ void prepare_input(const PersistentChainArgs& a, int kind, int8_t* q, float* scales,
                              double* norm_partial,  // [kThreads / 32]
                              bool interleaved, Barrier barrier) {
  const float* src = kind == kOutputStage ? a.qkv : (kind == kDownStage ? a.act : a.x);
  const int64_t cols = kind == kDownStage ? a.ffn : a.hidden;
  const bool normed = kind == kQkvStage || kind == kGateUpStage;
  const int64_t first = 4 * static_cast<int64_t>(threadIdx.x);
  constexpr int64_t kStep = 4 * kThreads;
  if (normed) {
    float4 v[kNormVectors];
    double sum = 0.0;
    CELLM_UNROLL
    for (int i = 0; i < kNormVectors; ++i) {
      const int64_t e = first + i * kStep;
      if (e < cols) {
        v[i] = __ldcg(reinterpret_cast<const float4*>(src + e));
        sum += static_cast<double>(__fmul_rn(v[i].x, v[i].x));
        sum += static_cast<double>(__fmul_rn(v[i].y, v[i].y));
        sum += static_cast<double>(__fmul_rn(v[i].z, v[i].z));
        sum += static_cast<double>(__fmul_rn(v[i].w, v[i].w));
      }
    }
    CELLM_UNROLL
    for (int offset = 16; offset > 0; offset >>= 1) {
      sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    }
    if ((threadIdx.x & 31) == 0) norm_partial[threadIdx.x >> 5] = sum;
    barrier();
    double total = 0.0;
    for (int w = 0; w < kThreads / 32; ++w) total += norm_partial[w];
    const float rms = rms_inverse(total, cols, a.norm_eps);
    CELLM_UNROLL
    for (int i = 0; i < kNormVectors; ++i) {
      const int64_t e = first + i * kStep;
      if (e < cols) {
        quantize_four_into(rms_apply(v[i], rms, load_f4(a.norm_weight + e)), e, q, scales,
                           interleaved);
      }
    }
  } else {
#pragma unroll 4
    for (int64_t e = first; e < cols; e += kStep) {
      quantize_four_into(__ldcg(reinterpret_cast<const float4*>(src + e)), e, q, scales,
                         interleaved);
    }
  }
  barrier();
}

// Zeroes a.barrier and launches `kernel(k)` cooperatively on `stream`: one block of `threads`
// per SM (or a.num_blocks) with `smem_bytes` of dynamic shared memory. Fails with
// cudaErrorCooperativeLaunchTooLarge when the blocks cannot all be resident.
// The blocks a chain launches: a.num_blocks, or one per SM.
inline cudaError_t chain_blocks(const PersistentChainArgs& a, int* blocks) {
  if (a.num_blocks > 0) {
    *blocks = a.num_blocks;
    return cudaSuccess;
  }
  int device = 0;
  cudaError_t error = cudaGetDevice(&device);
  if (error != cudaSuccess) return error;
  return cudaDeviceGetAttribute(blocks, cudaDevAttrMultiProcessorCount, device);
}

// `kernel(k)` on `blocks` blocks that must all be resident at once (a cooperative launch: refused
// when they cannot be).
template <class KernelArgs>
cudaError_t launch_cooperative(void (*kernel)(KernelArgs), const KernelArgs& k, int blocks,
                               int threads, size_t smem_bytes, cudaStream_t stream) {
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeCooperative;
  attribute[0].val.cooperative = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(blocks));
  config.blockDim = dim3(static_cast<unsigned>(threads));
  config.dynamicSmemBytes = smem_bytes;
  config.stream = stream;
  config.attrs = attribute;
  config.numAttrs = 1;
  return cudaLaunchKernelEx(&config, kernel, k);
}

template <class KernelArgs>
cudaError_t launch_chain(void (*kernel)(KernelArgs), const KernelArgs& k,
                         const PersistentChainArgs& a, int threads, size_t smem_bytes,
                         cudaStream_t stream) {
  cudaError_t error = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(smem_bytes));
  if (error != cudaSuccess) return error;
  int device = 0;
  int num_sms = 0;
  int fit = 0;
  int blocks = 0;
  if ((error = cudaGetDevice(&device)) != cudaSuccess) return error;
  error = cudaDeviceGetAttribute(&num_sms, cudaDevAttrMultiProcessorCount, device);
  if (error != cudaSuccess) return error;
  error = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fit, kernel, threads, smem_bytes);
  if (error != cudaSuccess) return error;
  if ((error = chain_blocks(a, &blocks)) != cudaSuccess) return error;
  if (fit < 1 || blocks > fit * num_sms) return cudaErrorCooperativeLaunchTooLarge;
  if ((error = cudaMemsetAsync(a.barrier, 0, sizeof(unsigned), stream)) != cudaSuccess) {
    return error;
  }
  return launch_cooperative(kernel, k, blocks, threads, smem_bytes, stream);
}

}  // namespace cellm::kernels::chain_bench
