// gemv_swiglu_handover: the one-token Q8_0 / Q4_0 [gate; up] product on int8 input that hands the
// next product (down) its SwiGLU values as int8 with one scale per 16 columns
// (DecodeOutput::kSwigluHandover, decode_matmul.cuh), so that no quantize launch runs between
// gate|up and down.
//
// A block of 128 threads owns 16 SwiGLU values: their 16 gate and 16 up rows, run as consecutive
// row groups of R rows (R / 2 gate rows and the R / 2 up rows that pair with them) exactly as
// gemv_decode_kernel runs a group (thread t: chunks t, t + 128, … of each row; a warp's partial
// sums by shuffles, the warps' in order: the same sums, bit for bit), each group's first chunks
// loaded as the group before uses its last ones, so the weight stream does not stop between
// groups. Then the first half-warp forms the 16 values and quantizes them as one block. Eight
// Q4_0 blocks share an SM, so an 8B model's 896 fit its SMs at once; no block waits for another.
//
// Version 19 of docs/perf/decode.md measured gate|up handing over per 32 (a block of 32 gate and
// 32 up rows in the output handover's 1,024-thread shape, 448 blocks): slower than the quantize
// launch it saved. Per 16, a block stays small and down's products still load two float4 of
// scales per chunk (per16_scale_index).
#include <type_traits>

#include "backends/cuda/kernels/gemv_decode.cuh"
#include "backends/cuda/kernels/gemv_group_stream.cuh"

namespace cellm::kernels {
namespace {

constexpr int kValuesPerBlock = 16;

// The blocks an SM holds: Q4_0's four rows fit 64 registers (eight blocks), Q8_0's take 80 (six:
// gemv_decode.cuh's decode_min_blocks_per_sm).
template <class Decoder>
constexpr int swiglu_handover_blocks_per_sm() {
  return std::is_same_v<Decoder, DecodeQ8_0> ? 6 : 8;
}

template <class Decoder, class Input, int R>
__global__ void __launch_bounds__(kDecodeThreads, (swiglu_handover_blocks_per_sm<Decoder>()))
    gemv_swiglu_handover_kernel(const DecodeGemvArgs a) {
  static_assert(R % 2 == 0 && kValuesPerBlock % (R / 2) == 0, "whole pairs per group");
  constexpr int M = 1;
  constexpr int kGroups = kValuesPerBlock / (R / 2);
  pdl_trigger_at_start(a.trigger);
  const int64_t num_chunks = a.num_cols / Decoder::kChunkElems;
  const int64_t first = threadIdx.x;
  const uint8_t* rows[R];
  decode_group_rows<R>(a, static_cast<int64_t>(blockIdx.x) * kGroups, rows);
  // The next group's rows: R / 2 rows further on, gate and up alike.
  const uint64_t group_step = static_cast<uint64_t>(R / 2) * a.row_bytes;

  // Weights first: nothing earlier writes them.
  typename Decoder::Chunk chunks[1][R];
  if (first < num_chunks) {
    CELLM_UNROLL
    for (int r = 0; r < R; ++r) chunks[0][r] = Decoder::load(rows[r], a.num_cols, first);
  }
  pdl_wait_then_trigger(a.trigger);

  typename Input::template State<M> state;
  Input::template prepare<M>(a, state);
  __shared__ float partial[kGroups][kDecodeWarps][R * M];
#pragma unroll 1
  for (int j = 0; j < kGroups; ++j) {
    float acc[R][M];
    CELLM_UNROLL
    for (int r = 0; r < R; ++r) acc[r][0] = 0.0f;
    accumulate_group_streaming<Decoder, Input, R>(a, state, rows, first, j + 1 < kGroups,
                                                  group_step, chunks, acc);
    warp_partials<R, M>(acc, partial[j]);
    CELLM_UNROLL
    for (int r = 0; r < R; ++r) rows[r] += group_step;
  }
  __shared__ double norm_partial[kDecodeWarps];
  if constexpr (kNormedAfter<Input>) Input::template reduce_norm<M>(state, norm_partial);
  __syncthreads();
  if (threadIdx.x >= 32) return;

  // Lane l (and l + 16, alike): value p = l % 16 of the block, pair p % (R / 2) of group
  // p / (R / 2); its gate sum is local row p % (R / 2), its up sum the row R / 2 further on.
  const int p = static_cast<int>(threadIdx.x) % kValuesPerBlock;
  const int j = p / (R / 2);
  const int pair = p % (R / 2);
  float gate = block_sum(partial[j], pair);
  float up = block_sum(partial[j], R / 2 + pair);
  if constexpr (kNormedAfter<Input>) {
    const float s = Input::norm_scale(a, norm_partial);
    gate *= s;
    up *= s;
  }
  const float v = a.gelu_tanh ? gelu_tanh_mul(gate, up) : silu_mul(gate, up);
  float amax = fabsf(v);
  CELLM_UNROLL
  for (int offset = kValuesPerBlock / 2; offset > 0; offset >>= 1) {
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, offset));
  }
  if (threadIdx.x >= kValuesPerBlock) return;
  const float scale = q8_block_scale(amax);
  const int64_t e = static_cast<int64_t>(blockIdx.x) * kValuesPerBlock + p;
  a.handover.q[interleaved_q8_offset(e)] = q8_quantize(v, scale);
  if (p == 0) a.handover.scales[per16_scale_index(e)] = scale;
}

template <class Decoder>
cudaError_t launch_swiglu_handover(const DecodeGemvArgs& a, cudaStream_t stream) {
  constexpr int R = 4;
  const auto kernel = a.x_q8_sum_squares != nullptr
                          ? gemv_swiglu_handover_kernel<Decoder, DecodeInt8NormedInput, R>
                          : gemv_swiglu_handover_kernel<Decoder, DecodeInt8Input, R>;
  const dim3 grid(static_cast<unsigned>(a.num_rows / 2 / kValuesPerBlock));
  return launch_pdl(kernel, grid, dim3(kDecodeThreads), 0, stream, a);
}

}  // namespace

cudaError_t launch_gemv_swiglu_handover_q8_0(const DecodeGemvArgs& a, cudaStream_t stream) {
  return launch_swiglu_handover<DecodeQ8_0>(a, stream);
}

cudaError_t launch_gemv_swiglu_handover_q4_0(const DecodeGemvArgs& a, cudaStream_t stream) {
  return launch_swiglu_handover<DecodeQ4_0>(a, stream);
}

}  // namespace cellm::kernels
