// KvPool: the bytes behind the cell cache on the GPU — per layer one K and one V array of rows,
// in device memory that grows with use and never moves.
//
// Layer l holds K as [rows, num_kv_heads, head_dim] and V as [rows, num_kv_heads, value_head_dim]
// in the cache dtype (f32, f16 or bf16). Each array is a VirtualBuffer reserved for max_rows rows
// up front; reserve_rows() maps physical memory into every array (geometric: at least double the
// rows, whole granules) so row addresses are fixed for the pool's life and CUDA graphs captured
// over them stay valid. Growth is transactional across arrays: when any mapping fails, the arrays
// already grown are shrunk back and the pool is exactly as before, still usable. Growth is a host
// call finished before it returns, so work enqueued after it may touch the new rows (rows already
// mapped are untouched, so work in flight is unaffected). Destruction waits for the device, never
// for a stream (a stream that last wrote the pool may be gone). It knows rows, not cells: which
// row a cell is (and the scratch row of padding tokens) is the executor's convention
// (cuda_cell_cache.h). Thread-safety: none; the engine thread owns it.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backends/cuda/virtual_buffer.h"
#include "core/status.h"
#include "program/program_spec.h"

namespace cellm {

struct KvPoolGeometry {
  int32_t num_layers = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;        // K head size
  int32_t value_head_dim = 0;  // V head size
  KvDtype dtype = KvDtype::kBF16;
  int32_t max_rows = 0;  // rows never exceed this (reserved up front)
  int device = 0;
};

// Bytes of one element of a cache dtype (4 for f32, 2 for f16/bf16).
int64_t kv_dtype_bytes(KvDtype dtype);

struct KvPoolMetrics {
  int32_t num_rows = 0;         // rows mapped in every array now
  uint64_t mapped_bytes = 0;    // physical bytes over all arrays
  uint64_t reserved_bytes = 0;  // address space over all arrays
  int64_t num_growths = 0;      // successful reserve_rows calls that mapped memory
  int64_t num_failed_growths = 0;
};

class KvPool {
 public:
  static constexpr int32_t kMinRows = 16;  // the first growth maps at least this many rows

  // Reserves every array's address range (maps nothing). Errors: InvalidArgument for a
  // non-positive count, or the device's refusal.
  static StatusOr<std::unique_ptr<KvPool>> create(const KvPoolGeometry& geometry);
  KvPool(const KvPool&) = delete;
  KvPool& operator=(const KvPool&) = delete;
  ~KvPool();

  const KvPoolGeometry& geometry() const { return geometry_; }
  int32_t num_rows() const { return num_rows_; }
  KvPoolMetrics metrics() const;

  // Makes at least `rows` rows exist (0 <= rows <= max_rows): maps up to
  // min(max_rows, max(rows, 2 * num_rows(), kMinRows)) rows in every array. OutOfRange past
  // max_rows; ResourceExhausted when the device has no memory (nothing changed then).
  Status reserve_rows(int32_t rows);

  // Base of layer l's K / V array (fixed for the pool's life); rows are k_row_bytes() apart.
  void* k_data(int32_t layer) const;
  void* v_data(int32_t layer) const;
  int64_t k_row_bytes() const { return k_row_bytes_; }
  int64_t v_row_bytes() const { return v_row_bytes_; }

  // Test hook: the growth that makes the `after`-th physical allocation from now fails (-1
  // disarms). Allocations run K then V for layers 0, 1, ...: after = 3 fails layer 1's V.
  void inject_allocation_failure(int32_t after);

 private:
  explicit KvPool(const KvPoolGeometry& geometry);

  KvPoolGeometry geometry_;
  int64_t k_row_bytes_ = 0;
  int64_t v_row_bytes_ = 0;
  int32_t num_rows_ = 0;               // rows mapped in every array; <= max_rows
  std::vector<VirtualBuffer> keys_;    // [num_layers]
  std::vector<VirtualBuffer> values_;  // [num_layers]
  int64_t num_growths_ = 0;
  int64_t num_failed_growths_ = 0;
  int32_t fail_countdown_ = -1;  // see inject_allocation_failure
};

}  // namespace cellm
