// FreeCellSet: which cells of a pool are free, handed out lowest first.
//
// A two-level bitmap over [0, num_cells): one bit per cell (set = in use) and one summary bit per
// 64-cell word (set = that word has no free cell), plus a hint below which every word is full.
// `take_lowest()` finds the lowest free cell by scanning summary words from the hint (at most
// num_cells / 4096 words, usually one), so freed cells are reused before the pool grows and a
// backend's storage only needs to reach `high_water()`. It knows cells, not sequences: CellCache
// owns one and keeps the refcounts. Thread-safety: none; one owner.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"

namespace cellm {

class FreeCellSet {
 public:
  // All cells free. num_cells >= 0.
  explicit FreeCellSet(int32_t num_cells);

  int32_t num_cells() const { return num_cells_; }
  int32_t num_used() const { return num_used_; }
  int32_t num_free() const { return num_cells_ - num_used_; }
  // One past the highest cell in use; 0 when none is.
  int32_t high_water() const { return high_water_; }
  bool is_free(int32_t cell) const;

  // Marks the lowest free cell used and returns it. Requires num_free() > 0.
  int32_t take_lowest();
  // Marks a used cell free again. Requires !is_free(cell).
  void give_back(int32_t cell);
  // Every cell free.
  void reset();

  // Recounts everything from the bitmap: summary bits, padding bits, counts, high water, hint.
  Status check_invariants() const;

 private:
  int32_t num_cells_ = 0;
  // [ceil(num_cells / 64)]: bit b of word w set <=> cell 64w+b in use. Padding bits past
  // num_cells are always set, so they are never handed out.
  std::vector<uint64_t> used_words_;
  // [ceil(num_words / 64)]: bit b of word s set <=> used_words_[64s+b] is all ones (no free
  // cell). Padding bits past the last word are always set.
  std::vector<uint64_t> full_summary_;
  int32_t num_used_ = 0;         // popcount of used_words_ minus padding bits
  int32_t high_water_ = 0;       // 1 + highest used cell, 0 if none; every cell >= it is free
  int32_t first_open_word_ = 0;  // every used_words_ entry below it is full
};

}  // namespace cellm
