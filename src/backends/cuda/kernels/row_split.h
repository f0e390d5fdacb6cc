// row_split: the host side of kernels that split each row of logits over several blocks, the last
// block of a row to finish merging the others' partial results through a scratch buffer (argmax,
// row_logprobs): whether a scratch is usable, and how many blocks a row takes. Host code, no CUDA
// types. Thread-safety: pure.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace cellm::kernels {

// A null scratch (one block per row) fits; else it must hold `needed` bytes, be 16-byte aligned,
// and the rows fit a grid's y dimension.
inline bool row_split_scratch_fits(const void* scratch, size_t scratch_bytes, size_t needed,
                                   int32_t num_rows) {
  return scratch == nullptr ||
         (scratch_bytes >= needed && reinterpret_cast<uintptr_t>(scratch) % 16 == 0 &&
          num_rows <= 65535);
}

// Blocks per row: 1 without scratch, else one per `min_elements` logits, at most `max_splits`.
inline int64_t row_splits(const void* scratch, int64_t vocab, int64_t max_splits,
                          int64_t min_elements) {
  return scratch == nullptr ? 1 : std::max<int64_t>(1, std::min(max_splits, vocab / min_elements));
}

}  // namespace cellm::kernels
