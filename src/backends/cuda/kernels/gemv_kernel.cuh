// gemv_kernel: the small-M matrix product kernel template, instantiated once per weight type in
// gemv_<type>.cu (small translation units). Device code; include only from .cu files.
//
// A block of 128 threads computes R consecutive output rows for all M tokens: thread t owns
// chunks t, t + 128, ... of each row (split-K inside the block, so the weight stream of a row is
// read by 128 threads with coalesced loads), loads the next chunk while it computes the current
// one, and the partial sums are reduced through warp shuffles and shared memory in a fixed order
// (deterministic). Grid: ceil(N / R) blocks.
#pragma once

#include "backends/cuda/kernels/gemv_chunk.cuh"
#include "backends/cuda/kernels/gemv_launch.h"
#include "backends/cuda/kernels/gemv_reduce.cuh"

namespace cellm::kernels {

inline constexpr int kGemvThreads = 128;

// The f32-activation input policy: accumulate_chunk (gemv_chunk.cuh).
struct F32Input {
  template <class Decoder, int R, int M>
  __device__ __forceinline__ static void accumulate(const typename Decoder::Chunk (&w)[R],
                                                    const GemvArgs& args, int64_t c,
                                                    float (&acc)[R][M]) {
    accumulate_chunk<Decoder, R, M>(w, args.x, args.x_stride, args.num_tokens, c, acc);
  }
};

// The int8-activation input policy (Q8_0 / Q4_0 weights only): accumulate_chunk_q8.
struct Q8Input {
  template <class Decoder, int R, int M>
  __device__ __forceinline__ static void accumulate(const typename Decoder::Chunk (&w)[R],
                                                    const GemvArgs& args, int64_t c,
                                                    float (&acc)[R][M]) {
    accumulate_chunk_q8<Decoder, R, M>(w, args.x_q8, args.x_q8_scales, args.num_cols,
                                       args.num_tokens, c, acc);
  }
};

template <class Decoder, int R, int M, class Input = F32Input>
__global__ void __launch_bounds__(kGemvThreads) gemv_kernel(const GemvArgs args) {
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * R;
  const uint8_t* rows[R];
  CELLM_UNROLL
  for (int r = 0; r < R; ++r) {
    const int64_t row = row0 + r < args.num_rows ? row0 + r : args.num_rows - 1;
    rows[r] = args.w + row * static_cast<int64_t>(args.row_bytes);
  }
  float acc[R][M];
  CELLM_UNROLL
  for (int r = 0; r < R; ++r) {
    CELLM_UNROLL
    for (int t = 0; t < M; ++t) acc[r][t] = 0.0f;
  }
  const int64_t num_chunks = args.num_cols / Decoder::kChunkElems;
  int64_t c = threadIdx.x;
  if (c < num_chunks) {
    typename Decoder::Chunk current[R];
    CELLM_UNROLL
    for (int r = 0; r < R; ++r) current[r] = Decoder::load(rows[r], args.num_cols, c);
    while (true) {
      const int64_t next = c + kGemvThreads;
      const bool more = next < num_chunks;
      typename Decoder::Chunk upcoming[R];
      if (more) {
        CELLM_UNROLL
        for (int r = 0; r < R; ++r) upcoming[r] = Decoder::load(rows[r], args.num_cols, next);
      }
      Input::template accumulate<Decoder, R, M>(current, args, c, acc);
      if (!more) break;
      CELLM_UNROLL
      for (int r = 0; r < R; ++r) current[r] = upcoming[r];
      c = next;
    }
  }

  __shared__ float partial[kGemvThreads / 32][R * M];
  warp_partials<R, M>(acc, partial);
  __syncthreads();
  if (threadIdx.x < R * M) {
    const int r = threadIdx.x / M;
    const int t = threadIdx.x % M;
    const int64_t row = row0 + r;
    if (row < args.num_rows && t < args.num_tokens) {
      const float sum = block_sum(partial, static_cast<int>(threadIdx.x));
      float* out = args.y + t * args.y_stride + row;
      *out = args.accumulate ? *out + sum : sum;
    }
  }
}

// Matrices with at most this many rows run M = 1 with kRowsFew rows per block: more, smaller
// blocks keep more loads in flight (measured on an H200: q8_0 and q4_0 at 4096 rows, 9 to 21%
// more bandwidth with one row per block; wider matrices prefer the default).
inline constexpr int64_t kGemvFewRows = 8192;

// Launches the instantiation for the smallest M ∈ {1, 2, 4, 8} that covers args.num_tokens.
template <class Decoder, int R, int kRowsFew = R, class Input = F32Input>
void launch_gemv_typed(const GemvArgs& args, cudaStream_t stream) {
  if (args.num_tokens <= 1 && args.num_rows <= kGemvFewRows) {
    const auto blocks = static_cast<unsigned>(ceil_div(args.num_rows, kRowsFew));
    gemv_kernel<Decoder, kRowsFew, 1, Input><<<blocks, kGemvThreads, 0, stream>>>(args);
    return;
  }
  const auto blocks = static_cast<unsigned>(ceil_div(args.num_rows, R));
  if (args.num_tokens <= 1) {
    gemv_kernel<Decoder, R, 1, Input><<<blocks, kGemvThreads, 0, stream>>>(args);
  } else if (args.num_tokens <= 2) {
    gemv_kernel<Decoder, R, 2, Input><<<blocks, kGemvThreads, 0, stream>>>(args);
  } else if (args.num_tokens <= 4) {
    gemv_kernel<Decoder, R, 4, Input><<<blocks, kGemvThreads, 0, stream>>>(args);
  } else {
    gemv_kernel<Decoder, R, 8, Input><<<blocks, kGemvThreads, 0, stream>>>(args);
  }
}

}  // namespace cellm::kernels
