// CellCache: the off-graph KV cache's bookkeeping — which cell of a shared pool holds which
// position of which sequence.
//
// A pool of max_cells cells; a cell is free or holds one position of one or more sequences
// (shared after seq_clone), and is freed when its last owner lets go (refcounts, so there is no
// cap on sequences but memory). A sequence is an ordered cell list: position p lives in cells[p].
// A step is two calls: declare_step() is the admission gate (refuses and changes nothing when the
// pool cannot hold the step; once it admits, placement cannot fail), then place() appends every
// token at the next position of its sequence, taking the lowest free cell each time, and returns
// a CellStep (cell_step.h). Verbs run only between steps. A rewind that a failed step must be
// able to undo is a held rewind: the dropped cells stay owned as the sequence's held tail (not
// free, so no step overwrites them) until release_held() makes it final or restore_held() puts the
// tail back. It says where bytes go, in integers:
// it knows no tensors, layers or devices (a backend owns K/V storage sized by high_water()), and
// no sessions (batching/session_table.h maps those onto sequences). Sequence misuse (an id that is
// not live, a clone past the end) is a bug in the caller and a CELLM_CHECK failure; SessionTable
// turns user input into valid calls. Thread-safety: none; the engine thread owns it.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "cache/cell_step.h"
#include "cache/free_cell_set.h"
#include "core/status.h"

namespace cellm {

class CellCache {
 public:
  // A pool of max_cells free cells and no sequence. max_cells >= 1.
  explicit CellCache(int32_t max_cells);
  CellCache(const CellCache&) = delete;
  CellCache& operator=(const CellCache&) = delete;

  // ---- Verbs (between steps: never while a step is declared) ----

  // A new empty sequence. Never fails; reuses the id of a removed sequence when there is one.
  SeqId seq_new();
  // A new sequence sharing src's cells [0, upto) (no byte is copied). 0 <= upto <= pos(src).
  SeqId seq_clone(SeqId src, int32_t upto);
  // Removes seq; its cells lose one owner (freed when it was the last).
  void seq_rm(SeqId seq);
  // Drops positions >= pos of seq (none when pos >= its length); cells still owned by other
  // sequences survive. Rewinding to a sequence's length before a step undoes the step exactly.
  // A sequence with a held tail may not rewind below where the tail was dropped.
  void rewind(SeqId seq, int32_t pos);
  // Drops positions >= pos of seq from its list like rewind(), but the dropped cells keep their
  // owner (refcounts unchanged; not free, so no step places them) as seq's held tail, until
  // release_held() frees them or restore_held() puts them back. 0 <= pos <= pos(seq); seq must not
  // hold a tail already. pos == pos(seq) holds nothing.
  void rewind_held(SeqId seq, int32_t pos);
  // Puts seq's held tail back after its list, which must end exactly where the tail was dropped
  // (rewind away what was placed since): the list is then what it was before rewind_held().
  void restore_held(SeqId seq);
  // Frees every held tail of every sequence (cells other sequences still own survive): the held
  // rewinds become final.
  void release_held();
  // Removes every sequence and frees every cell; drops a declared step. Ids start over.
  void clear();

  // ---- Queries ----

  int32_t max_cells() const { return free_.num_cells(); }
  int32_t num_free() const { return free_.num_free(); }
  int32_t num_used() const { return free_.num_used(); }
  // One past the highest cell in use (0 when none): the rows a backend's storage must hold.
  int32_t high_water() const { return free_.high_water(); }
  int32_t num_seqs() const { return num_live_; }
  bool is_live(SeqId seq) const;
  // The length of seq: the next position it will write.
  int32_t pos(SeqId seq) const;
  // seq's cell list (position -> cell); valid until the next verb or step.
  std::span<const int32_t> cells(SeqId seq) const;
  // Owners of a cell (0 = free); a held tail owns its cells.
  int32_t refcount(int32_t cell) const;
  // seq's held tail: the cells its positions [held_from(seq), held_from(seq) + size) had before
  // rewind_held(); empty when it holds none. Valid until the next verb or step.
  std::span<const int32_t> held_cells(SeqId seq) const;
  // Where seq's held tail was dropped; its length when it holds none.
  int32_t held_from(SeqId seq) const;
  // Sequences holding a tail now.
  int32_t num_holders() const { return static_cast<int32_t>(holders_.size()); }

  // ---- A step ----

  // Admission gate for a step of token_seqs.size() tokens, token i appended to token_seqs[i].
  // Error Status (nothing changed): a sequence that is not live, or a step whose visible cell
  // lists would not fit int32. false (nothing changed): the pool has fewer free cells than
  // tokens. true: the step is declared and place() cannot fail; until place() or cancel_step(),
  // no verb may run and no other step may be declared.
  StatusOr<bool> declare_step(std::span<const SeqId> token_seqs);
  // The same, also checking that token i lands at token_positions[i]: each sequence's tokens must
  // sit at exactly its next positions, in token order (no held position rewritten, no going
  // backwards, no gap); a mismatch is an error Status and changes nothing.
  StatusOr<bool> declare_step(std::span<const SeqId> token_seqs,
                              std::span<const int32_t> token_positions);
  bool has_declared_step() const { return declared_; }
  // Drops the declared step without placing it.
  void cancel_step();
  // Places the declared step (all of it) and fills *out, reusing its vectors' capacity: keep one
  // CellStep across steps so that per-step cost is copies, not allocations.
  void place(CellStep* out);
  CellStep place();
  // Undoes a placed step: rewinds each of its sequences to step.seq_pos_begin (what a caller does
  // when the forward fails after placement). Sequences removed since are skipped.
  void rollback(const CellStep& step);

  // Recounts everything: every live cell owned, refcounts equal owners (lists and held tails),
  // free set disjoint from used cells, counts and high water right, no cell twice in one sequence
  // (list and tail together), held-tail bookkeeping, id bookkeeping.
  // O(max_cells + total cells): for tests and debug builds.
  Status check_invariants() const;

 private:
  struct Sequence {
    bool live = false;
    // Position -> cell: length = cells.size(); distinct cells; each holds refcount >= 1.
    std::vector<int32_t> cells;
    // The held tail (rewind_held): cells of positions [held_from, held_from + held.size()) before
    // that rewind, still owned; distinct from `cells`. Non-empty <=> listed in holders_, and then
    // held_from <= cells.size().
    std::vector<int32_t> held;
    int32_t held_from = 0;
  };

  StatusOr<bool> declare(std::span<const SeqId> token_seqs,
                         std::span<const int32_t> token_positions, bool check_positions);
  void check_live(SeqId seq) const;
  void check_no_declared_step() const;
  void release(int32_t cell);  // drops one owner; frees the cell at zero
  void drop_positions(Sequence& seq, int32_t pos);
  void release_tail(SeqId seq);  // frees seq's held tail, if any

  FreeCellSet free_;               // cell is free <=> refcount_[cell] == 0
  std::vector<int32_t> refcount_;  // [max_cells] owners of each cell: live sequences listing it
  std::vector<Sequence> seqs_;     // indexed by SeqId; dead slots have no cells
  std::vector<SeqId> free_ids_;    // exactly the dead slots of seqs_, reused last-in first-out
  int32_t num_live_ = 0;           // live entries of seqs_
  std::vector<SeqId> holders_;     // the live sequences whose held tail is not empty, distinct

  bool declared_ = false;             // a step passed declare_step and awaits place/cancel
  std::vector<SeqId> declared_seqs_;  // [tokens of the declared step]; size <= num_free()
  // [seqs_.size()] scratch: a sequence's index in the step being built, -1 outside a step call.
  std::vector<int32_t> step_index_;
};

}  // namespace cellm
