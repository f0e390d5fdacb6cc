// The BERT normalization of one code point (NFD, accents dropped, lowercase), as a table that
// tools/gen_wpm_fold_table.py generates from Unicode data. Internal to wpm.cpp.
// Thread-safety: constant data.
#pragma once

#include <cstddef>
#include <cstdint>

namespace cellm::tokenizer_internal {

struct WpmFoldEntry {
  uint32_t code_point;
  uint8_t num_outputs;  // 0 (a nonspacing mark: dropped) to 3
  uint32_t outputs[3];
};

// Sorted by code_point; code points absent from it fold to themselves (Hangul syllables are
// decomposed arithmetically by the caller).
extern const WpmFoldEntry kWpmFoldTable[];
extern const size_t kWpmFoldTableSize;

}  // namespace cellm::tokenizer_internal
