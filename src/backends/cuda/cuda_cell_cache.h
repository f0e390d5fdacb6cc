// CudaCellCache: the cell cache's steps on the GPU — each slice's CellStep packed into one pinned
// host block and uploaded with one asynchronous copy into device arrays at fixed addresses
// (device_step.h), so CUDA graphs captured once replay against whatever sessions a step holds.
//
// upload() converts cells to KvPool rows, appends the padding rows of a static width (scratch
// row, dummy sequence), and enqueues the copy on the caller's stream; the returned DeviceStep is
// valid for work enqueued after it on that stream, until the next upload. Two pinned staging
// blocks alternate, each reused only after its previous copy finished (an event), so packing
// the next slice overlaps the device's work on this one. The device block is a VirtualBuffer:
// the per-token arrays are sized for max_width up front and the cell lists grow as contexts
// grow, without moving. It does not place cells (CellCache does) nor own K/V bytes (KvPool).
// Destruction waits for the device, never for a stream. Thread-safety: none; engine thread.
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <memory>
#include <span>

#include "backends/cuda/device_memory.h"
#include "backends/cuda/device_step.h"
#include "backends/cuda/virtual_buffer.h"
#include "cache/cell_step.h"
#include "core/status.h"

namespace cellm {

struct CudaCellCacheConfig {
  int32_t max_width = 0;           // the widest slice (W); >= 1
  int32_t max_session_tokens = 0;  // longest context of one sequence; >= 1
  int device = 0;
};

class CudaCellCache {
 public:
  static StatusOr<std::unique_ptr<CudaCellCache>> create(const CudaCellCacheConfig& config);
  CudaCellCache(const CudaCellCache&) = delete;
  CudaCellCache& operator=(const CudaCellCache&) = delete;
  ~CudaCellCache();

  const CudaCellCacheConfig& config() const { return config_; }
  // The device pointers (fixed for this object's life) with the sizes of the last upload.
  const DeviceStep& step() const { return step_; }

  // Packs and uploads one slice: `cells` placed exactly `tokens` (cells.num_tokens ==
  // tokens.size()), run at `width` rows (tokens.size() <= width <= max_width), keeping
  // `kept_rows` (ascending token rows of the slice). InvalidArgument for sizes that break these
  // rules; device errors as Status.
  StatusOr<DeviceStep> upload(const CellStep& cells, std::span<const int32_t> tokens,
                              std::span<const int32_t> kept_rows, int32_t width,
                              cudaStream_t stream);

  // Bytes of cell lists the device block holds room for now (grows with use).
  size_t mapped_bytes() const { return device_.mapped_bytes(); }

 private:
  struct Staging {
    PinnedBuffer block;  // the packed arrays, same layout as the device block's prefix
    CudaEvent copied;    // recorded after the block's last copy; the block is free once it fired
    bool in_flight = false;
  };

  explicit CudaCellCache(const CudaCellCacheConfig& config) : config_(config) {}

  CudaCellCacheConfig config_;
  size_t fixed_ints_ = 0;  // int32 entries before seq_rows
  VirtualBuffer device_;   // [fixed_ints_ + rows] int32, reserved for the worst case
  std::array<Staging, 2> staging_;
  int32_t next_staging_ = 0;
  DeviceStep step_;
};

}  // namespace cellm
