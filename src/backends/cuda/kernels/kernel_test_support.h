// kernel_test_support: what every CUDA kernel parity test shares — seeded random inputs (never
// zeros), random GGUF weight rows of every supported type, the CPU oracle's dequantization,
// device arrays that are poisoned with NaN before a kernel writes them, and the parity check.
//
// Adding a parity test for a new op: build inputs with random_floats(), compute the reference
// with the CPU op from cpu_ops.h, and call
//   expect_parity("my_op", out, [&] { ASSERT_TRUE(launch_my_op(params, nullptr).ok()); }, ref,
//   tol);
// which poisons `out`, runs the lambda, synchronizes, downloads and compares ‖out − ref‖ / ‖ref‖
// (any NaN fails: an unwritten element stays NaN). Tests only; never linked into the backend.
// Thread-safety: single-threaded test code.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/check.h"
#include "gguf/tensor_type.h"
#include "model/model_weights.h"

namespace cellm::kernels::testing {

// Uniform in ±scale with |v| ≥ scale / 64: never zero. Deterministic in the seed.
std::vector<float> random_floats(size_t n, uint32_t seed, float scale = 1.0f);

// Uniform integers in [lo, hi].
std::vector<int32_t> random_ints(size_t n, uint32_t seed, int32_t lo, int32_t hi);

// `num_rows` GGUF rows of `num_cols` elements of `type` with random valid content: Q8_0 and Q4_0
// quantized from random floats, Q4_K and Q6_K random quants under sane f16 scales.
std::vector<uint8_t> random_gguf_rows(TensorType type, int64_t num_rows, int64_t num_cols,
                                      uint32_t seed);

// The CPU oracle's dequantization of GGUF rows: [num_rows, num_cols] f32.
std::vector<float> dequantize_rows(TensorType type, int64_t num_rows, int64_t num_cols,
                                   std::span<const uint8_t> gguf);

// A WeightView (for cpu_matmul / cpu_embed) over GGUF bytes the caller keeps alive.
WeightView weight_view(TensorType type, int64_t num_rows, int64_t num_cols,
                       std::span<const uint8_t> gguf);

// ‖out − ref‖₂ / ‖ref‖₂ in double; NaN when out has a NaN or sizes differ.
double relative_error(std::span<const float> out, std::span<const float> ref);

// Passes when relative_error ≤ tolerance; the message names `what`, the error and the first
// element that is NaN or differs most.
::testing::AssertionResult near_relative(std::string_view what, std::span<const float> out,
                                         std::span<const float> ref, double tolerance);

// Fails the test (never skips) when no CUDA device is visible.
void require_device();
#define CELLM_REQUIRE_DEVICE() ASSERT_NO_FATAL_FAILURE(::cellm::kernels::testing::require_device())

#define CELLM_CUDA_OK(expr)                                        \
  do {                                                             \
    const cudaError_t cellm_cuda_error_ = (expr);                  \
    CELLM_CHECK(cellm_cuda_error_ == cudaSuccess)                  \
        << #expr << ": " << cudaGetErrorString(cellm_cuda_error_); \
  } while (false)

// A device array of n elements of T (cudaMalloc'ed, 256-byte aligned), freed on destruction.
template <typename T>
class DeviceArray {
 public:
  DeviceArray() = default;
  explicit DeviceArray(size_t n) : size_(n) {
    if (n > 0) CELLM_CUDA_OK(cudaMalloc(&data_, n * sizeof(T)));
  }
  explicit DeviceArray(std::span<const T> values) : DeviceArray(values.size()) { upload(values); }
  explicit DeviceArray(const std::vector<T>& values) : DeviceArray(std::span<const T>(values)) {}
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  DeviceArray(DeviceArray&& other) noexcept : data_(other.data_), size_(other.size_) {
    other.data_ = nullptr;
    other.size_ = 0;
  }
  DeviceArray& operator=(DeviceArray&& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
    return *this;
  }
  ~DeviceArray() {
    if (data_ != nullptr) cudaFree(data_);
  }

  T* get() const { return data_; }
  size_t size() const { return size_; }

  void upload(std::span<const T> values) {
    CELLM_CHECK(values.size() == size_) << "upload of " << values.size() << " into " << size_;
    if (size_ > 0) {
      CELLM_CUDA_OK(cudaMemcpy(data_, values.data(), size_ * sizeof(T), cudaMemcpyHostToDevice));
    }
  }
  std::vector<T> download() const {
    std::vector<T> values(size_);
    if (size_ > 0) {
      CELLM_CUDA_OK(cudaDeviceSynchronize());
      CELLM_CUDA_OK(cudaMemcpy(values.data(), data_, size_ * sizeof(T), cudaMemcpyDeviceToHost));
    }
    return values;
  }
  // All bits set: NaN as f32, f16 and bf16; -1 as an integer.
  void poison() {
    if (size_ > 0) CELLM_CUDA_OK(cudaMemset(data_, 0xff, size_ * sizeof(T)));
  }

 private:
  T* data_ = nullptr;
  size_t size_ = 0;
};

// Poisons `out`, runs `run` (which launches the op on the default stream and may use gtest
// assertions), synchronizes, checks for a CUDA error, downloads `out` and expects it within
// `tolerance` of `ref` (near_relative).
void expect_parity(std::string_view what, DeviceArray<float>& out, const std::function<void()>& run,
                   std::span<const float> ref, double tolerance);

}  // namespace cellm::kernels::testing
