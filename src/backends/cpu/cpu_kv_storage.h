// CpuKvStorage: the bytes behind the cell cache on the CPU — per layer, one K and one V array
// indexed by cell.
//
// Layer l holds K as [rows, num_kv_heads, head_dim] and V as [rows, num_kv_heads,
// value_head_dim] in the program's cache dtype (f32, or f16/bf16 rounded to nearest-even on
// write). `rows` grows geometrically (doubling) as the cell cache's high_water() grows, never
// past max_cells, keeping what was written. It knows cells, not positions or sequences: which
// cells a token reads comes from the CellStep (cache/cell_step.h). Read through kv_view(), the
// form the attention op (cpu_ops.h) takes. Thread-safety: writes to distinct cells may run in
// parallel; growth (reserve_rows) must not overlap any other call.
#pragma once

#include <cstdint>
#include <vector>

#include "backends/cpu/cpu_ops.h"
#include "core/status.h"
#include "program/program_spec.h"

namespace cellm {

struct CpuKvGeometry {
  int32_t num_layers = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;        // K head size
  int32_t value_head_dim = 0;  // V head size
  KvDtype dtype = KvDtype::kF32;
  int32_t max_cells = 0;  // rows never exceed this
};

class CpuKvStorage {
 public:
  static constexpr int32_t kMinRows = 16;  // the first allocation

  // No rows until the first reserve_rows. The geometry's counts must be positive (CELLM_CHECK).
  explicit CpuKvStorage(const CpuKvGeometry& geometry);
  CpuKvStorage(const CpuKvStorage&) = delete;
  CpuKvStorage& operator=(const CpuKvStorage&) = delete;

  const CpuKvGeometry& geometry() const { return geometry_; }
  int32_t num_rows() const { return num_rows_; }  // rows every layer holds now
  uint64_t num_bytes() const;                     // bytes held over all layers, K and V

  // Makes at least `rows` rows exist (0 <= rows <= max_cells): grows to
  // min(max_cells, max(rows, 2 * num_rows(), kMinRows)), keeping every row's contents. OutOfRange
  // past max_cells; ResourceExhausted when the memory cannot be had (num_rows() and every
  // row's contents unchanged then).
  Status reserve_rows(int32_t rows);

  // Writes one cell of one layer: k [num_kv_heads * head_dim], v [num_kv_heads * value_head_dim],
  // f32, rounded to the dtype. cell < num_rows() (CELLM_CHECK).
  void write(int32_t layer, int32_t cell, const float* k, const float* v);

  KvCacheView k_view(int32_t layer) const;
  KvCacheView v_view(int32_t layer) const;

 private:
  // One array: f32 elements when the dtype is f32, else f16/bf16 bits.
  struct Array {
    std::vector<float> f32;      // [rows, heads, dim] when dtype is f32
    std::vector<uint16_t> bits;  // [rows, heads, dim] when dtype is f16 or bf16
  };

  void write_row(Array& array, int32_t cell, int64_t row_elements, const float* values);
  KvCacheView view(const Array& array, int32_t head_dim) const;

  CpuKvGeometry geometry_;
  int32_t num_rows_ = 0;       // rows allocated in every array; <= max_cells
  std::vector<Array> keys_;    // [num_layers]
  std::vector<Array> values_;  // [num_layers]
};

}  // namespace cellm
