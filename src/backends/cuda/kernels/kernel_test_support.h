// kernel_test_support: what every CUDA kernel parity test shares — seeded random inputs (never
// zeros), random GGUF weight rows of every supported type and their upload in the device layout,
// the CPU oracle's dequantization, the host's int8 activation quantization, strided rows made
// compact, KV-cache elements read back, device arrays that are poisoned with NaN before a kernel
// writes them, and the parity check.
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

#include "backends/cuda/kernels/weight_layout.h"
#include "backends/cuda/kernels/wide_act_order.cuh"
#include "core/check.h"
#include "core/status.h"
#include "gguf/tensor_type.h"
#include "model/model_weights.h"
#include "program/program_spec.h"

namespace cellm::kernels::testing {

// Uniform in ±scale with |v| ≥ scale / 64: never zero. Deterministic in the seed.
std::vector<float> random_floats(size_t n, uint32_t seed, float scale = 1.0f);

// Uniform integers in [lo, hi].
std::vector<int32_t> random_ints(size_t n, uint32_t seed, int32_t lo, int32_t hi);

// Four rows of logits ([rows, vocab], vocab > 128000) from row `first` on, each an edge case of a
// selection over a row: non-finite values near the top and the best as the last element (50);
// nothing finite; three finite logits (1.5 at ids 11 and 128000, -2 at 60000); every logit 0.25.
void plant_edge_rows(std::vector<float>& logits, int64_t vocab, int64_t first);

// Two rows of logits ([rows, vocab], any vocab >= 3) from row `first` on: every logit 0.25 (ties
// everywhere); three finite logits (1.5 at ids 1 and vocab − 1, -2 at vocab / 2), the rest -inf.
void plant_tie_and_sparse_rows(std::vector<float>& logits, int64_t vocab, int64_t first);

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

// Columns [0, num_cols) of `num_rows` rows `stride` apart: [num_rows, num_cols] compact.
std::vector<float> compact_rows(std::span<const float> values, int64_t num_rows, int64_t stride,
                                int64_t num_cols);

// The host's int8 quantization of activations, as quantize_activations.cuh defines it: per block
// of 32 elements a scale q8_block_scale(largest magnitude) and values q8_quantize'd, stored at
// interleaved_q8_offset() within each row — what launch_quantize_activations must write.
struct HostQ8Rows {
  int64_t num_cols = 0;
  std::vector<int8_t> q;      // [num_rows, num_cols], interleaved within each row
  std::vector<float> scales;  // [num_rows, num_cols / 32]
  std::vector<int32_t> sums;  // [num_rows, num_cols / 32] each block's Σ q (natural block order)
  // The value element `e` (natural order) of row `row` stands for: q · scale, in double.
  double value(int64_t row, int64_t e) const;
};
// `num_rows` rows of `num_cols` (a multiple of 32) f32 values, `stride` apart; with per_256
// (num_cols a multiple of 256) each block's scale is its 256 columns' (QuantizeActivationsParams).
HostQ8Rows quantize_rows_q8(std::span<const float> x, int64_t num_rows, int64_t num_cols,
                            int64_t stride, bool per_256 = false);

// `num_rows` rows of `num_cols` f32 values (`stride` apart) rounded to bf16 into [num_rows,
// num_cols], placed in `order` as matmul_wide.cuh describes it — spelled here on its own, not by
// wide_act_order.cuh: kNatural as they are; kFused (num_cols a multiple of 32) within each block
// of 32 columns source column 8T + 4h + 2p + j at column 16h + 8p + 2T + j — what the kernels
// writing a product's bf16 input must write.
std::vector<uint16_t> bf16_in_order(std::span<const float> values, int64_t num_rows,
                                    int64_t num_cols, int64_t stride, WideOrder order);

// A KV-cache element stored as `dtype` and read back as f32 (the cache's rounding).
float kv_stored(float value, KvDtype dtype);
// A KV cache's bytes (elements of `dtype`) read back as f32.
std::vector<float> read_kv_cache(std::span<const uint8_t> bytes, KvDtype dtype);

// What a q|k|v product's RoPE / K-V epilogue (rope_kv_output.h) must leave in the caches k_bytes
// ([rows, kv_width] of `dtype`) and v_bytes ([rows, v_width]): token t's rows k_ref[t], v_ref[t]
// (already rotated where they rotate) at row cells[t], as `dtype` stores them (within 1e-5
// relative, 5e-3 for 16-bit caches), and every other row still poisoned (all bits set).
void expect_kv_cache_rows(std::span<const uint8_t> k_bytes, std::span<const uint8_t> v_bytes,
                          KvDtype dtype, int32_t kv_width, int32_t v_width,
                          std::span<const int32_t> cells, std::span<const float> k_ref,
                          std::span<const float> v_ref);

// ‖out − ref‖₂ / ‖ref‖₂ in double; NaN when out has a NaN or sizes differ.
double relative_error(std::span<const float> out, std::span<const float> ref);

// Passes when relative_error ≤ tolerance; the message names `what`, the error and the first
// element that is NaN or differs most.
::testing::AssertionResult near_relative(std::string_view what, std::span<const float> out,
                                         std::span<const float> ref, double tolerance);

// Fails the test (never skips) when no CUDA device is visible.
void require_device();
#define CELLM_REQUIRE_DEVICE() ASSERT_NO_FATAL_FAILURE(::cellm::kernels::testing::require_device())

// Fails the test (fatally) unless a launch's Status is ok; the message is the status.
#define CELLM_ASSERT_OK(expr)                                     \
  do {                                                            \
    const ::cellm::Status cellm_status_ = (expr);                 \
    ASSERT_TRUE(cellm_status_.ok()) << cellm_status_.to_string(); \
  } while (false)

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

// GGUF rows repacked to the device layout (repack_rows_for_device), uploaded, and the
// DeviceWeight over the upload. Inline: it calls into the kernels library each test links.
struct UploadedWeight {
  DeviceArray<uint8_t> bytes;  // [num_rows, device_row_bytes]
  DeviceWeight weight;
};
inline UploadedWeight upload_weight(TensorType type, int64_t num_rows, int64_t num_cols,
                                    std::span<const uint8_t> gguf) {
  std::vector<uint8_t> device(device_row_bytes(type, num_cols) * static_cast<size_t>(num_rows));
  const Status status = repack_rows_for_device(type, num_cols, num_rows, gguf, device);
  CELLM_CHECK(status.ok()) << status.to_string();
  UploadedWeight upload{DeviceArray<uint8_t>(device), {}};
  upload.weight = make_device_weight(upload.bytes.get(), type, num_rows, num_cols);
  return upload;
}

// Poisons `out`, runs `run` (which launches the op on the default stream and may use gtest
// assertions), synchronizes, checks for a CUDA error, downloads `out` and expects it within
// `tolerance` of `ref` (near_relative).
void expect_parity(std::string_view what, DeviceArray<float>& out, const std::function<void()>& run,
                   std::span<const float> ref, double tolerance);

}  // namespace cellm::kernels::testing
