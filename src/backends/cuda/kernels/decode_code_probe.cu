// decode_code_probe: a straight block of FMAs run three times by one warp (see the header).
#include "backends/cuda/kernels/decode_code_probe.h"

namespace cellm::kernels {
namespace {

// Four independent FMA chains, kInstructions instructions in all, unrolled into straight code.
template <int kInstructions>
__global__ void __launch_bounds__(32, 1) code_probe_kernel(uint64_t* cycles, float seed) {
  float a = seed, b = seed * 0.5f, c = seed * 0.25f, d = seed * 0.125f;
  const float m = 0.999f;
  long long start = clock64();
#pragma unroll 1
  for (int pass = 0; pass < kCodeProbePasses; ++pass) {
#pragma unroll
    for (int i = 0; i < kInstructions / 4; ++i) {
      asm volatile("fma.rn.f32 %0, %0, %1, %1;" : "+f"(a) : "f"(m));
      asm volatile("fma.rn.f32 %0, %0, %1, %1;" : "+f"(b) : "f"(m));
      asm volatile("fma.rn.f32 %0, %0, %1, %1;" : "+f"(c) : "f"(m));
      asm volatile("fma.rn.f32 %0, %0, %1, %1;" : "+f"(d) : "f"(m));
    }
    const long long end = clock64();
    if (threadIdx.x == 0) cycles[pass] = static_cast<uint64_t>(end - start);
    start = clock64();
  }
  // The sums stay observable, so that nothing above is dead.
  if (a + b + c + d == 12345.0f) cycles[kCodeProbePasses] = 1;
}

template <int kInstructions>
cudaError_t launch(uint64_t* cycles, cudaStream_t stream) {
  code_probe_kernel<kInstructions><<<1, 32, 0, stream>>>(cycles, 1.0f);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_code_probe(int instructions, uint64_t* cycles, cudaStream_t stream) {
  if (cycles == nullptr) return cudaErrorInvalidValue;
  switch (instructions) {
    case 256:
      return launch<256>(cycles, stream);
    case 512:
      return launch<512>(cycles, stream);
    case 1024:
      return launch<1024>(cycles, stream);
    case 2048:
      return launch<2048>(cycles, stream);
    case 4096:
      return launch<4096>(cycles, stream);
    case 8192:
      return launch<8192>(cycles, stream);
    case 16384:
      return launch<16384>(cycles, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace cellm::kernels
