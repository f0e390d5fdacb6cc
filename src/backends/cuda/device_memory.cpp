#include "backends/cuda/device_memory.h"

#include <string>

#include "backends/cuda/cuda_check.h"

namespace cellm {

StatusOr<DeviceBuffer> DeviceBuffer::allocate(size_t num_bytes) {
  DeviceBuffer buffer;
  if (num_bytes == 0) return buffer;
  const cudaError_t error = cudaMalloc(&buffer.data_, num_bytes);
  if (error != cudaSuccess) {
    buffer.data_ = nullptr;
    return cuda_status(error, "cudaMalloc of " + std::to_string(num_bytes) + " bytes");
  }
  buffer.num_bytes_ = num_bytes;
  return buffer;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    reset();
    data_ = std::exchange(other.data_, nullptr);
    num_bytes_ = std::exchange(other.num_bytes_, 0);
  }
  return *this;
}

void DeviceBuffer::reset() {
  if (data_ != nullptr) CELLM_CUDA_CHECK(cudaFree(data_));
  data_ = nullptr;
  num_bytes_ = 0;
}

StatusOr<PinnedBuffer> PinnedBuffer::allocate(size_t num_bytes) {
  PinnedBuffer buffer;
  if (num_bytes == 0) return buffer;
  const cudaError_t error = cudaMallocHost(&buffer.data_, num_bytes);
  if (error != cudaSuccess) {
    buffer.data_ = nullptr;
    return cuda_status(error, "cudaMallocHost of " + std::to_string(num_bytes) + " bytes");
  }
  buffer.num_bytes_ = num_bytes;
  return buffer;
}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& other) noexcept {
  if (this != &other) {
    reset();
    data_ = std::exchange(other.data_, nullptr);
    num_bytes_ = std::exchange(other.num_bytes_, 0);
  }
  return *this;
}

void PinnedBuffer::reset() {
  if (data_ != nullptr) CELLM_CUDA_CHECK(cudaFreeHost(data_));
  data_ = nullptr;
  num_bytes_ = 0;
}

StatusOr<CudaStream> CudaStream::create() {
  CudaStream stream;
  CELLM_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream.stream_, cudaStreamNonBlocking));
  return stream;
}

CudaStream& CudaStream::operator=(CudaStream&& other) noexcept {
  if (this != &other) {
    reset();
    stream_ = std::exchange(other.stream_, nullptr);
  }
  return *this;
}

void CudaStream::reset() {
  if (stream_ == nullptr) return;
  CELLM_CUDA_CHECK(cudaStreamSynchronize(stream_));
  CELLM_CUDA_CHECK(cudaStreamDestroy(stream_));
  stream_ = nullptr;
}

StatusOr<CudaEvent> CudaEvent::create(bool timing) {
  CudaEvent event;
  CELLM_CUDA_RETURN_IF_ERROR(
      cudaEventCreateWithFlags(&event.event_, timing ? cudaEventDefault : cudaEventDisableTiming));
  return event;
}

CudaEvent& CudaEvent::operator=(CudaEvent&& other) noexcept {
  if (this != &other) {
    reset();
    event_ = std::exchange(other.event_, nullptr);
  }
  return *this;
}

void CudaEvent::reset() {
  if (event_ != nullptr) CELLM_CUDA_CHECK(cudaEventDestroy(event_));
  event_ = nullptr;
}

}  // namespace cellm
