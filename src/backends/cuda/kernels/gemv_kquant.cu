// gemv_kquant: the small-M products for interleaved Q4_K (four rows per block; two for M = 1 on
// matrices of few rows) and Q6_K (two rows per block) weights (gemv_kernel.cuh).
#include "backends/cuda/kernels/gemv_kernel.cuh"

namespace cellm::kernels {

void launch_gemv_q4_k(const GemvArgs& args, cudaStream_t stream) {
  launch_gemv_typed<DecodeQ4_K, 4, 2>(args, stream);
}

void launch_gemv_q6_k(const GemvArgs& args, cudaStream_t stream) {
  launch_gemv_typed<DecodeQ6_K, 2>(args, stream);
}

}  // namespace cellm::kernels
