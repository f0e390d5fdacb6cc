// launch_status: turns the CUDA runtime's error state after a kernel launch (or a cuBLAS call)
// into a Status naming the op, for the kernels' launch functions. Reading the last error is
// allowed during stream capture, so launch functions stay capturable.
// Thread-safety: reads the calling thread's CUDA error state.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>
#include <string_view>

#include "core/status.h"

namespace cellm::kernels {

// OK, or an internal error "<op>: <CUDA error name>: <description>" (and the error is cleared).
inline Status launch_status(std::string_view op) {
  const cudaError_t error = cudaGetLastError();
  if (error == cudaSuccess) return ok_status();
  return internal_error(std::string(op) + ": " + cudaGetErrorName(error) + ": " +
                        cudaGetErrorString(error));
}

inline Status cublas_status(cublasStatus_t status, std::string_view op) {
  if (status == CUBLAS_STATUS_SUCCESS) return ok_status();
  return internal_error(std::string(op) + ": cuBLAS " + cublasGetStatusName(status) + ": " +
                        cublasGetStatusString(status));
}

}  // namespace cellm::kernels
