#include "backends/cuda/device_memory.h"

#include <string>

#include "backends/cuda/cuda_check.h"

namespace cellm {

template <class Kind>
StatusOr<CudaAllocation<Kind>> CudaAllocation<Kind>::allocate(size_t num_bytes) {
  CudaAllocation buffer;
  if (num_bytes == 0) return buffer;
  const cudaError_t error = Kind::allocate(&buffer.data_, num_bytes);
  if (error != cudaSuccess) {
    buffer.data_ = nullptr;
    return cuda_status(
        error, std::string(Kind::kAllocateName) + " of " + std::to_string(num_bytes) + " bytes");
  }
  buffer.num_bytes_ = num_bytes;
  return buffer;
}

template <class Kind>
CudaAllocation<Kind>& CudaAllocation<Kind>::operator=(CudaAllocation&& other) noexcept {
  if (this != &other) {
    reset();
    data_ = std::exchange(other.data_, nullptr);
    num_bytes_ = std::exchange(other.num_bytes_, 0);
  }
  return *this;
}

template <class Kind>
void CudaAllocation<Kind>::reset() {
  if (data_ != nullptr) {
    const Status status = cuda_status(Kind::release(data_), Kind::kReleaseName);
    CELLM_CHECK(status.ok()) << status.to_string();
  }
  data_ = nullptr;
  num_bytes_ = 0;
}

template <class Kind>
Status CudaAllocation<Kind>::grow_to(size_t num_bytes) {
  if (num_bytes_ >= num_bytes) return ok_status();
  reset();
  StatusOr<CudaAllocation> grown = allocate(num_bytes);
  if (!grown.ok()) return grown.status();
  *this = std::move(grown).value();
  return ok_status();
}

template class CudaAllocation<DeviceMemoryKind>;
template class CudaAllocation<PinnedMemoryKind>;

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
