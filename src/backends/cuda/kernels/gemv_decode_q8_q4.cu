// gemv_decode_q8_q4: the fused decode product (gemv_decode.cuh) for interleaved Q8_0 (two rows
// per block) and Q4_0 (four rows per block, so each activation load feeds four rows) weights,
// one chunk per row in flight (64 registers: eight blocks of 128 threads fit an SM, which keeps
// 64 KB of weights in flight per SM), with f32 activations (exact) or int8 activations (dp4a):
// quantized by a separate launch (x_q8) or by each block into its shared memory (int8_fold).
// One token of int8 Q8_0 rows of at most 4096 columns (q|k|v, output, gate|up, LM head of an
// 8B model) takes four rows per block as well: cuda_decode_bench on the H200, GB/s of weights
// two → four rows: q|k|v 3467 → 3557, output 3024 → 3158, gate|up 4263 → 4266, LM head
// 4519 → 4512; down (14336 columns) 3926 → 3760 keeps two.
#include "backends/cuda/kernels/gemv_decode.cuh"

namespace cellm::kernels {

cudaError_t launch_gemv_decode_q8_0(const DecodeGemvArgs& a, cudaStream_t stream) {
  if (a.output == DecodeOutput::kAddHandover) return launch_gemv_handover_q8_0(a, stream);
  if (a.output == DecodeOutput::kSwigluHandover) {
    return launch_gemv_swiglu_handover_q8_0(a, stream);
  }
  if (a.x_q8_per_16) {  // one token of handed-over SwiGLU values
    return launch_gemv_decode_m<DecodeQ8_0, 2, 1, 1, DecodeInt8Per16Input>(a, stream);
  }
  if (a.x_q8_sum_squares != nullptr) {  // one token, handed over
    if (a.num_cols <= 4096) {
      return launch_gemv_decode_m<DecodeQ8_0, 4, 1, 1, DecodeInt8NormedInput>(a, stream);
    }
    return launch_gemv_decode_m<DecodeQ8_0, 2, 1, 1, DecodeInt8NormedInput>(a, stream);
  }
  if (a.x_q8 != nullptr) {
    if (a.num_tokens == 1 && a.num_cols <= 4096) {
      return launch_gemv_decode_m<DecodeQ8_0, 4, 1, 1, DecodeInt8Input>(a, stream);
    }
    return launch_gemv_decode_typed<DecodeQ8_0, 2, 1, DecodeInt8Input>(a, stream);
  }
  if (a.int8_fold)
    return launch_gemv_decode_typed<DecodeQ8_0, 2, 1, DecodeInt8FoldInput>(a, stream);
  return launch_gemv_decode_f32<DecodeQ8_0, 2, 1>(a, stream);
}

cudaError_t launch_gemv_decode_q4_0(const DecodeGemvArgs& a, cudaStream_t stream) {
  if (a.output == DecodeOutput::kAddHandover) return launch_gemv_handover_q4_0(a, stream);
  if (a.output == DecodeOutput::kSwigluHandover) {
    return launch_gemv_swiglu_handover_q4_0(a, stream);
  }
  if (a.x_q8_per_16) {  // one token of handed-over SwiGLU values
    return launch_gemv_decode_m<DecodeQ4_0, 4, 1, 1, DecodeInt8Per16Input>(a, stream);
  }
  if (a.x_q8_sum_squares != nullptr) {  // one token, handed over
    return launch_gemv_decode_m<DecodeQ4_0, 4, 1, 1, DecodeInt8NormedInput>(a, stream);
  }
  if (a.x_q8 != nullptr) {
    return launch_gemv_decode_typed<DecodeQ4_0, 4, 1, DecodeInt8Input>(a, stream);
  }
  if (a.int8_fold)
    return launch_gemv_decode_typed<DecodeQ4_0, 4, 1, DecodeInt8FoldInput>(a, stream);
  return launch_gemv_decode_f32<DecodeQ4_0, 4, 1>(a, stream);
}

}  // namespace cellm::kernels
