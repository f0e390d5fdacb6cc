// Device and pinned host memory, streams and events as move-only owners.
//
// DeviceBuffer holds one cudaMalloc allocation, PinnedBuffer one cudaMallocHost allocation (one
// template, CudaAllocation, over the two kinds of memory); both are created through a StatusOr
// factory (out of memory is kResourceExhausted) and freed in the destructor. Freeing does not use
// any stream: cudaFree and cudaFreeHost wait for the device themselves, so an owner may outlive
// every stream that used its memory. CudaStream and CudaEvent own a non-blocking stream and a
// timing-capable event. They know nothing of models or steps. Thread-safety: none; each owner is
// used by one thread at a time.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <utility>

#include "core/status.h"

namespace cellm {

// What tells device memory from page-locked host memory: the runtime's allocate and free calls,
// named for error messages.
struct DeviceMemoryKind {
  static cudaError_t allocate(void** data, size_t num_bytes) { return cudaMalloc(data, num_bytes); }
  static cudaError_t release(void* data) { return cudaFree(data); }
  static constexpr const char* kAllocateName = "cudaMalloc";
  static constexpr const char* kReleaseName = "cudaFree";
};
struct PinnedMemoryKind {
  static cudaError_t allocate(void** data, size_t num_bytes) {
    return cudaMallocHost(data, num_bytes);
  }
  static cudaError_t release(void* data) { return cudaFreeHost(data); }
  static constexpr const char* kAllocateName = "cudaMallocHost";
  static constexpr const char* kReleaseName = "cudaFreeHost";
};

// One allocation of the memory `Kind` gives (DeviceBuffer, PinnedBuffer below).
template <class Kind>
class CudaAllocation {
 public:
  CudaAllocation() = default;
  // `num_bytes` of memory (0 gives an empty buffer). Contents are undefined.
  static StatusOr<CudaAllocation> allocate(size_t num_bytes);
  CudaAllocation(CudaAllocation&& other) noexcept { *this = std::move(other); }
  CudaAllocation& operator=(CudaAllocation&& other) noexcept;
  CudaAllocation(const CudaAllocation&) = delete;
  CudaAllocation& operator=(const CudaAllocation&) = delete;
  ~CudaAllocation() { reset(); }

  void reset();
  // At least `num_bytes`: unchanged when already that large, else released and allocated anew
  // (contents lost; on failure the buffer is left empty). Nothing may be using it.
  Status grow_to(size_t num_bytes);
  void* data() const { return data_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  size_t num_bytes() const { return num_bytes_; }

 private:
  void* data_ = nullptr;
  size_t num_bytes_ = 0;
};

// Defined in device_memory.cpp for these two kinds only.
extern template class CudaAllocation<DeviceMemoryKind>;
extern template class CudaAllocation<PinnedMemoryKind>;
using DeviceBuffer = CudaAllocation<DeviceMemoryKind>;
using PinnedBuffer = CudaAllocation<PinnedMemoryKind>;

class CudaStream {
 public:
  CudaStream() = default;
  static StatusOr<CudaStream> create();  // a non-blocking stream
  CudaStream(CudaStream&& other) noexcept : stream_(std::exchange(other.stream_, nullptr)) {}
  CudaStream& operator=(CudaStream&& other) noexcept;
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;
  ~CudaStream() { reset(); }

  // Waits for the stream's work, then destroys it.
  void reset();
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

class CudaEvent {
 public:
  CudaEvent() = default;
  static StatusOr<CudaEvent> create(bool timing = false);
  CudaEvent(CudaEvent&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}
  CudaEvent& operator=(CudaEvent&& other) noexcept;
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;
  ~CudaEvent() { reset(); }

  void reset();
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

// Rounds `value` up to a multiple of `alignment` (a power of two or any positive number).
inline size_t round_up(size_t value, size_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

}  // namespace cellm
