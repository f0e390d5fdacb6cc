// gemv_float: the small-M products for F32, F16 and BF16 weights (gemv_kernel.cuh), two rows
// per block: a chunk is 4 elements, so activations are reused across two rows from registers.
#include "backends/cuda/kernels/gemv_kernel.cuh"

namespace cellm::kernels {

void launch_gemv_f32(const GemvArgs& args, cudaStream_t stream) {
  launch_gemv_typed<DecodeF32, 2>(args, stream);
}

void launch_gemv_f16(const GemvArgs& args, cudaStream_t stream) {
  launch_gemv_typed<DecodeF16, 2>(args, stream);
}

void launch_gemv_bf16(const GemvArgs& args, cudaStream_t stream) {
  launch_gemv_typed<DecodeBF16, 2>(args, stream);
}

}  // namespace cellm::kernels
