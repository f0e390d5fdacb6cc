// SessionTable: the engine's sessions mapped onto cell-cache sequences, and the gate that turns a
// BatchInput into a valid PackedStep.
//
// Shared by every executor. Session ids are 64-bit and never reused; each open session owns one
// sequence of the cache. pack() validates the whole batch against the sessions, the limits and
// the pool before it changes anything, so a refused batch leaves the table and the cache exactly
// as they were; only then does it apply the rewinds the batch asks for, as held rewinds
// (CellCache::rewind_held): the dropped cells stay owned until the step commits, so rollback()
// after a failed forward restores every session's cell list exactly. It does not place cells:
// the executor declares and places each slice in the cache (packed_step.h). It knows no tensors,
// no sampling and no threads. User input reaches it unchecked, so every bad id or batch is a
// Status; only misuse by cellm itself (a step left declared in the cache) is a CELLM_CHECK.
// Thread-safety: none; the engine thread owns it and its cache.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>

#include "batching/batch.h"
#include "batching/packed_step.h"
#include "cache/cell_cache.h"
#include "core/status.h"

namespace cellm {

struct SessionTableConfig {
  int32_t max_sessions = 0;        // sessions open at once; >= 1
  int32_t max_session_tokens = 0;  // positions one session may hold (its context); >= 1
  int32_t vocab_size = 0;          // every token run must be in [0, vocab_size); >= 1
};

// OK, or a message naming the field that is out of range.
Status validate_session_table_config(const SessionTableConfig& config);

class SessionTable {
 public:
  // Sessions live in sequences of `cache`, which must outlive the table and must not be used for
  // sequence verbs by anyone else (steps only). The config must validate (CELLM_CHECK).
  SessionTable(CellCache& cache, const SessionTableConfig& config);
  SessionTable(const SessionTable&) = delete;
  SessionTable& operator=(const SessionTable&) = delete;

  const SessionTableConfig& config() const { return config_; }
  int32_t num_sessions() const { return static_cast<int32_t>(sessions_.size()); }
  bool contains(SessionId id) const { return sessions_.count(id) != 0; }
  // The session's length: the position its next token takes. NotFound for an unknown id.
  StatusOr<int32_t> length(SessionId id) const;
  // The session's cell list (position -> cell), valid until the next call. NotFound.
  StatusOr<std::span<const int32_t>> cells(SessionId id) const;

  // A new empty session; nullopt when max_sessions are open.
  std::optional<SessionId> open();
  // Closes a session and releases its cells (shared ones stay with their other owners).
  Status close(SessionId id);
  // A new session holding `src`'s positions [0, upto), sharing their cells. NotFound (unknown
  // src), OutOfRange (upto outside [0, length]), ResourceExhausted (max_sessions open).
  StatusOr<SessionId> clone(SessionId src, int32_t upto);
  // Drops the session's positions >= pos (a preempted session releases its cells with pos 0).
  // NotFound, or OutOfRange when pos is outside [0, length].
  Status rewind(SessionId id, int32_t pos);

  // Validates the whole batch, then applies its rewinds (held until the step commits) and returns
  // it packed. Errors, each leaving table and cache untouched and naming the input: NotFound
  // (unknown session); InvalidArgument (negative start, slice empty or outside its payload, token
  // outside the vocabulary, log-probabilities asked outside [-1, kMaxTopLogprobs] or of a scored
  // token outside the vocabulary, an input starting past its session's length — a gap — or, for a
  // session's later input, not exactly where its previous input ended — gap or overlap);
  // OutOfRange (a session would pass max_session_tokens); ResourceExhausted (the pool has fewer
  // free cells than the batch has tokens — the scheduler may preempt). The cells a batch's own
  // rewinds drop do not count as free: they are held until the step commits, so that a rollback
  // can give them back (rewind_session() first to free them for the step). Once it returns a
  // step, placing every token of it in the cache cannot fail for lack of cells.
  StatusOr<PackedStep> pack(const BatchInput& batch);

  // The step pack() returned last succeeded: the cells its rewinds dropped are freed. Every other
  // verb (and the next pack) commits a pending step first, so an executor that never calls it
  // only keeps those cells a step longer.
  void commit();

  // After a failed forward, before any other call: returns every session of the step to exactly
  // where it was before pack() — its placed cells released, the cells its rewind dropped put
  // back. Sessions closed since are skipped. Requires no step declared in the cache
  // (cancel_step() first).
  void rollback(const PackedStep& step);

 private:
  CellCache& cache_;
  SessionTableConfig config_;
  std::unordered_map<SessionId, SeqId> sessions_;  // open sessions; distinct live sequences
  SessionId next_id_ = 1;  // every id handed out is below it; ids are never reused
};

}  // namespace cellm
