// VirtualBuffer: one device address range reserved once and backed by physical memory as it
// grows (CUDA virtual memory management), so its address never changes.
//
// reserve() takes the whole range (cuMemAddressReserve) and maps nothing; grow_to() maps more
// physical memory at the end of what is mapped, in whole granules (cuMemCreate + cuMemMap +
// cuMemSetAccess), and is transactional: when any step fails, what it mapped is unmapped and the
// buffer is exactly as before. shrink_to() undoes growths (whole chunks). Mapping is a host-side
// call that completes before it returns, so any work enqueued afterwards may use the new bytes;
// bytes mapped before keep their contents and addresses (captured CUDA graphs stay valid).
// Destruction waits for the device (cudaDeviceSynchronize: never a stream, which may already be
// gone), then unmaps and frees. It knows bytes, not rows or layers (kv_pool.h).
// Thread-safety: none; one thread at a time.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/status.h"

namespace cellm {

class VirtualBuffer {
 public:
  VirtualBuffer() = default;
  // Reserves max(max_bytes, 1) rounded up to the device's allocation granularity on `device`.
  static StatusOr<VirtualBuffer> reserve(size_t max_bytes, int device = 0);
  VirtualBuffer(VirtualBuffer&& other) noexcept;
  VirtualBuffer& operator=(VirtualBuffer&& other) noexcept;
  VirtualBuffer(const VirtualBuffer&) = delete;
  VirtualBuffer& operator=(const VirtualBuffer&) = delete;
  ~VirtualBuffer();

  void* data() const { return reinterpret_cast<void*>(base_); }
  size_t reserved_bytes() const { return reserved_bytes_; }
  size_t mapped_bytes() const { return mapped_bytes_; }
  size_t granule_bytes() const { return granule_bytes_; }
  size_t num_chunks() const { return chunks_.size(); }

  // Maps physical memory until mapped_bytes() >= num_bytes (one new chunk, rounded up to the
  // granule). OutOfRange past reserved_bytes(); ResourceExhausted (or Internal) when the device
  // refuses, with nothing changed.
  Status grow_to(size_t num_bytes);
  // Unmaps and frees the newest chunks that start at or past `num_bytes` (so a size grow_to
  // started from is restored exactly). The caller guarantees no pending work reads those bytes.
  void shrink_to(size_t num_bytes);

  // Test hook: the allocation `after` physical allocations from now fails as if the device were
  // out of memory (-1 disarms). Lets tests prove a failed growth changes nothing.
  void inject_allocation_failure(int32_t after) { fail_countdown_ = after; }

 private:
  struct Chunk {
    size_t offset = 0;  // from base_
    size_t num_bytes = 0;
    CUmemGenericAllocationHandle handle = 0;
  };

  void release_all();

  CUdeviceptr base_ = 0;
  size_t reserved_bytes_ = 0;
  size_t mapped_bytes_ = 0;  // == sum of chunks_' sizes; chunks_ tile [0, mapped_bytes_)
  size_t granule_bytes_ = 0;
  int device_ = 0;
  std::vector<Chunk> chunks_;
  int32_t fail_countdown_ = -1;
};

}  // namespace cellm
