// gemv_decode_float: the fused decode product (gemv_decode.cuh) for F32 weights (16-byte chunks
// of 4 elements) and F16 / BF16 weights (16-byte chunks of 8), two rows per block, four chunks
// per row in flight — except one BF16 token row without a norm (the output and down products of
// batch-1 decode): four rows per block, two chunks per row in flight (measured on the H200:
// 4096×4096 16% and 4096×14336 3% faster; with the norm prologue two rows stay faster).
#include "backends/cuda/kernels/gemv_decode.cuh"

namespace cellm::kernels {

cudaError_t launch_gemv_decode_f32_weights(const DecodeGemvArgs& a, cudaStream_t stream) {
  return launch_gemv_decode_f32<DecodeF32, 2, 4>(a, stream);
}

cudaError_t launch_gemv_decode_f16(const DecodeGemvArgs& a, cudaStream_t stream) {
  return launch_gemv_decode_f32<DecodeF16x8, 2, 4>(a, stream);
}

cudaError_t launch_gemv_decode_bf16(const DecodeGemvArgs& a, cudaStream_t stream) {
  if (a.norm_weight == nullptr && a.num_tokens <= 1) {
    return launch_gemv_decode_m<DecodeBF16x8, 4, 1, 2, DecodeF32Input<false>>(a, stream);
  }
  return launch_gemv_decode_f32<DecodeBF16x8, 2, 4>(a, stream);
}

}  // namespace cellm::kernels
