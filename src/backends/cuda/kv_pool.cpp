#include "backends/cuda/kv_pool.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "core/check.h"
#include "core/logging.h"

namespace cellm {

int64_t kv_dtype_bytes(KvDtype dtype) { return dtype == KvDtype::kF32 ? 4 : 2; }

KvPool::KvPool(const KvPoolGeometry& geometry) : geometry_(geometry) {
  k_row_bytes_ = static_cast<int64_t>(geometry.num_kv_heads) * geometry.head_dim *
                 kv_dtype_bytes(geometry.dtype);
  v_row_bytes_ = static_cast<int64_t>(geometry.num_kv_heads) * geometry.value_head_dim *
                 kv_dtype_bytes(geometry.dtype);
}

KvPool::~KvPool() {
  // One device-wide wait here, so each array's own wait finds the device idle.
  const cudaError_t sync = cudaDeviceSynchronize();
  if (sync != cudaSuccess) {
    CELLM_LOG(kWarn) << "KvPool: cudaDeviceSynchronize at destruction: " << cudaGetErrorName(sync);
  }
}

StatusOr<std::unique_ptr<KvPool>> KvPool::create(const KvPoolGeometry& g) {
  if (g.num_layers <= 0 || g.num_kv_heads <= 0 || g.head_dim <= 0 || g.value_head_dim <= 0 ||
      g.max_rows <= 0) {
    return invalid_argument("kv pool: layers " + std::to_string(g.num_layers) + ", kv heads " +
                            std::to_string(g.num_kv_heads) + ", head dims " +
                            std::to_string(g.head_dim) + "/" + std::to_string(g.value_head_dim) +
                            ", max rows " + std::to_string(g.max_rows) + " must all be positive");
  }
  std::unique_ptr<KvPool> pool(new KvPool(g));
  for (int32_t l = 0; l < g.num_layers; ++l) {
    CELLM_ASSIGN_OR_RETURN(
        VirtualBuffer k,
        VirtualBuffer::reserve(static_cast<size_t>(pool->k_row_bytes_) * g.max_rows, g.device));
    CELLM_ASSIGN_OR_RETURN(
        VirtualBuffer v,
        VirtualBuffer::reserve(static_cast<size_t>(pool->v_row_bytes_) * g.max_rows, g.device));
    pool->keys_.push_back(std::move(k));
    pool->values_.push_back(std::move(v));
  }
  return pool;
}

KvPoolMetrics KvPool::metrics() const {
  KvPoolMetrics m;
  m.num_rows = num_rows_;
  for (size_t l = 0; l < keys_.size(); ++l) {
    m.mapped_bytes += keys_[l].mapped_bytes() + values_[l].mapped_bytes();
    m.reserved_bytes += keys_[l].reserved_bytes() + values_[l].reserved_bytes();
  }
  m.num_growths = num_growths_;
  m.num_failed_growths = num_failed_growths_;
  return m;
}

void KvPool::inject_allocation_failure(int32_t after) { fail_countdown_ = after; }

Status KvPool::reserve_rows(int32_t rows) {
  if (rows < 0 || rows > geometry_.max_rows) {
    return out_of_range("kv pool: " + std::to_string(rows) + " rows asked, outside [0, " +
                        std::to_string(geometry_.max_rows) + "]");
  }
  if (rows <= num_rows_) return ok_status();
  const int32_t max_rows = geometry_.max_rows;
  const int32_t doubled = num_rows_ > max_rows / 2 ? max_rows : 2 * num_rows_;
  const int32_t target = std::min(max_rows, std::max({rows, doubled, kMinRows}));

  // Grow every array; on a failure shrink the grown ones back to where they were.
  struct Grown {
    VirtualBuffer* buffer;
    size_t before;
  };
  std::vector<Grown> grown;
  grown.reserve(keys_.size() * 2);
  Status status = ok_status();
  for (size_t l = 0; l < keys_.size() && status.ok(); ++l) {
    for (VirtualBuffer* buffer : {&keys_[l], &values_[l]}) {
      const int64_t row_bytes = buffer == &keys_[l] ? k_row_bytes_ : v_row_bytes_;
      const size_t before = buffer->mapped_bytes();
      const size_t wanted = static_cast<size_t>(row_bytes) * static_cast<size_t>(target);
      if (wanted <= before) continue;
      if (fail_countdown_ >= 0 && fail_countdown_-- == 0) buffer->inject_allocation_failure(0);
      status = buffer->grow_to(wanted);
      buffer->inject_allocation_failure(-1);
      if (!status.ok()) break;
      grown.push_back({buffer, before});
    }
  }
  if (!status.ok()) {
    for (auto it = grown.rbegin(); it != grown.rend(); ++it) it->buffer->shrink_to(it->before);
    ++num_failed_growths_;
    return status.with_context("kv pool: growing to " + std::to_string(target) + " rows");
  }
  // Granules may hold more rows than asked; every array holds at least `target`.
  int32_t mapped = max_rows;
  for (size_t l = 0; l < keys_.size(); ++l) {
    mapped = std::min<int64_t>(mapped, keys_[l].mapped_bytes() / k_row_bytes_);
    mapped = std::min<int64_t>(mapped, values_[l].mapped_bytes() / v_row_bytes_);
  }
  CELLM_CHECK(mapped >= target) << "kv pool mapped " << mapped << " rows of " << target;
  num_rows_ = mapped;
  ++num_growths_;
  return ok_status();
}

void* KvPool::k_data(int32_t layer) const {
  CELLM_CHECK(layer >= 0 && layer < geometry_.num_layers) << "kv pool layer " << layer;
  return keys_[static_cast<size_t>(layer)].data();
}

void* KvPool::v_data(int32_t layer) const {
  CELLM_CHECK(layer >= 0 && layer < geometry_.num_layers) << "kv pool layer " << layer;
  return values_[static_cast<size_t>(layer)].data();
}

}  // namespace cellm
