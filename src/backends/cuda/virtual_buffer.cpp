#include "backends/cuda/virtual_buffer.h"

#include <cuda_runtime.h>

#include <string>
#include <utility>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device_memory.h"
#include "backends/cuda/driver_api.h"
#include "core/logging.h"

namespace cellm {
namespace {

CUmemAllocationProp allocation_prop(int device) {
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  return prop;
}

}  // namespace

StatusOr<VirtualBuffer> VirtualBuffer::reserve(size_t max_bytes, int device) {
  // Binds the device's primary context to this thread for the driver calls below.
  CELLM_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  CELLM_CUDA_RETURN_IF_ERROR(cudaFree(nullptr));
  CELLM_ASSIGN_OR_RETURN(const DriverApi* api, driver_api());
  VirtualBuffer buffer;
  buffer.device_ = device;
  const CUmemAllocationProp prop = allocation_prop(device);
  CELLM_CU_RETURN_IF_ERROR(api->mem_get_allocation_granularity(
      &buffer.granule_bytes_, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
  const size_t bytes = round_up(max_bytes == 0 ? 1 : max_bytes, buffer.granule_bytes_);
  const CUresult result = api->mem_address_reserve(&buffer.base_, bytes, 0, 0, 0);
  if (result != CUDA_SUCCESS) {
    buffer.base_ = 0;
    return cu_status(result, "cuMemAddressReserve of " + std::to_string(bytes) + " bytes");
  }
  buffer.reserved_bytes_ = bytes;
  return buffer;
}

VirtualBuffer::VirtualBuffer(VirtualBuffer&& other) noexcept { *this = std::move(other); }

VirtualBuffer& VirtualBuffer::operator=(VirtualBuffer&& other) noexcept {
  if (this != &other) {
    release_all();
    base_ = std::exchange(other.base_, 0);
    reserved_bytes_ = std::exchange(other.reserved_bytes_, 0);
    mapped_bytes_ = std::exchange(other.mapped_bytes_, 0);
    granule_bytes_ = std::exchange(other.granule_bytes_, 0);
    device_ = other.device_;
    chunks_ = std::exchange(other.chunks_, {});
    fail_countdown_ = std::exchange(other.fail_countdown_, -1);
  }
  return *this;
}

VirtualBuffer::~VirtualBuffer() { release_all(); }

void VirtualBuffer::release_all() {
  if (base_ == 0) return;
  // Work still queued on any stream may read the range: wait for the whole device (a stream the
  // buffer last saw may have been destroyed by now).
  const cudaError_t sync = cudaDeviceSynchronize();
  if (sync != cudaSuccess) {
    CELLM_LOG(kWarn) << "VirtualBuffer: cudaDeviceSynchronize before unmapping: "
                     << cudaGetErrorName(sync);
  }
  shrink_to(0);
  const DriverApi* api = driver_api().value();  // resolved when the range was reserved
  const CUresult result = api->mem_address_free(base_, reserved_bytes_);
  if (result != CUDA_SUCCESS) CELLM_LOG(kWarn) << cu_status(result, "cuMemAddressFree").message();
  base_ = 0;
  reserved_bytes_ = 0;
}

Status VirtualBuffer::grow_to(size_t num_bytes) {
  CELLM_CHECK(base_ != 0) << "VirtualBuffer::grow_to on an empty buffer";
  if (num_bytes <= mapped_bytes_) return ok_status();
  if (num_bytes > reserved_bytes_) {
    return out_of_range("virtual buffer: " + std::to_string(num_bytes) +
                        " bytes asked of a range of " + std::to_string(reserved_bytes_));
  }
  CELLM_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
  CELLM_ASSIGN_OR_RETURN(const DriverApi* api, driver_api());
  Chunk chunk;
  chunk.offset = mapped_bytes_;
  chunk.num_bytes = round_up(num_bytes - mapped_bytes_, granule_bytes_);
  if (chunk.offset + chunk.num_bytes > reserved_bytes_)
    chunk.num_bytes = reserved_bytes_ - chunk.offset;
  if (fail_countdown_ >= 0) {
    if (fail_countdown_-- == 0) {
      return resource_exhausted("virtual buffer: injected allocation failure of " +
                                std::to_string(chunk.num_bytes) + " bytes");
    }
  }
  const CUmemAllocationProp prop = allocation_prop(device_);
  CELLM_CU_RETURN_IF_ERROR(api->mem_create(&chunk.handle, chunk.num_bytes, &prop, 0));
  const CUdeviceptr address = base_ + chunk.offset;
  CUresult result = api->mem_map(address, chunk.num_bytes, 0, chunk.handle, 0);
  if (result != CUDA_SUCCESS) {
    api->mem_release(chunk.handle);
    return cu_status(result, "cuMemMap of " + std::to_string(chunk.num_bytes) + " bytes");
  }
  CUmemAccessDesc access = {};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = device_;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  result = api->mem_set_access(address, chunk.num_bytes, &access, 1);
  if (result != CUDA_SUCCESS) {
    api->mem_unmap(address, chunk.num_bytes);
    api->mem_release(chunk.handle);
    return cu_status(result, "cuMemSetAccess of " + std::to_string(chunk.num_bytes) + " bytes");
  }
  chunks_.push_back(chunk);
  mapped_bytes_ += chunk.num_bytes;
  return ok_status();
}

void VirtualBuffer::shrink_to(size_t num_bytes) {
  if (chunks_.empty()) return;
  const DriverApi* api = driver_api().value();  // resolved when the range was reserved
  while (!chunks_.empty() && mapped_bytes_ > num_bytes && chunks_.back().offset >= num_bytes) {
    const Chunk chunk = chunks_.back();
    chunks_.pop_back();
    const CUresult unmap = api->mem_unmap(base_ + chunk.offset, chunk.num_bytes);
    if (unmap != CUDA_SUCCESS) CELLM_LOG(kWarn) << cu_status(unmap, "cuMemUnmap").message();
    const CUresult release = api->mem_release(chunk.handle);
    if (release != CUDA_SUCCESS) CELLM_LOG(kWarn) << cu_status(release, "cuMemRelease").message();
    mapped_bytes_ = chunk.offset;
  }
}

}  // namespace cellm
