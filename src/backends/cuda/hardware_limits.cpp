#include "backends/cuda/hardware_limits.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device_memory.h"
#include "backends/cuda/kernels/random_fill.cuh"

namespace cellm {
namespace {

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// Median milliseconds of `repeats` runs of `body` on `stream` after `warmup` runs.
template <typename Body>
StatusOr<double> time_ms(cudaStream_t stream, int warmup, int repeats, Body body) {
  CELLM_ASSIGN_OR_RETURN(CudaEvent start, CudaEvent::create(true));
  CELLM_ASSIGN_OR_RETURN(CudaEvent stop, CudaEvent::create(true));
  for (int i = 0; i < warmup; ++i) CELLM_RETURN_IF_ERROR(body(i));
  std::vector<double> times;
  for (int i = 0; i < repeats; ++i) {
    CELLM_CUDA_RETURN_IF_ERROR(cudaEventRecord(start.get(), stream));
    CELLM_RETURN_IF_ERROR(body(i));
    CELLM_CUDA_RETURN_IF_ERROR(cudaEventRecord(stop.get(), stream));
    CELLM_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(stop.get()));
    float ms = 0.0f;
    CELLM_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, start.get(), stop.get()));
    times.push_back(ms);
  }
  return median(times);
}

Status fill(void* data, TensorType type, int64_t rows, int64_t cols, uint64_t seed,
            cudaStream_t stream) {
  kernels::RandomFillParams p;
  p.data = data;
  p.type = type;
  p.num_rows = rows;
  p.num_cols = cols;
  p.seed = seed;
  p.scale = 1.0f;
  return kernels::launch_random_fill(p, stream);
}

}  // namespace

StatusOr<HardwareLimits> measure_hardware_limits(int device) {
  HardwareLimits limits;
  CELLM_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  CELLM_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&limits.num_sms, cudaDevAttrMultiProcessorCount, device));
  CELLM_ASSIGN_OR_RETURN(CudaStream stream, CudaStream::create());

  // Bandwidth: copy 1 GiB (well past the 50 MiB L2) between two random buffers.
  {
    constexpr int64_t kCols = 1 << 14;
    constexpr int64_t kRows = (int64_t{1} << 30) / (kCols * 4);
    const size_t bytes = static_cast<size_t>(kRows * kCols * 4);
    CELLM_ASSIGN_OR_RETURN(DeviceBuffer a, DeviceBuffer::allocate(bytes));
    CELLM_ASSIGN_OR_RETURN(DeviceBuffer b, DeviceBuffer::allocate(bytes));
    CELLM_RETURN_IF_ERROR(fill(a.data(), TensorType::kF32, kRows, kCols, 11, stream.get()));
    CELLM_RETURN_IF_ERROR(fill(b.data(), TensorType::kF32, kRows, kCols, 12, stream.get()));
    CELLM_ASSIGN_OR_RETURN(
        const double ms, time_ms(stream.get(), 3, 15, [&](int i) {
          void* src = i % 2 == 0 ? a.data() : b.data();
          void* dst = i % 2 == 0 ? b.data() : a.data();
          return cuda_status(
              cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream.get()),
              "bandwidth copy");
        }));
    limits.bandwidth_bytes_per_s = 2.0 * static_cast<double>(bytes) / (ms * 1e-3);
  }

  // Tensor cores: C[n, n] = A · B in bf16 with f32 accumulation, n = 8192.
  {
    constexpr int64_t n = 8192;
    const size_t bytes = static_cast<size_t>(n * n * 2);
    CELLM_ASSIGN_OR_RETURN(DeviceBuffer a, DeviceBuffer::allocate(bytes));
    CELLM_ASSIGN_OR_RETURN(DeviceBuffer b, DeviceBuffer::allocate(bytes));
    CELLM_ASSIGN_OR_RETURN(DeviceBuffer c, DeviceBuffer::allocate(bytes));
    CELLM_RETURN_IF_ERROR(fill(a.data(), TensorType::kBF16, n, n, 21, stream.get()));
    CELLM_RETURN_IF_ERROR(fill(b.data(), TensorType::kBF16, n, n, 22, stream.get()));
    cublasHandle_t handle = nullptr;
    CELLM_CUBLAS_RETURN_IF_ERROR(cublasCreate(&handle));
    const Status status = [&]() -> Status {
      CELLM_CUBLAS_RETURN_IF_ERROR(cublasSetStream(handle, stream.get()));
      const float one = 1.0f;
      const float zero = 0.0f;
      CELLM_ASSIGN_OR_RETURN(
          const double ms, time_ms(stream.get(), 3, 10, [&](int) {
            return cublas_status(
                cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, n, n, n, &one, a.data(), CUDA_R_16BF,
                             n, b.data(), CUDA_R_16BF, n, &zero, c.data(), CUDA_R_16BF, n,
                             CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                "bf16 GEMM");
          }));
      limits.bf16_flops_per_s = 2.0 * static_cast<double>(n) * n * n / (ms * 1e-3);
      return ok_status();
    }();
    cublasDestroy(handle);
    CELLM_RETURN_IF_ERROR(status);
  }
  return limits;
}

}  // namespace cellm
