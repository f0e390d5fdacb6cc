// PackedStep: one step's batch flattened onto a single token axis, as SessionTable::pack makes
// it; and select_rows, which says which kept logits rows a slice of that axis produces.
//
// Inputs sit on the axis in batch order, each its slice contiguous. An executor plans calls over
// [0, num_tokens) with plan_slices, and for each call declares and places
// seq_ids/positions[begin, end) in the cell cache, runs the forward, and keeps the rows
// select_rows(begin, end) names. Plain data: no pointer into the table or the cache.
// Thread-safety: a plain value.
#pragma once

#include <cstdint>
#include <vector>

#include "batching/batch.h"
#include "cache/cell_step.h"

namespace cellm {

// The row an output-producing input keeps: the last token of its slice.
struct KeptRow {
  int32_t token_index = 0;  // on the packed axis
  int32_t input_index = 0;  // in the BatchInput
  SessionId session = 0;
  bool operator==(const KeptRow&) const = default;
};

// Where a session stood when the step began (after any rewind its inputs asked for).
struct SessionStart {
  SessionId session = 0;
  SeqId seq = 0;
  int32_t pos = 0;  // its length before this step's tokens; rollback rewinds it here, then
                    // puts back the tail its rewind held (SessionTable::rollback)
};

// The kept rows inside one slice [begin, end) of the packed axis.
struct RowSelection {
  int32_t first_kept = 0;           // index in kept_rows of the slice's first kept row
  std::vector<int32_t> local_rows;  // [num kept in the slice] token_index - begin, ascending: the
                                    // slice forward's logits_to_keep; local row j is kept row
                                    // first_kept + j
};

struct PackedStep {
  int32_t num_tokens = 0;
  std::vector<int32_t> tokens;      // [num_tokens] token ids
  std::vector<int32_t> positions;   // [num_tokens] ascending within each session
  std::vector<SeqId> seq_ids;       // [num_tokens] the session's cache sequence
  std::vector<SessionId> sessions;  // [num_tokens]
  // [num outputs] one per input with wants_output, in input order; token_index strictly
  // ascending (so the rows of a slice are a contiguous run of this list).
  std::vector<KeptRow> kept_rows;
  // [distinct sessions of the step] in order of first appearance.
  std::vector<SessionStart> session_starts;

  RowSelection select_rows(int32_t begin, int32_t end) const;
  // The outputs this step owes its caller, one per kept row, row = its index; no logits yet.
  BatchOutput make_output() const;
};

}  // namespace cellm
