// decode_ring_handover.cuh: how a stage's input reaches the ring chain's blocks
// (decode_ring_bench.cu): quantized again from the f32 input by every block, or handed over as
// int8 by the blocks that own its blocks of 32 outputs. Included by decode_ring_bench.cu only.
// Benchmark only. Thread-safety: device functions act on the calling block's shared memory and
// the handover scratch as the kernel orders them.
#pragma once

#include <cstdint>

#include "backends/cuda/kernels/decode_ring_parts.cuh"

#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)

namespace cellm::kernels::ring {

// The stage's input into shared memory, by the consumer threads on their named barrier.
template <int kThreads, int kNormVectors>
__device__ void prepare_input(const PersistentChainArgs& a, int kind, int8_t* q, float* scales,
                              double* norm_partial, bool interleaved) {
  chain_bench::prepare_input<kThreads, kNormVectors>(a, kind, q, scales, norm_partial, interleaved,
                                                     [] { consumer_barrier<kThreads>(); });
}

// The block's slice of the residual and of the norm weight (its blocks of 32 of the output and
// down stages' outputs, the same in both), kept in shared memory by the handover so that it
// reads neither from global memory.
struct ResidualSlice {
  float* x;           // [256] f32
  const float* norm;  // [256] f32
};

// Handover, after stage s's tiles (every consumer warp): warp w takes the block's blocks of 32
// outputs w, w + warps, …: stores q|k|v's (the attention would read them), updates the residual
// (stored after the `last` stage only), and quantizes what the next stage multiplies (the
// residual times the norm weight; the RMS scale comes later) into buffer s & 1.
template <int kConsumers>
__device__ void hand_over(const RingKernelArgs& k, const RingStage& st, int s, bool last,
                          const float* staged, const ResidualSlice& slice, int warp, int lane) {
  const PersistentChainArgs& a = k.a;
  const int buf = s & 1;
  int8_t* hq = k.hand_q + buf * kHandQ;
  float* hs = k.hand_scales + buf * kHandScales;
  double* hp = k.hand_partials + buf * kHandPartials;
  for (int g = warp; g < st.num_groups; g += kConsumers) {
    const int64_t e = st.first_output + 32 * g + lane;
    float v = staged[32 * g + lane];
    if (st.kind == kQkvStage) {
      __stcg(a.qkv + e, v);  // q's blocks only: k|v tiles are stored by write_tile
    } else if (st.kind == kGateUpStage) {
      // SwiGLU's output reaches the down stage handed over only: nothing stores it.
    } else {
      const float xn = slice.x[32 * g + lane] + v;
      slice.x[32 * g + lane] = xn;
      if (last) __stcg(a.x + e, xn);  // the slice holds it until then
      double sq = static_cast<double>(__fmul_rn(xn, xn));
      CELLM_UNROLL
      for (int offset = 16; offset > 0; offset >>= 1) {
        sq += __shfl_xor_sync(0xffffffffu, sq, offset);
      }
      if (lane == 0) hp[e / 32] = sq;
      v = xn * slice.norm[32 * g + lane];
    }
    float amax = fabsf(v);
    CELLM_UNROLL
    for (int offset = 16; offset > 0; offset >>= 1) {
      amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, offset));
    }
    const float scale = q8_block_scale(amax);
    hq[k.block_major ? e : interleaved_q8_offset(e)] = q8_quantize(v, scale);
    if (lane == 0) hs[e / 32] = scale;
  }
}

// Handover: stage `kind`'s input from buffer `buf` into shared memory; a normed input's block
// scales times the RMS scale of the residual's sums of squares.
template <int kThreads>
__device__ void take_handover(const RingKernelArgs& k, int kind, int buf, int8_t* q, float* scales,
                              double* norm_partial) {
  const PersistentChainArgs& a = k.a;
  const int64_t cols = kind == kDownStage ? a.ffn : a.hidden;
  const bool normed = kind == kQkvStage || kind == kGateUpStage;
  const int8_t* hq = k.hand_q + buf * kHandQ;
  const float* hs = k.hand_scales + buf * kHandScales;
  const double* hp = k.hand_partials + buf * kHandPartials;
  const int tid = static_cast<int>(threadIdx.x);
#pragma unroll 4
  for (int64_t i = tid; i < cols / 16; i += kThreads) {
    reinterpret_cast<uint4*>(q)[i] = __ldcg(reinterpret_cast<const uint4*>(hq) + i);
  }
  float rms = 1.0f;
  if (normed) {
    double sum = tid < a.hidden / 32 ? __ldcg(hp + tid) : 0.0;
    CELLM_UNROLL
    for (int offset = 16; offset > 0; offset >>= 1) {
      sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    }
    if ((tid & 31) == 0) norm_partial[tid >> 5] = sum;
    consumer_barrier<kThreads>();
    double total = 0.0;
    for (int w = 0; w < kThreads / 32; ++w) total += norm_partial[w];
    rms = rms_inverse(total, a.hidden, a.norm_eps);
  }
  for (int64_t j = tid; j < cols / 32; j += kThreads) scales[j] = __ldcg(hs + j) * rms;
  consumer_barrier<kThreads>();
}

}  // namespace cellm::kernels::ring

#endif  // __CUDA_ARCH__ >= 900
