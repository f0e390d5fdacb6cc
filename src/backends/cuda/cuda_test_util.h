// Helpers shared by the CUDA backend's tests: a device is required (a machine without one fails
// the test with a clear message, never skips it), and small copies back to the host.
// Test code only. Thread-safety: one test thread.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace cellm::testing {

// Adds a fatal failure unless a CUDA device is visible. Use as ASSERT_NO_FATAL_FAILURE(...).
inline void require_cuda_device() {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  ASSERT_TRUE(error == cudaSuccess && count > 0)
      << "no CUDA device visible (" << cudaGetErrorString(error)
      << "): CUDA tests run only on the device machine (ctest -L cuda); they fail, never skip";
}

// `count` int32 values from device memory.
inline std::vector<int32_t> copy_ints(const int32_t* device, size_t count) {
  std::vector<int32_t> host(count);
  if (count == 0) return host;
  const cudaError_t error =
      cudaMemcpy(host.data(), device, count * sizeof(int32_t), cudaMemcpyDeviceToHost);
  EXPECT_EQ(error, cudaSuccess) << cudaGetErrorString(error);
  return host;
}

}  // namespace cellm::testing
