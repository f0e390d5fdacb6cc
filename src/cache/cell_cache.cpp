#include "cache/cell_cache.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <set>
#include <string>

#include "core/check.h"

namespace cellm {

CellCache::CellCache(int32_t max_cells) : free_(max_cells), refcount_(max_cells, 0) {
  CELLM_CHECK_GE(max_cells, 1) << "a cell cache needs at least one cell";
}

bool CellCache::is_live(SeqId seq) const {
  return seq >= 0 && seq < static_cast<SeqId>(seqs_.size()) && seqs_[seq].live;
}

void CellCache::check_live(SeqId seq) const {
  CELLM_CHECK(is_live(seq)) << "sequence " << seq << " is not live";
}

void CellCache::check_no_declared_step() const {
  CELLM_CHECK(!declared_) << "a step is declared: place() or cancel_step() before any verb";
}

int32_t CellCache::pos(SeqId seq) const {
  check_live(seq);
  return static_cast<int32_t>(seqs_[seq].cells.size());
}

std::span<const int32_t> CellCache::cells(SeqId seq) const {
  check_live(seq);
  return seqs_[seq].cells;
}

int32_t CellCache::refcount(int32_t cell) const {
  CELLM_CHECK(cell >= 0 && cell < max_cells()) << "cell " << cell << " outside the pool";
  return refcount_[cell];
}

SeqId CellCache::seq_new() {
  check_no_declared_step();
  SeqId id;
  if (!free_ids_.empty()) {
    id = free_ids_.back();
    free_ids_.pop_back();
  } else {
    CELLM_CHECK_LT(seqs_.size(), static_cast<size_t>(std::numeric_limits<SeqId>::max()))
        << "sequence ids exhausted";
    id = static_cast<SeqId>(seqs_.size());
    seqs_.emplace_back();
    step_index_.push_back(-1);
  }
  seqs_[id].live = true;
  ++num_live_;
  return id;
}

SeqId CellCache::seq_clone(SeqId src, int32_t upto) {
  check_live(src);
  CELLM_CHECK(upto >= 0 && upto <= pos(src))
      << "seq_clone(" << src << ", upto " << upto << ") past its length " << pos(src);
  const SeqId id = seq_new();  // may grow seqs_: take references after it
  const std::vector<int32_t>& from = seqs_[src].cells;
  seqs_[id].cells.assign(from.begin(), from.begin() + upto);
  for (int32_t cell : seqs_[id].cells) ++refcount_[cell];
  return id;
}

void CellCache::release(int32_t cell) {
  CELLM_CHECK_GT(refcount_[cell], 0) << "cell " << cell << " released with no owner";
  if (--refcount_[cell] == 0) free_.give_back(cell);
}

void CellCache::drop_positions(Sequence& seq, int32_t pos) {
  const int32_t length = static_cast<int32_t>(seq.cells.size());
  // Newest first, so a sequence's own top cells go back in descending order.
  for (int32_t p = length - 1; p >= pos; --p) release(seq.cells[p]);
  if (pos < length) seq.cells.resize(pos);
}

void CellCache::release_tail(SeqId seq) {
  Sequence& sequence = seqs_[seq];
  if (sequence.held.empty()) return;
  for (auto it = sequence.held.rbegin(); it != sequence.held.rend(); ++it) release(*it);
  sequence.held.clear();
  holders_.erase(std::find(holders_.begin(), holders_.end(), seq));
}

void CellCache::seq_rm(SeqId seq) {
  check_no_declared_step();
  check_live(seq);
  release_tail(seq);
  drop_positions(seqs_[seq], 0);
  seqs_[seq].cells.shrink_to_fit();
  seqs_[seq].live = false;
  free_ids_.push_back(seq);
  --num_live_;
}

void CellCache::rewind(SeqId seq, int32_t pos) {
  check_no_declared_step();
  check_live(seq);
  CELLM_CHECK_GE(pos, 0) << "rewind of sequence " << seq << " to a negative position";
  const Sequence& sequence = seqs_[seq];
  CELLM_CHECK(sequence.held.empty() || pos >= sequence.held_from)
      << "rewind of sequence " << seq << " to " << pos << ", below its held tail at "
      << sequence.held_from << ": restore_held() or release_held() first";
  drop_positions(seqs_[seq], pos);
}

void CellCache::rewind_held(SeqId seq, int32_t pos) {
  check_no_declared_step();
  check_live(seq);
  Sequence& sequence = seqs_[seq];
  CELLM_CHECK(pos >= 0 && pos <= static_cast<int32_t>(sequence.cells.size()))
      << "rewind_held of sequence " << seq << " to " << pos << " outside [0, its length "
      << sequence.cells.size() << "]";
  CELLM_CHECK(sequence.held.empty())
      << "rewind_held of sequence " << seq << ", which already holds a tail";
  if (pos == static_cast<int32_t>(sequence.cells.size())) return;
  // The cells move from the list to the tail with their refcounts: nothing is freed.
  sequence.held.assign(sequence.cells.begin() + pos, sequence.cells.end());
  sequence.held_from = pos;
  sequence.cells.resize(pos);
  holders_.push_back(seq);
}

void CellCache::restore_held(SeqId seq) {
  check_no_declared_step();
  check_live(seq);
  Sequence& sequence = seqs_[seq];
  CELLM_CHECK(!sequence.held.empty()) << "restore_held of sequence " << seq << ", which holds none";
  CELLM_CHECK_EQ(static_cast<int32_t>(sequence.cells.size()), sequence.held_from)
      << "restore_held of sequence " << seq << ": its list must end where the tail was dropped";
  sequence.cells.insert(sequence.cells.end(), sequence.held.begin(), sequence.held.end());
  sequence.held.clear();
  holders_.erase(std::find(holders_.begin(), holders_.end(), seq));
}

void CellCache::release_held() {
  check_no_declared_step();
  while (!holders_.empty()) release_tail(holders_.back());
}

std::span<const int32_t> CellCache::held_cells(SeqId seq) const {
  check_live(seq);
  return seqs_[seq].held;
}

int32_t CellCache::held_from(SeqId seq) const {
  check_live(seq);
  const Sequence& sequence = seqs_[seq];
  return sequence.held.empty() ? static_cast<int32_t>(sequence.cells.size()) : sequence.held_from;
}

void CellCache::clear() {
  free_.reset();
  std::fill(refcount_.begin(), refcount_.end(), 0);
  seqs_.clear();
  free_ids_.clear();
  step_index_.clear();
  holders_.clear();
  num_live_ = 0;
  declared_ = false;
  declared_seqs_.clear();
}

StatusOr<bool> CellCache::declare_step(std::span<const SeqId> token_seqs) {
  return declare(token_seqs, {}, /*check_positions=*/false);
}

StatusOr<bool> CellCache::declare_step(std::span<const SeqId> token_seqs,
                                       std::span<const int32_t> token_positions) {
  if (token_positions.size() != token_seqs.size()) {
    return invalid_argument("declare_step: " + std::to_string(token_positions.size()) +
                            " positions for " + std::to_string(token_seqs.size()) + " tokens");
  }
  return declare(token_seqs, token_positions, /*check_positions=*/true);
}

StatusOr<bool> CellCache::declare(std::span<const SeqId> token_seqs,
                                  std::span<const int32_t> token_positions, bool check_positions) {
  check_no_declared_step();
  // Count each sequence's tokens through the step_index_ scratch (reset before returning).
  std::vector<SeqId> step_seqs;
  std::vector<int32_t> step_counts;
  Status status;
  for (size_t i = 0; i < token_seqs.size() && status.ok(); ++i) {
    const SeqId seq = token_seqs[i];
    if (!is_live(seq)) {
      status = invalid_argument("declare_step: token " + std::to_string(i) + " names sequence " +
                                std::to_string(seq) + ", which is not live");
      break;
    }
    int32_t& index = step_index_[seq];
    if (index < 0) {
      index = static_cast<int32_t>(step_seqs.size());
      step_seqs.push_back(seq);
      step_counts.push_back(0);
    }
    const int64_t expected = static_cast<int64_t>(seqs_[seq].cells.size()) + step_counts[index];
    if (check_positions && token_positions[i] != expected) {
      status = invalid_argument(
          "declare_step: token " + std::to_string(i) + " of sequence " + std::to_string(seq) +
          " is at position " + std::to_string(token_positions[i]) + " but the next position is " +
          std::to_string(expected) +
          (token_positions[i] < expected ? " (a held position or going backwards)" : " (a gap)"));
    }
    ++step_counts[index];
  }
  int64_t num_visible = 0;
  for (size_t s = 0; s < step_seqs.size(); ++s) {
    num_visible += static_cast<int64_t>(seqs_[step_seqs[s]].cells.size()) + step_counts[s];
    step_index_[step_seqs[s]] = -1;
  }
  CELLM_RETURN_IF_ERROR(status);
  if (num_visible > std::numeric_limits<int32_t>::max()) {
    return out_of_range("declare_step: the step's sequences hold " + std::to_string(num_visible) +
                        " cells in all, past the int32 limit of a CellStep");
  }
  if (static_cast<int64_t>(token_seqs.size()) > num_free()) return false;
  declared_seqs_.assign(token_seqs.begin(), token_seqs.end());
  declared_ = true;
  return true;
}

void CellCache::cancel_step() {
  declared_ = false;
  declared_seqs_.clear();
}

CellStep CellCache::place() {
  CellStep step;
  place(&step);
  return step;
}

void CellCache::place(CellStep* out) {
  CELLM_CHECK(declared_) << "place() without a declared step";
  CELLM_CHECK_LE(static_cast<int64_t>(declared_seqs_.size()), num_free())
      << "the declared step lost its cells";
  CellStep& step = *out;
  const int32_t num_tokens = static_cast<int32_t>(declared_seqs_.size());
  step.num_tokens = num_tokens;
  step.num_seqs = 0;
  step.token_seq.resize(num_tokens);
  step.token_pos.resize(num_tokens);
  step.token_cell.resize(num_tokens);
  step.token_step_seq.resize(num_tokens);
  step.seq_id.clear();
  step.seq_pos_begin.clear();
  for (int32_t t = 0; t < num_tokens; ++t) {
    const SeqId seq = declared_seqs_[t];
    int32_t& index = step_index_[seq];
    if (index < 0) {
      index = step.num_seqs++;
      step.seq_id.push_back(seq);
      step.seq_pos_begin.push_back(static_cast<int32_t>(seqs_[seq].cells.size()));
    }
    std::vector<int32_t>& cells = seqs_[seq].cells;
    const int32_t cell = free_.take_lowest();
    refcount_[cell] = 1;
    step.token_seq[t] = seq;
    step.token_pos[t] = static_cast<int32_t>(cells.size());
    step.token_cell[t] = cell;
    step.token_step_seq[t] = index;
    cells.push_back(cell);
  }
  // The visible lists, CSR: one memcpy per sequence. seq_cells is resized, never cleared, so a
  // reused CellStep does not zero-fill what the copies overwrite anyway.
  step.seq_len.resize(step.num_seqs);
  step.seq_cell_offsets.resize(step.num_seqs + 1);
  step.seq_cell_offsets[0] = 0;
  step.max_seq_len = 0;
  for (int32_t s = 0; s < step.num_seqs; ++s) {
    const int32_t length = static_cast<int32_t>(seqs_[step.seq_id[s]].cells.size());
    step.seq_len[s] = length;
    step.seq_cell_offsets[s + 1] = step.seq_cell_offsets[s] + length;  // fits: declare checked
    step.max_seq_len = std::max(step.max_seq_len, length);
  }
  step.seq_cells.resize(step.seq_cell_offsets[step.num_seqs]);
  for (int32_t s = 0; s < step.num_seqs; ++s) {
    const std::vector<int32_t>& cells = seqs_[step.seq_id[s]].cells;
    if (!cells.empty()) {
      std::memcpy(step.seq_cells.data() + step.seq_cell_offsets[s], cells.data(),
                  cells.size() * sizeof(int32_t));
    }
    step_index_[step.seq_id[s]] = -1;
  }
  declared_ = false;
  declared_seqs_.clear();
}

void CellCache::rollback(const CellStep& step) {
  for (int32_t s = 0; s < step.num_seqs; ++s) {
    if (is_live(step.seq_id[s])) rewind(step.seq_id[s], step.seq_pos_begin[s]);
  }
}

Status CellCache::check_invariants() const {
  CELLM_RETURN_IF_ERROR(free_.check_invariants());
  const int32_t num_cells = max_cells();
  std::vector<int32_t> owners(num_cells, 0);
  std::vector<int32_t> last_owner(num_cells, -1);  // catches a cell twice in one sequence
  int32_t num_live = 0;
  for (SeqId id = 0; id < static_cast<SeqId>(seqs_.size()); ++id) {
    const Sequence& seq = seqs_[id];
    if (step_index_[id] != -1) {
      return internal_error("cell cache: step scratch of sequence " + std::to_string(id) +
                            " was not reset");
    }
    if (!seq.live) {
      if (!seq.cells.empty() || !seq.held.empty()) {
        return internal_error("cell cache: removed sequence " + std::to_string(id) +
                              " still lists or holds cells");
      }
      continue;
    }
    ++num_live;
    const bool listed_holder = std::find(holders_.begin(), holders_.end(), id) != holders_.end();
    if (seq.held.empty() == listed_holder) {
      return internal_error("cell cache: sequence " + std::to_string(id) + " holds " +
                            std::to_string(seq.held.size()) + " cells but is " +
                            (listed_holder ? "" : "not ") + "listed as a holder");
    }
    if (!seq.held.empty() && seq.held_from > static_cast<int32_t>(seq.cells.size())) {
      return internal_error("cell cache: sequence " + std::to_string(id) +
                            " is shorter than the position its held tail was dropped at");
    }
    // Positions first, then the held tail (numbered on from the list's end in messages).
    std::vector<int32_t> owned = seq.cells;
    owned.insert(owned.end(), seq.held.begin(), seq.held.end());
    for (size_t p = 0; p < owned.size(); ++p) {
      const int32_t cell = owned[p];
      if (cell < 0 || cell >= num_cells) {
        return internal_error("cell cache: sequence " + std::to_string(id) + " position " +
                              std::to_string(p) + " names cell " + std::to_string(cell) +
                              " outside the pool");
      }
      if (last_owner[cell] == id) {
        return internal_error("cell cache: sequence " + std::to_string(id) + " lists cell " +
                              std::to_string(cell) + " twice");
      }
      last_owner[cell] = id;
      ++owners[cell];
    }
  }
  std::set<SeqId> holders;
  for (SeqId id : holders_) {
    if (!is_live(id) || seqs_[id].held.empty() || !holders.insert(id).second) {
      return internal_error("cell cache: holder " + std::to_string(id) +
                            " is not live, holds nothing or is listed twice");
    }
  }
  if (num_live != num_live_) {
    return internal_error("cell cache: " + std::to_string(num_live) + " live sequences but " +
                          std::to_string(num_live_) + " recorded");
  }
  if (static_cast<int32_t>(free_ids_.size()) + num_live != static_cast<int32_t>(seqs_.size())) {
    return internal_error("cell cache: reusable ids do not match the removed sequences");
  }
  std::vector<bool> id_seen(seqs_.size(), false);
  for (SeqId id : free_ids_) {
    if (id < 0 || id >= static_cast<SeqId>(seqs_.size()) || seqs_[id].live || id_seen[id]) {
      return internal_error("cell cache: reusable id " + std::to_string(id) +
                            " is live, out of range or listed twice");
    }
    id_seen[id] = true;
  }
  for (int32_t cell = 0; cell < num_cells; ++cell) {
    if (owners[cell] != refcount_[cell]) {
      return internal_error("cell cache: cell " + std::to_string(cell) + " has refcount " +
                            std::to_string(refcount_[cell]) + " but " +
                            std::to_string(owners[cell]) + " owners");
    }
    if ((owners[cell] == 0) != free_.is_free(cell)) {
      return internal_error("cell cache: cell " + std::to_string(cell) + " has " +
                            std::to_string(owners[cell]) + " owners but is " +
                            (free_.is_free(cell) ? "in" : "missing from") + " the free set");
    }
  }
  if (declared_ && static_cast<int32_t>(declared_seqs_.size()) > num_free()) {
    return internal_error("cell cache: the declared step needs more cells than are free");
  }
  if (!declared_ && !declared_seqs_.empty()) {
    return internal_error("cell cache: tokens kept for a step that is not declared");
  }
  return ok_status();
}

}  // namespace cellm
