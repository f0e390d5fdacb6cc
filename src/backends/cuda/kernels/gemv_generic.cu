// gemv_generic: the small-M product for GGUF-layout rows of any supported type, one warp per
// weight row and one element per lane step (gguf_element). Correct for every row length; used
// where the fast layouts do not apply (quantized rows not a multiple of 256 elements, float rows
// not a multiple of 4).
#include "backends/cuda/kernels/gemv_launch.h"
#include "backends/cuda/kernels/weight_decode.cuh"

namespace cellm::kernels {
namespace {

constexpr int kWarpsPerBlock = 4;

template <int M>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    gemv_generic_kernel(const GemvArgs args, TensorType type) {
  const int lane = threadIdx.x & 31;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
  if (row >= args.num_rows) return;
  const uint8_t* w = args.w + row * static_cast<int64_t>(args.row_bytes);
  float acc[M];
  CELLM_UNROLL
  for (int t = 0; t < M; ++t) acc[t] = 0.0f;
  for (int64_t e = lane; e < args.num_cols; e += 32) {
    const float value = gguf_element(type, w, e);
    CELLM_UNROLL
    for (int t = 0; t < M; ++t) {
      if (t < args.num_tokens) acc[t] = fmaf(value, args.x[t * args.x_stride + e], acc[t]);
    }
  }
  CELLM_UNROLL
  for (int t = 0; t < M; ++t) {
    float v = acc[t];
    CELLM_UNROLL
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    if (lane == 0 && t < args.num_tokens) {
      float* out = args.y + t * args.y_stride + row;
      *out = args.accumulate ? *out + v : v;
    }
  }
}

}  // namespace

void launch_gemv_generic(const GemvArgs& args, TensorType type, cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>(ceil_div(args.num_rows, kWarpsPerBlock));
  const unsigned threads = kWarpsPerBlock * 32;
  if (args.num_tokens <= 1) {
    gemv_generic_kernel<1><<<blocks, threads, 0, stream>>>(args, type);
  } else if (args.num_tokens <= 2) {
    gemv_generic_kernel<2><<<blocks, threads, 0, stream>>>(args, type);
  } else if (args.num_tokens <= 4) {
    gemv_generic_kernel<4><<<blocks, threads, 0, stream>>>(args, type);
  } else {
    gemv_generic_kernel<8><<<blocks, threads, 0, stream>>>(args, type);
  }
}

}  // namespace cellm::kernels
