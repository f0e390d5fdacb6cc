#include "batching/packed_step.h"

#include <algorithm>

#include "core/check.h"

namespace cellm {

RowSelection PackedStep::select_rows(int32_t begin, int32_t end) const {
  CELLM_CHECK(0 <= begin && begin <= end && end <= num_tokens)
      << "select_rows [" << begin << ", " << end << ") outside [0, " << num_tokens << ")";
  const auto first =
      std::lower_bound(kept_rows.begin(), kept_rows.end(), begin,
                       [](const KeptRow& row, int32_t token) { return row.token_index < token; });
  RowSelection selection;
  selection.first_kept = static_cast<int32_t>(first - kept_rows.begin());
  for (auto it = first; it != kept_rows.end() && it->token_index < end; ++it) {
    selection.local_rows.push_back(it->token_index - begin);
  }
  return selection;
}

BatchOutput PackedStep::make_output() const {
  BatchOutput output;
  output.outputs.reserve(kept_rows.size());
  for (size_t k = 0; k < kept_rows.size(); ++k) {
    OutputRow& row = output.outputs.emplace_back();
    row.session = kept_rows[k].session;
    row.input_index = kept_rows[k].input_index;
    row.row = static_cast<int32_t>(k);
  }
  return output;
}

}  // namespace cellm
