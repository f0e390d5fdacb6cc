// gemv_q8_q4: the small-M products for interleaved Q8_0 (two rows per block) and Q4_0 (four rows
// per block, so each activation load feeds four rows' 4-bit weights) (gemv_kernel.cuh); one row
// per block for M = 1 on matrices of few rows.
#include "backends/cuda/kernels/gemv_kernel.cuh"

namespace cellm::kernels {

void launch_gemv_q8_0(const GemvArgs& args, cudaStream_t stream) {
  launch_gemv_typed<DecodeQ8_0, 2, 1>(args, stream);
}

void launch_gemv_q4_0(const GemvArgs& args, cudaStream_t stream) {
  launch_gemv_typed<DecodeQ4_0, 4, 1>(args, stream);
}

}  // namespace cellm::kernels
