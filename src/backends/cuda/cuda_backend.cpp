#include "backends/cuda/cuda_backend.h"

#include <cuda_runtime.h>

#include <string>

#include "backends/cuda/cuda_executor.h"
#include "backends/cuda/driver_api.h"

namespace cellm {
namespace {

constexpr int kRequiredMajor = 9;  // the build targets sm_90a

}  // namespace

bool cuda_device_available() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();  // clear the sticky "no device" error
    return false;
  }
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) return false;
  return prop.major == kRequiredMajor && driver_api().ok();
}

std::string cuda_device_summary() {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess || count == 0) {
    cudaGetLastError();
    return std::string("no CUDA device (") + cudaGetErrorString(error) + ")";
  }
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) return "CUDA device 0 unreadable";
  int driver = 0;
  cudaDriverGetVersion(&driver);
  std::string summary = std::string(prop.name) + ", " + std::to_string(prop.multiProcessorCount) +
                        " SMs, " + std::to_string(prop.totalGlobalMem / (uint64_t{1} << 20)) +
                        " MiB, compute " + std::to_string(prop.major) + "." +
                        std::to_string(prop.minor) + ", driver " + std::to_string(driver / 1000) +
                        "." + std::to_string(driver % 1000 / 10);
  if (prop.major != kRequiredMajor) summary += " (cellm is built for compute 9.0 only)";
  return summary;
}

StatusOr<std::unique_ptr<Executor>> make_cuda_executor(const ModelConfig& config,
                                                       const ModelWeights& weights,
                                                       const ProgramSpec& spec,
                                                       const CudaExecutorOptions& options) {
  if (!cuda_device_available()) {
    return failed_precondition("--backend cuda: no usable CUDA device: " + cuda_device_summary());
  }
  return std::unique_ptr<Executor>(new CudaExecutor(config, weights, spec, options));
}

}  // namespace cellm
