#include "backends/cuda/cuda_cell_cache.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device_step_pack.h"

namespace cellm {

StatusOr<std::unique_ptr<CudaCellCache>> CudaCellCache::create(const CudaCellCacheConfig& config) {
  if (config.max_width < 1 || config.max_session_tokens < 1) {
    return invalid_argument("cuda cell cache: max_width " + std::to_string(config.max_width) +
                            " and max_session_tokens " + std::to_string(config.max_session_tokens) +
                            " must be at least 1");
  }
  std::unique_ptr<CudaCellCache> cache(new CudaCellCache(config));
  const DeviceStepLayout layout = DeviceStepLayout::for_width(config.max_width);
  cache->fixed_ints_ = layout.seq_rows;
  // Worst case: every row its own sequence of max_session_tokens cells, plus the dummy's one.
  const size_t max_rows =
      static_cast<size_t>(config.max_width) * static_cast<size_t>(config.max_session_tokens) + 1;
  CELLM_ASSIGN_OR_RETURN(
      cache->device_,
      VirtualBuffer::reserve((cache->fixed_ints_ + max_rows) * sizeof(int32_t), config.device));
  // Map the fixed part and a first stretch of cell lists now, so the first steps do not grow.
  CELLM_RETURN_IF_ERROR(cache->device_.grow_to(
      std::min(cache->device_.reserved_bytes(), (cache->fixed_ints_ + 4096) * sizeof(int32_t))));
  for (Staging& staging : cache->staging_) {
    CELLM_ASSIGN_OR_RETURN(staging.copied, CudaEvent::create());
  }
  int32_t* base = static_cast<int32_t*>(cache->device_.data());
  DeviceStep& s = cache->step_;
  s.counts = base + layout.counts;
  s.tokens = base + layout.tokens;
  s.positions = base + layout.positions;
  s.write_rows = base + layout.write_rows;
  s.token_seq = base + layout.token_seq;
  s.token_row_offsets = base + layout.token_row_offsets;
  s.kept_rows = base + layout.kept_rows;
  s.seq_row_offsets = base + layout.seq_row_offsets;
  s.seq_len = base + layout.seq_len;
  s.seq_pos_begin = base + layout.seq_pos_begin;
  s.seq_token_offsets = base + layout.seq_token_offsets;
  s.seq_tokens = base + layout.seq_tokens;
  s.seq_rows = base + layout.seq_rows;
  s.capacity_width = config.max_width;
  return cache;
}

CudaCellCache::~CudaCellCache() {
  // Pending copies read the pinned blocks: wait for the device (not a stream, which may be gone).
  const cudaError_t sync = cudaDeviceSynchronize();
  (void)sync;
}

StatusOr<DeviceStep> CudaCellCache::upload(const CellStep& cells, std::span<const int32_t> tokens,
                                           std::span<const int32_t> kept_rows, int32_t width,
                                           cudaStream_t stream) {
  CELLM_ASSIGN_OR_RETURN(const PackedStepSizes sizes,
                         measure_device_step(cells, tokens, kept_rows, width, config_.max_width));
  const size_t used_bytes = sizes.num_ints * sizeof(int32_t);

  // A staging block whose previous copy has finished, large enough.
  Staging& staging = staging_[static_cast<size_t>(next_staging_)];
  next_staging_ = 1 - next_staging_;
  if (staging.in_flight) {
    CELLM_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(staging.copied.get()));
    staging.in_flight = false;
  }
  if (staging.block.num_bytes() < used_bytes) {
    staging.block.reset();
    CELLM_ASSIGN_OR_RETURN(staging.block,
                           PinnedBuffer::allocate(round_up(used_bytes + used_bytes / 2, 1 << 16)));
  }
  if (used_bytes > device_.mapped_bytes()) {
    // Geometric, so contexts that grow a little each step do not map memory every step.
    CELLM_RETURN_IF_ERROR(device_.grow_to(
        std::max(used_bytes, std::min(device_.reserved_bytes(), 2 * device_.mapped_bytes()))));
  }

  int32_t* h = staging.block.as<int32_t>();
  pack_device_step(cells, tokens, kept_rows, sizes, DeviceStepLayout::for_width(config_.max_width),
                   std::span<int32_t>(h, sizes.num_ints));
  CELLM_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(device_.data(), h, used_bytes, cudaMemcpyHostToDevice, stream));
  CELLM_CUDA_RETURN_IF_ERROR(cudaEventRecord(staging.copied.get(), stream));
  staging.in_flight = true;

  step_.num_tokens = sizes.num_tokens;
  step_.width = sizes.width;
  step_.num_seqs = sizes.num_seqs;
  step_.max_seq_len = sizes.max_seq_len;
  step_.num_kept = sizes.num_kept;
  step_.total_rows = sizes.total_rows;
  return step_;
}

}  // namespace cellm
