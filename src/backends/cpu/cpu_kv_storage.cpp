#include "backends/cpu/cpu_kv_storage.h"

#include <algorithm>
#include <new>
#include <string>

#include "core/check.h"
#include "core/float16.h"

namespace cellm {

CpuKvStorage::CpuKvStorage(const CpuKvGeometry& geometry)
    : geometry_(geometry),
      keys_(static_cast<size_t>(std::max(0, geometry.num_layers))),
      values_(static_cast<size_t>(std::max(0, geometry.num_layers))) {
  CELLM_CHECK(geometry.num_layers > 0 && geometry.num_kv_heads > 0 && geometry.head_dim > 0 &&
              geometry.value_head_dim > 0 && geometry.max_cells > 0)
      << "CpuKvStorage: layers " << geometry.num_layers << ", kv heads " << geometry.num_kv_heads
      << ", head dims " << geometry.head_dim << "/" << geometry.value_head_dim << ", max cells "
      << geometry.max_cells;
}

uint64_t CpuKvStorage::num_bytes() const {
  const uint64_t element_bytes = geometry_.dtype == KvDtype::kF32 ? 4 : 2;
  const uint64_t row_elements =
      static_cast<uint64_t>(geometry_.num_kv_heads) *
      static_cast<uint64_t>(geometry_.head_dim + geometry_.value_head_dim);
  return static_cast<uint64_t>(num_rows_) * row_elements * element_bytes *
         static_cast<uint64_t>(geometry_.num_layers);
}

Status CpuKvStorage::reserve_rows(int32_t rows) {
  if (rows < 0 || rows > geometry_.max_cells) {
    return out_of_range("kv storage: " + std::to_string(rows) + " rows asked, outside [0, " +
                        std::to_string(geometry_.max_cells) + "] (cellm.kv.max_cells)");
  }
  if (rows <= num_rows_) return ok_status();
  const int32_t doubled = num_rows_ > geometry_.max_cells / 2 ? geometry_.max_cells : 2 * num_rows_;
  const int32_t new_rows = std::min(geometry_.max_cells, std::max({rows, doubled, kMinRows}));
  const size_t k_elements = static_cast<size_t>(new_rows) *
                            static_cast<size_t>(geometry_.num_kv_heads) *
                            static_cast<size_t>(geometry_.head_dim);
  const size_t v_elements = static_cast<size_t>(new_rows) *
                            static_cast<size_t>(geometry_.num_kv_heads) *
                            static_cast<size_t>(geometry_.value_head_dim);
  const bool is_f32 = geometry_.dtype == KvDtype::kF32;
  try {
    // vector::resize keeps a layer as it was when it throws; layers already grown only hold
    // rows past num_rows_, which nothing reads.
    for (size_t l = 0; l < keys_.size(); ++l) {
      if (is_f32) {
        keys_[l].f32.resize(k_elements, 0.0f);
        values_[l].f32.resize(v_elements, 0.0f);
      } else {
        keys_[l].bits.resize(k_elements, 0);
        values_[l].bits.resize(v_elements, 0);
      }
    }
  } catch (const std::bad_alloc&) {
    return resource_exhausted("kv storage: cannot allocate " + std::to_string(new_rows) +
                              " rows of " + std::to_string(geometry_.num_layers) + " layers");
  }
  num_rows_ = new_rows;
  return ok_status();
}

void CpuKvStorage::write_row(Array& array, int32_t cell, int64_t row_elements,
                             const float* values) {
  CELLM_CHECK(cell >= 0 && cell < num_rows_)
      << "kv storage write to cell " << cell << " of " << num_rows_ << " rows";
  const size_t offset = static_cast<size_t>(cell) * static_cast<size_t>(row_elements);
  switch (geometry_.dtype) {
    case KvDtype::kF32:
      std::copy(values, values + row_elements, array.f32.begin() + static_cast<ptrdiff_t>(offset));
      return;
    case KvDtype::kF16:
      for (int64_t i = 0; i < row_elements; ++i) array.bits[offset + i] = f32_to_f16(values[i]);
      return;
    case KvDtype::kBF16:
      for (int64_t i = 0; i < row_elements; ++i) array.bits[offset + i] = f32_to_bf16(values[i]);
      return;
  }
}

void CpuKvStorage::write(int32_t layer, int32_t cell, const float* k, const float* v) {
  CELLM_CHECK(layer >= 0 && layer < geometry_.num_layers) << "kv storage layer " << layer;
  write_row(keys_[static_cast<size_t>(layer)], cell,
            static_cast<int64_t>(geometry_.num_kv_heads) * geometry_.head_dim, k);
  write_row(values_[static_cast<size_t>(layer)], cell,
            static_cast<int64_t>(geometry_.num_kv_heads) * geometry_.value_head_dim, v);
}

KvCacheView CpuKvStorage::view(const Array& array, int32_t head_dim) const {
  KvCacheView view;
  view.data = geometry_.dtype == KvDtype::kF32 ? static_cast<const void*>(array.f32.data())
                                               : static_cast<const void*>(array.bits.data());
  view.dtype = geometry_.dtype;
  view.num_rows = num_rows_;
  view.num_heads = geometry_.num_kv_heads;
  view.head_dim = head_dim;
  return view;
}

KvCacheView CpuKvStorage::k_view(int32_t layer) const {
  CELLM_CHECK(layer >= 0 && layer < geometry_.num_layers) << "kv storage layer " << layer;
  return view(keys_[static_cast<size_t>(layer)], geometry_.head_dim);
}

KvCacheView CpuKvStorage::v_view(int32_t layer) const {
  CELLM_CHECK(layer >= 0 && layer < geometry_.num_layers) << "kv storage layer " << layer;
  return view(values_[static_cast<size_t>(layer)], geometry_.value_head_dim);
}

}  // namespace cellm
