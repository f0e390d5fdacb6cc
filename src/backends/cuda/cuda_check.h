// cuda_check: CUDA runtime, driver and cuBLAS error codes turned into cellm Statuses.
//
// `CELLM_CUDA_RETURN_IF_ERROR(cudaMalloc(&p, n));` returns an internal/resource-exhausted Status
// naming the call and the CUDA error from the enclosing function; CELLM_CU_RETURN_IF_ERROR does
// the same for driver calls (CUresult), CELLM_CUBLAS_RETURN_IF_ERROR for cuBLAS. Out-of-memory
// errors become kResourceExhausted so callers can tell "no room" from a broken device.
// CELLM_CUDA_CHECK is for calls that cannot fail unless cellm has a bug (a destructor's free).
// Only code under src/backends/cuda includes this (it includes CUDA headers).
// Thread-safety: pure functions.
#pragma once

#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_runtime.h>

#include <string>
#include <string_view>

#include "core/check.h"
#include "core/status.h"

namespace cellm {

// OK for cudaSuccess; otherwise "<what>: <error name> (<error string>)".
Status cuda_status(cudaError_t error, std::string_view what);
Status cu_status(CUresult result, std::string_view what);
Status cublas_status(cublasStatus_t status, std::string_view what);

// The last launch error (cudaGetLastError), as a Status naming the kernel launched.
Status last_launch_status(std::string_view kernel);

}  // namespace cellm

#define CELLM_CUDA_RETURN_IF_ERROR(expr) CELLM_RETURN_IF_ERROR(::cellm::cuda_status((expr), #expr))
#define CELLM_CU_RETURN_IF_ERROR(expr) CELLM_RETURN_IF_ERROR(::cellm::cu_status((expr), #expr))
#define CELLM_CUBLAS_RETURN_IF_ERROR(expr) \
  CELLM_RETURN_IF_ERROR(::cellm::cublas_status((expr), #expr))

// For calls that fail only through a bug or a dead device (frees, event queries in destructors).
#define CELLM_CUDA_CHECK(expr)                                          \
  do {                                                                  \
    const cudaError_t cellm_cuda_error_ = (expr);                       \
    CELLM_CHECK(cellm_cuda_error_ == cudaSuccess)                       \
        << #expr << ": " << cudaGetErrorName(cellm_cuda_error_) << " (" \
        << cudaGetErrorString(cellm_cuda_error_) << ")";                \
  } while (false)
