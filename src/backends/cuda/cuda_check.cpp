#include "backends/cuda/cuda_check.h"

#include "backends/cuda/driver_api.h"

namespace cellm {

Status cuda_status(cudaError_t error, std::string_view what) {
  if (error == cudaSuccess) return ok_status();
  std::string message =
      std::string(what) + ": " + cudaGetErrorName(error) + " (" + cudaGetErrorString(error) + ")";
  if (error == cudaErrorMemoryAllocation) return resource_exhausted(std::move(message));
  return internal_error(std::move(message));
}

Status cu_status(CUresult result, std::string_view what) {
  if (result == CUDA_SUCCESS) return ok_status();
  const char* name = nullptr;
  const char* text = nullptr;
  const StatusOr<const DriverApi*> api = driver_api();
  if (api.ok()) {
    (*api)->get_error_name(result, &name);
    (*api)->get_error_string(result, &text);
  }
  std::string message = std::string(what) + ": " + (name != nullptr ? name : "CUDA driver error") +
                        " (" + (text != nullptr ? text : "no description") + ")";
  if (result == CUDA_ERROR_OUT_OF_MEMORY) return resource_exhausted(std::move(message));
  return internal_error(std::move(message));
}

Status cublas_status(cublasStatus_t status, std::string_view what) {
  if (status == CUBLAS_STATUS_SUCCESS) return ok_status();
  std::string message = std::string(what) + ": " + cublasGetStatusName(status) + " (" +
                        cublasGetStatusString(status) + ")";
  if (status == CUBLAS_STATUS_ALLOC_FAILED) return resource_exhausted(std::move(message));
  return internal_error(std::move(message));
}

Status last_launch_status(std::string_view kernel) {
  return cuda_status(cudaGetLastError(), std::string("launch of ") + std::string(kernel));
}

}  // namespace cellm
