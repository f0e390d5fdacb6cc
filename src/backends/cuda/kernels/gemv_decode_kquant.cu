// gemv_decode_kquant: the fused decode product (gemv_decode.cuh) for interleaved Q4_K (four rows
// per block) and Q6_K (two rows) weights, one chunk per row in flight.
#include "backends/cuda/kernels/gemv_decode.cuh"

namespace cellm::kernels {

cudaError_t launch_gemv_decode_q4_k(const DecodeGemvArgs& a, cudaStream_t stream) {
  return launch_gemv_decode_f32<DecodeQ4_K, 4, 1>(a, stream);
}

cudaError_t launch_gemv_decode_q6_k(const DecodeGemvArgs& a, cudaStream_t stream) {
  return launch_gemv_decode_f32<DecodeQ6_K, 2, 1>(a, stream);
}

}  // namespace cellm::kernels
