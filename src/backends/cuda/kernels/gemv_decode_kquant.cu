// gemv_decode_kquant: the fused decode product (gemv_decode.cuh) for interleaved Q4_K (four rows
// per block) and Q6_K (two rows; int8: as many as Q4_K) weights, one chunk per row in flight,
// with f32 activations
// (exact) or int8 activations (dp4a: per group the scale and, for Q4_K, the min applied to the
// integer sums, accumulate_chunk_int8_k; with one activation scale per 256 columns, all in
// integers, accumulate_chunk_int8_k256) — quantized by a separate launch (x_q8) or by each block
// into its shared memory (int8_fold).
#include "backends/cuda/kernels/gemv_decode.cuh"

namespace cellm::kernels {

// int8 K-quants: four rows per block for one token, two for more (four rows of eight tokens of
// Q4_K hold 64 scales and mins in registers: 242 registers, two blocks per SM). H200,
// Llama-3.1-8B geometry, batch-1 step ms with four / two rows per block at one token: q4_k
// 2.483, 2.491 / 2.511, 2.510; q6_k 2.509, 2.505 / 2.531, 2.541.
template <class Decoder, class Input>
cudaError_t launch_gemv_decode_kquant_int8(const DecodeGemvArgs& a, cudaStream_t stream) {
  if (a.num_tokens <= 1) return launch_gemv_decode_m<Decoder, 4, 1, 1, Input>(a, stream);
  return launch_gemv_decode_typed<Decoder, 2, 1, Input>(a, stream);
}

// int8 activations quantized per 32 or per 256 columns by a launch, or by each block (int8_fold);
// else f32 activations over kF32Rows rows per block.
template <class Decoder, int kF32Rows>
cudaError_t launch_gemv_decode_kquant(const DecodeGemvArgs& a, cudaStream_t stream) {
  if (a.x_q8 != nullptr) {
    return a.x_q8_per_256
               ? launch_gemv_decode_kquant_int8<Decoder, DecodeInt8Per256Input>(a, stream)
               : launch_gemv_decode_kquant_int8<Decoder, DecodeInt8Input>(a, stream);
  }
  if (a.int8_fold) return launch_gemv_decode_kquant_int8<Decoder, DecodeInt8FoldInput>(a, stream);
  return launch_gemv_decode_f32<Decoder, kF32Rows, 1>(a, stream);
}

cudaError_t launch_gemv_decode_q4_k(const DecodeGemvArgs& a, cudaStream_t stream) {
  return launch_gemv_decode_kquant<DecodeQ4_K, 4>(a, stream);
}

cudaError_t launch_gemv_decode_q6_k(const DecodeGemvArgs& a, cudaStream_t stream) {
  return launch_gemv_decode_kquant<DecodeQ6_K, 2>(a, stream);
}

}  // namespace cellm::kernels
