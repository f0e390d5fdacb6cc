// bench_kernels: benchmark-only kernels (bench_kernels.h).
#include "backends/cuda/kernels/bench_kernels.h"
#include "backends/cuda/kernels/gemv_kernel.cuh"

namespace cellm::kernels {
namespace {

template <class Decoder, int R>
void launch_one(const GemvArgs& args, cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>(ceil_div(args.num_rows, R));
  gemv_kernel<Decoder, R, 1><<<blocks, kGemvThreads, 0, stream>>>(args);
}

template <class Decoder>
bool launch_rows(int rows_per_block, const GemvArgs& args, cudaStream_t stream) {
  switch (rows_per_block) {
    case 1:
      launch_one<Decoder, 1>(args, stream);
      return true;
    case 2:
      launch_one<Decoder, 2>(args, stream);
      return true;
    case 4:
      launch_one<Decoder, 4>(args, stream);
      return true;
    case 8:
      launch_one<Decoder, 8>(args, stream);
      return true;
    default:
      return false;
  }
}

__global__ void __launch_bounds__(256) copy_kernel(const uint4* src, uint4* dst, size_t count) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    dst[i] = __ldcs(src + i);
  }
}

__global__ void __launch_bounds__(128) grid_barrier_kernel(int rounds, unsigned* sync) {
  unsigned* arrived = sync;
  volatile unsigned* generation = sync + 1;
  for (int r = 0; r < rounds; ++r) {
    __syncthreads();
    if (threadIdx.x == 0) {
      const unsigned seen = *generation;
      __threadfence();
      if (atomicAdd(arrived, 1u) == gridDim.x - 1) {
        atomicExch(arrived, 0u);
        __threadfence();
        atomicAdd(sync + 1, 1u);
      } else {
        while (*generation == seen) {
        }
        __threadfence();
      }
    }
    __syncthreads();
  }
}

}  // namespace

cudaError_t launch_grid_barrier_rounds(int blocks, int rounds, unsigned* sync,
                                       cudaStream_t stream) {
  void* args[] = {&rounds, &sync};
  return cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(grid_barrier_kernel),
                                     dim3(static_cast<unsigned>(blocks)), dim3(128), args, 0,
                                     stream);
}

void launch_copy_kernel(const void* src, void* dst, size_t bytes, cudaStream_t stream) {
  int device = 0;
  int sms = 132;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  copy_kernel<<<static_cast<unsigned>(sms * 8), 256, 0, stream>>>(
      static_cast<const uint4*>(src), static_cast<uint4*>(dst), bytes / 16);
}

bool launch_gemv_variant(TensorType type, int rows_per_block, const GemvArgs& args,
                         cudaStream_t stream) {
  switch (type) {
    case TensorType::kBF16:
      return launch_rows<DecodeBF16>(rows_per_block, args, stream);
    case TensorType::kQ8_0:
      return launch_rows<DecodeQ8_0>(rows_per_block, args, stream);
    case TensorType::kQ4_0:
      return launch_rows<DecodeQ4_0>(rows_per_block, args, stream);
    case TensorType::kQ4_K:
      return launch_rows<DecodeQ4_K>(rows_per_block, args, stream);
    case TensorType::kQ6_K:
      return launch_rows<DecodeQ6_K>(rows_per_block, args, stream);
    default:
      return false;
  }
}

}  // namespace cellm::kernels
