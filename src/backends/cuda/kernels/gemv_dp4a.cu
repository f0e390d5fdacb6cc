// gemv_dp4a: the small-M products of interleaved Q8_0 and Q4_0 weights with int8 activations
// (gemv_kernel.cuh with the Q8Input policy): one dp4a per group of 4 weights instead of four
// FMAs and their conversions. Rows per block as the f32-activation kernels.
#include "backends/cuda/kernels/gemv_kernel.cuh"

namespace cellm::kernels {

void launch_gemv_q8_0_dp4a(const GemvArgs& args, cudaStream_t stream) {
  launch_gemv_typed<DecodeQ8_0, 2, 1, Q8Input>(args, stream);
}

void launch_gemv_q4_0_dp4a(const GemvArgs& args, cudaStream_t stream) {
  launch_gemv_typed<DecodeQ4_0, 4, 1, Q8Input>(args, stream);
}

}  // namespace cellm::kernels
