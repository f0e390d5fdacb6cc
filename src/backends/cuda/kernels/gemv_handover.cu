// gemv_handover: the one-token Q8_0 / Q4_0 product on int8 input that adds its output into the
// residual stream and hands it to the next product as its normed int8 input
// (DecodeOutput::kAddHandover, decode_matmul.cuh): the output and down products of a batch-1
// layer, so that gate|up, q|k|v and the LM head after them need no quantize launch.
//
// A block owns one block of 32 outputs: kSub sub-blocks of 128 threads each run kGroups row
// groups of R rows exactly as gemv_decode_kernel runs one (thread t: chunks t, t + 128, … of each
// row, a warp's partial sums by shuffles, the warps' in order: the same sums, bit for bit; the
// next group's first chunks loaded as the last ones are used), and the first warp — a block of 32
// is one warp — adds the 32 sums into the residual, quantizes them times the next norm weight and
// writes their sum of squares. No block waits for another: version 14 of docs/perf/decode.md
// measured products of 2–4 rows per block meeting across blocks (clusters, counters), and they
// lost more than the launches they saved. Version 19 measured gate|up handing down its SwiGLU
// values the same way (a block of 32 gate and 32 up rows): slower than the quantize launch.
#include <cstdlib>
#include <cstring>

#include "backends/cuda/kernels/gemv_decode.cuh"
#include "backends/cuda/kernels/gemv_group_stream.cuh"

namespace cellm::kernels {
namespace {

template <class Decoder, class Input, int R, int kSub, int kGroups>
__global__ void __launch_bounds__(kSub* kDecodeThreads, 1)
    gemv_handover_kernel(const DecodeGemvArgs a) {
  static_assert(kSub * kGroups * R == 32, "a block owns one block of 32 outputs");
  constexpr int M = 1;
  constexpr int kWarps = kSub * kDecodeWarps;
  pdl_trigger_at_start(a.trigger);
  const int sub = static_cast<int>(threadIdx.x) / kDecodeThreads;
  const int first = static_cast<int>(threadIdx.x) % kDecodeThreads;  // within the sub-block
  const int64_t num_chunks = a.num_cols / Decoder::kChunkElems;
  const int64_t first_group = (static_cast<int64_t>(blockIdx.x) * kSub + sub) * kGroups;
  const uint8_t* rows[R];
  decode_group_rows<R>(a, first_group, rows);

  // Weights first: nothing earlier writes them.
  typename Decoder::Chunk chunks[1][R];
  if (first < num_chunks) {
    CELLM_UNROLL
    for (int r = 0; r < R; ++r) chunks[0][r] = Decoder::load(rows[r], a.num_cols, first);
  }
  // The first warp's epilogue operands, their round trips overlapping the weights': the norm
  // weight and bias (weights) now, the residual once the kernel before has written it.
  const int64_t lane_output = 32 * static_cast<int64_t>(blockIdx.x) + (threadIdx.x & 31);
  const bool epilogue = threadIdx.x < 32;
  const float norm = epilogue ? a.handover.norm_weight[lane_output] : 0.0f;
  const float bias = epilogue && a.bias != nullptr ? a.bias[lane_output] : 0.0f;
  pdl_wait_then_trigger(a.trigger);
  const float residual = epilogue ? a.y[lane_output] : 0.0f;

  typename Input::template State<M> state;
  Input::template prepare<M>(a, state);
  __shared__ float partial[kGroups][kWarps][R * M];
  // The next group's rows: R rows further on (a block's outputs are 32 consecutive rows).
  const uint64_t group_step = static_cast<uint64_t>(R) * a.row_bytes;
  CELLM_UNROLL
  for (int j = 0; j < kGroups; ++j) {
    float acc[R][M];
    CELLM_UNROLL
    for (int r = 0; r < R; ++r) acc[r][0] = 0.0f;
    accumulate_group_streaming<Decoder, Input, R>(a, state, rows, first, j + 1 < kGroups,
                                                  group_step, chunks, acc);
    warp_partials<R, M, kWarps>(acc, partial[j]);
    CELLM_UNROLL
    for (int r = 0; r < R; ++r) rows[r] += group_step;
  }
  __syncthreads();
  if (threadIdx.x >= 32) return;

  // Lane l: output row 32 · block + l, row r of group j of sub-block s.
  const int lane = static_cast<int>(threadIdx.x);
  const int s = lane / (kGroups * R);
  const int j = (lane / R) % kGroups;
  const int r = lane % R;
  float sum = partial[j][s * kDecodeWarps][r];
  CELLM_UNROLL
  for (int w = 1; w < kDecodeWarps; ++w) sum += partial[j][s * kDecodeWarps + w][r];
  if (a.bias != nullptr) sum += bias;
  const float y = residual + sum;
  a.y[lane_output] = y;

  const DecodeHandover& h = a.handover;
  double squares = static_cast<double>(__fmul_rn(y, y));
  const float v = __fmul_rn(y, norm);
  float amax = fabsf(v);
  CELLM_UNROLL
  for (int offset = 16; offset > 0; offset >>= 1) {
    squares += __shfl_xor_sync(0xffffffffu, squares, offset);
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, offset));
  }
  const float scale = q8_block_scale(amax);
  h.q[interleaved_q8_offset(lane_output)] = q8_quantize(v, scale);
  if (lane == 0) {
    h.scales[blockIdx.x] = scale;
    h.sum_squares[blockIdx.x] = squares;
  }
}

template <class Decoder, int R, int kSub, int kGroups>
cudaError_t launch_shape(const DecodeGemvArgs& a, cudaStream_t stream) {
  // The input: per-32 scales (a quantize launch's, the attention's), or per 16 (handed-over
  // SwiGLU values: the down product).
  const auto kernel = a.x_q8_per_16
                          ? gemv_handover_kernel<Decoder, DecodeInt8Per16Input, R, kSub, kGroups>
                          : gemv_handover_kernel<Decoder, DecodeInt8Input, R, kSub, kGroups>;
  return launch_pdl(kernel, dim3(static_cast<unsigned>(a.num_rows / 32)),
                    dim3(kSub * kDecodeThreads), 0, stream, a);
}

// The block's shape: 'a' eight sub-blocks of one four-row group (1,024 threads held to 64
// registers), 'b' four sub-blocks of two four-row groups (512 threads), 'c' eight sub-blocks of
// two two-row groups (1,024 threads, 64 registers). H200, Llama-3.1-8B geometry, batch-1 step ms
// with the output and down products handing over (none: q8_0 2.508–2.510, q4_0 1.774–1.782):
// q8_0 'b' 2.414–2.417, 'c' 2.489–2.492; q4_0 'a' 1.880–1.886, 'c' 1.789–1.796 (the down product
// alone: 'a' 1.812–1.824, 'c' 1.755–1.767). Measured and dropped: eight-row groups, four two-row
// groups, 512 threads held to 64 registers (two blocks per SM), and 'c' with two chunks per row
// in flight (q4_0's down 1.862–1.866: it spills), each slower.
// CELLM_CUDA_HANDOVER_SHAPE in the environment overrides the type's default (for measurements).
char handover_shape(char fallback) {
  static const char shape = [] {
    const char* value = std::getenv("CELLM_CUDA_HANDOVER_SHAPE");
    return value != nullptr && std::strlen(value) == 1 ? value[0] : '\0';
  }();
  return shape >= 'a' && shape <= 'c' ? shape : fallback;
}

template <class Decoder>
cudaError_t launch_handover(const DecodeGemvArgs& a, char fallback, cudaStream_t stream) {
  switch (handover_shape(fallback)) {
    case 'a':
      return launch_shape<Decoder, 4, 8, 1>(a, stream);
    case 'b':
      return launch_shape<Decoder, 4, 4, 2>(a, stream);
    default:
      return launch_shape<Decoder, 2, 8, 2>(a, stream);
  }
}

}  // namespace

cudaError_t launch_gemv_handover_q8_0(const DecodeGemvArgs& a, cudaStream_t stream) {
  return launch_handover<DecodeQ8_0>(a, 'b', stream);
}

cudaError_t launch_gemv_handover_q4_0(const DecodeGemvArgs& a, cudaStream_t stream) {
  return launch_handover<DecodeQ4_0>(a, 'c', stream);
}

}  // namespace cellm::kernels
