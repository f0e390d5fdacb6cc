// Device and pinned host memory, streams and events as move-only owners.
//
// DeviceBuffer holds one cudaMalloc allocation, PinnedBuffer one cudaMallocHost allocation; both
// are created through a StatusOr factory (out of memory is kResourceExhausted) and freed in the
// destructor. Freeing does not use any stream: cudaFree and cudaFreeHost wait for the device
// themselves, so an owner may outlive every stream that used its memory. CudaStream and CudaEvent
// own a non-blocking stream and a timing-capable event. They know nothing of models or steps.
// Thread-safety: none; each owner is used by one thread at a time.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <utility>

#include "core/status.h"

namespace cellm {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  // `num_bytes` of device memory (0 gives an empty buffer). Contents are undefined.
  static StatusOr<DeviceBuffer> allocate(size_t num_bytes);
  DeviceBuffer(DeviceBuffer&& other) noexcept { *this = std::move(other); }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { reset(); }

  void reset();
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

class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  // `num_bytes` of page-locked host memory (0 gives an empty buffer). Contents are undefined.
  static StatusOr<PinnedBuffer> allocate(size_t num_bytes);
  PinnedBuffer(PinnedBuffer&& other) noexcept { *this = std::move(other); }
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  ~PinnedBuffer() { reset(); }

  void reset();
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
