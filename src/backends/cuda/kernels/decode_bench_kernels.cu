// decode_bench_kernels: benchmark-only instantiations of the fused decode product
// (gemv_decode.cuh) with other rows-per-block / chunks-in-flight choices than the shipped ones,
// timed beside them at M = 1 to tune gemv_decode_<types>.cu. Not linked into the backend.
#include "backends/cuda/kernels/decode_bench_kernels.h"
#include "backends/cuda/kernels/decode_lane_q4_0.cuh"
#include "backends/cuda/kernels/gemv_decode.cuh"

namespace cellm::kernels {
namespace {

template <class Decoder, int R, int D, class Input>
cudaError_t launch_m1(const DecodeGemvArgs& a, cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>(ceil_div(a.num_rows, R));
  return launch_pdl(gemv_decode_kernel<Decoder, R, 1, D, Input>, dim3(blocks), dim3(kDecodeThreads),
                    0, stream, a);
}

template <int R, int D, int kMinBlocksPerSm = 8>
cudaError_t launch_lane(const DecodeGemvArgs& a, cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>(ceil_div(a.num_rows, R));
  return launch_pdl(gemv_decode_lane_q4_0_kernel<R, D, kMinBlocksPerSm>, dim3(blocks),
                    dim3(kDecodeThreads), 0, stream, a);
}

}  // namespace

std::vector<DecodeVariant> decode_variants(TensorType type, bool int8) {
  using F32 = DecodeF32Input<false>;
  using I8 = DecodeInt8Input;
  std::vector<DecodeVariant> v;
  switch (type) {
    case TensorType::kBF16:
      v = {{2, 2, launch_m1<DecodeBF16x8, 2, 2, F32>},
           {2, 4, launch_m1<DecodeBF16x8, 2, 4, F32>},
           {4, 2, launch_m1<DecodeBF16x8, 4, 2, F32>},
           {4, 4, launch_m1<DecodeBF16x8, 4, 4, F32>}};
      break;
    case TensorType::kQ8_0:
      v = int8 ? std::vector<DecodeVariant>{{2, 1, launch_m1<DecodeQ8_0, 2, 1, I8>},
                                            {2, 2, launch_m1<DecodeQ8_0, 2, 2, I8>},
                                            {4, 1, launch_m1<DecodeQ8_0, 4, 1, I8>}}
               : std::vector<DecodeVariant>{{2, 1, launch_m1<DecodeQ8_0, 2, 1, F32>},
                                            {4, 1, launch_m1<DecodeQ8_0, 4, 1, F32>}};
      break;
    case TensorType::kQ4_0:
      v = int8 ? std::vector<DecodeVariant>{{2, 1, launch_m1<DecodeQ4_0, 2, 1, I8>},
                                            {4, 1, launch_m1<DecodeQ4_0, 4, 1, I8>},
                                            {4, 2, launch_m1<DecodeQ4_0, 4, 2, I8>},
                                            {8, 1, launch_m1<DecodeQ4_0, 8, 1, I8>},
                                            {4, 1, launch_m1<DecodeQ4_0Lane, 4, 1, I8>, "L"},
                                            {4, 1, launch_lane<4, 1>, "K"},
                                            {6, 1, launch_lane<6, 1>, "K"},
                                            {8, 1, launch_lane<8, 1>, "K"},
                                            {8, 1, launch_lane<8, 1, 7>, "K7"}}
               : std::vector<DecodeVariant>{{2, 1, launch_m1<DecodeQ4_0, 2, 1, F32>},
                                            {4, 1, launch_m1<DecodeQ4_0, 4, 1, F32>}};
      break;
    default:
      break;
  }
  return v;
}

}  // namespace cellm::kernels
