// gemv_group_stream: the one-token row-group loop of the handover kernels (gemv_handover.cu,
// gemv_swiglu_handover.cu), whose blocks run several row groups back to back with one chunk per
// row in flight. It knows the decoders and inputs of gemv_decode_inputs.cuh, not what a kernel
// does with its sums. Device code; include only from .cu files. Thread-safety: called by every
// thread of a sub-block of kDecodeThreads threads.
#pragma once

#include "backends/cuda/kernels/gemv_decode_inputs.cuh"

namespace cellm::kernels {

// acc += one row group's sums over thread `first`'s chunks first, first + kDecodeThreads, … of
// its R rows (`rows`), the same operations in the same order as gemv_decode_kernel's (D = 1), so
// the same sums bit for bit. `chunks` holds each row's chunk `first` on entry; each chunk's
// registers are refilled right after use with the row's next chunk and, past the group's end
// when has_next, with chunk `first` of the row next_group_bytes further on — the next group's
// first chunks — so the weight stream does not stop between a block's groups.
template <class Decoder, class Input, int R>
__device__ __forceinline__ void accumulate_group_streaming(
    const DecodeGemvArgs& a, const typename Input::template State<1>& state,
    const uint8_t* const (&rows)[R], int64_t first, bool has_next, uint64_t next_group_bytes,
    typename Decoder::Chunk (&chunks)[1][R], float (&acc)[R][1]) {
  const int64_t num_chunks = a.num_cols / Decoder::kChunkElems;
  for (int64_t c = first; c < num_chunks; c += kDecodeThreads) {
    Input::template accumulate<Decoder, R, 1>(chunks[0], a, state, c, acc);
    const int64_t next = c + kDecodeThreads;
    if (next < num_chunks) {
      CELLM_UNROLL
      for (int r = 0; r < R; ++r) chunks[0][r] = Decoder::load(rows[r], a.num_cols, next);
    } else if (has_next) {
      CELLM_UNROLL
      for (int r = 0; r < R; ++r) {
        chunks[0][r] = Decoder::load(rows[r] + next_group_bytes, a.num_cols, first);
      }
    }
  }
}

}  // namespace cellm::kernels
