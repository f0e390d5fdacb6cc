#include "cache/free_cell_set.h"

#include <algorithm>
#include <bit>
#include <string>

#include "core/check.h"

namespace cellm {
namespace {

constexpr uint64_t kAllOnes = ~uint64_t{0};

int32_t words_for(int64_t bits) { return static_cast<int32_t>((bits + 63) / 64); }

// Bits [from, 64) set: the padding of a last word that holds `from` real bits (from in 0..63).
uint64_t padding_mask(int64_t from) {
  const int shift = static_cast<int>(from % 64);
  return shift == 0 ? 0 : kAllOnes << shift;
}

}  // namespace

FreeCellSet::FreeCellSet(int32_t num_cells) : num_cells_(num_cells) {
  CELLM_CHECK_GE(num_cells, 0) << "FreeCellSet needs a non-negative size";
  used_words_.resize(words_for(num_cells));
  full_summary_.resize(words_for(static_cast<int64_t>(used_words_.size())));
  reset();
}

bool FreeCellSet::is_free(int32_t cell) const {
  CELLM_CHECK(cell >= 0 && cell < num_cells_)
      << "cell " << cell << " outside [0, " << num_cells_ << ")";
  return ((used_words_[cell / 64] >> (cell % 64)) & 1) == 0;
}

void FreeCellSet::reset() {
  std::fill(used_words_.begin(), used_words_.end(), 0);
  std::fill(full_summary_.begin(), full_summary_.end(), 0);
  if (!used_words_.empty()) used_words_.back() |= padding_mask(num_cells_);
  if (!full_summary_.empty()) full_summary_.back() |= padding_mask(used_words_.size());
  num_used_ = 0;
  high_water_ = 0;
  first_open_word_ = 0;
}

int32_t FreeCellSet::take_lowest() {
  CELLM_CHECK_GT(num_free(), 0) << "take_lowest on a full pool";
  // Words below first_open_word_ are full, so their summary bits are set: scanning whole summary
  // words from the hint's summary word finds the lowest word with a free cell.
  int32_t summary = first_open_word_ / 64;
  while (full_summary_[summary] == kAllOnes) ++summary;
  const int32_t word = summary * 64 + static_cast<int32_t>(std::countr_one(full_summary_[summary]));
  const int32_t bit = static_cast<int32_t>(std::countr_one(used_words_[word]));
  const int32_t cell = word * 64 + bit;
  CELLM_CHECK_LT(cell, num_cells_) << "free-cell bitmap points past the pool";
  used_words_[word] |= uint64_t{1} << bit;
  if (used_words_[word] == kAllOnes) full_summary_[word / 64] |= uint64_t{1} << (word % 64);
  ++num_used_;
  first_open_word_ = word;
  if (cell + 1 > high_water_) high_water_ = cell + 1;
  return cell;
}

void FreeCellSet::give_back(int32_t cell) {
  CELLM_CHECK(!is_free(cell)) << "cell " << cell << " given back twice";
  const int32_t word = cell / 64;
  if (used_words_[word] == kAllOnes) full_summary_[word / 64] &= ~(uint64_t{1} << (word % 64));
  used_words_[word] &= ~(uint64_t{1} << (cell % 64));
  --num_used_;
  if (word < first_open_word_) first_open_word_ = word;
  if (cell + 1 != high_water_) return;
  // The highest used cell left: walk down to the next one. Amortized O(1) per allocation, since
  // the high water can only climb back over an emptied stretch by filling it cell by cell.
  // Only the last word holds padding bits, and cells above `cell` are free, so mask them off.
  uint64_t bits = used_words_[word] & ((uint64_t{1} << (cell % 64)) - 1);
  int32_t w = word;
  while (bits == 0 && w > 0) bits = used_words_[--w];
  high_water_ = bits == 0 ? 0 : w * 64 + 64 - static_cast<int32_t>(std::countl_zero(bits));
}

Status FreeCellSet::check_invariants() const {
  const int32_t num_words = static_cast<int32_t>(used_words_.size());
  int32_t num_used = 0;
  int32_t high_water = 0;
  for (int32_t w = 0; w < num_words; ++w) {
    uint64_t real = used_words_[w];
    if (w == num_words - 1) {
      const uint64_t padding = padding_mask(num_cells_);
      if ((real & padding) != padding) {
        return internal_error("free cells: padding bits of the last word are not all set");
      }
      real &= ~padding;
    }
    num_used += std::popcount(real);
    if (real != 0) high_water = w * 64 + 64 - static_cast<int32_t>(std::countl_zero(real));
    const bool full = used_words_[w] == kAllOnes;
    const bool marked = ((full_summary_[w / 64] >> (w % 64)) & 1) != 0;
    if (full != marked) {
      return internal_error("free cells: summary bit of word " + std::to_string(w) + " says " +
                            (marked ? "full" : "open") + " but the word is " +
                            (full ? "full" : "open"));
    }
    if (w < first_open_word_ && !full) {
      return internal_error("free cells: word " + std::to_string(w) +
                            " has a free cell below the hint " + std::to_string(first_open_word_));
    }
  }
  if (!full_summary_.empty()) {
    const uint64_t padding = padding_mask(num_words);
    if ((full_summary_.back() & padding) != padding) {
      return internal_error("free cells: padding bits of the last summary word are not all set");
    }
  }
  if (num_used != num_used_) {
    return internal_error("free cells: " + std::to_string(num_used) + " bits set but num_used " +
                          std::to_string(num_used_));
  }
  if (high_water != high_water_) {
    return internal_error("free cells: high water is " + std::to_string(high_water) +
                          " but recorded " + std::to_string(high_water_));
  }
  return ok_status();
}

}  // namespace cellm
