// Executor: the seam between batching and a backend (DESIGN §5).
//
// The Runner (and tests) drive an executor through this interface only; CpuExecutor and
// CudaExecutor implement it over the shared SessionTable, the cell cache and plan_slices (the
// shared half is TableExecutor, table_executor.h), so a step means the same thing on every
// backend. execute() runs one BatchInput: it packs it (the whole batch validated before anything
// changes), plans slices, places each slice's cells, runs the program's methods, and returns one
// OutputRow per input that asked for one, with the logits of those rows when asked (a view into
// the executor's memory, valid until its next execute()). A failed execute() returns an error
// and leaves every session exactly as it was before the call (a rewind the batch asked for
// included). Knows no tensors or devices. Thread-safety: every call comes from the engine
// thread.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "batching/batch.h"
#include "core/status.h"

namespace cellm {

// What the pool holds now: the scheduler's memory-aware admission reads it.
struct CacheUsage {
  int32_t max_cells = 0;   // the pool's size (the program's cellm.kv.max_cells)
  int32_t num_free = 0;    // cells a step may still take
  int32_t high_water = 0;  // one past the highest cell in use: rows the storage holds
};

// The limits an executor runs under, from the program (ProgramSpec): the scheduler's budget.
struct ExecutorLimits {
  int32_t max_step_tokens = 0;     // W: the widest forward and a step's token budget
  int32_t min_prefill_chunk = 0;   // m
  int32_t max_sessions = 0;        // sessions open at once
  int32_t max_session_tokens = 0;  // positions one session may hold
  int32_t vocab_size = 0;
};

class Executor {
 public:
  virtual ~Executor() = default;

  // Loads weights, sizes buffers (captures graphs on CUDA). Called once before anything else.
  virtual Status initialize() = 0;
  virtual ExecutorLimits limits() const = 0;
  int32_t preferred_batch_tokens() const { return limits().max_step_tokens; }
  virtual CacheUsage cache_usage() const = 0;

  // A new empty session; nullopt at capacity.
  virtual std::optional<SessionId> open_session() = 0;
  virtual Status close_session(SessionId id) = 0;
  // A new session sharing `src`'s positions [0, upto).
  virtual StatusOr<SessionId> clone_session(SessionId src, int32_t upto) = 0;
  // The session's length (committed positions).
  virtual StatusOr<int32_t> session_length(SessionId id) const = 0;
  // Drops positions >= pos (preemption releases a session's cells with pos 0).
  virtual Status rewind_session(SessionId id, int32_t pos) = 0;

  // Runs one step. With `return_logits`, BatchOutput::logits holds the kept rows
  // ([outputs, vocab], f32) as a view into memory this executor owns: valid until the next
  // execute() on it (a failed one included), never copied per step; otherwise it may be empty.
  // OutputRow::token is left kNoToken for the caller's sampler; OutputRow::greedy_token is set
  // by executors that compute each row's argmax themselves (computes_greedy_tokens()), with or
  // without return_logits.
  virtual StatusOr<BatchOutput> execute(const BatchInput& batch, bool return_logits) = 0;

  // True when execute() fills every output row's OutputRow::greedy_token (argmax_finite of the
  // row, kNoToken when nothing is finite): a caller whose rows all take the argmax may then ask
  // for no logits (the CUDA executor skips copying [rows, vocab] floats to the host).
  virtual bool computes_greedy_tokens() const { return false; }

  // True when execute() fills OutputRow::logprobs for every output row whose input asked
  // (StepInput::num_top_logprobs >= 0), with or without return_logits: a caller then needs the
  // rows themselves only to sample them (the CUDA executor summarizes them on the device).
  virtual bool computes_logprobs() const { return false; }

  // True when execute() fills OutputRow::candidates for every output row whose input asked
  // (StepInput::candidates_temperature > 0), with or without return_logits (the CUDA executor
  // lists them on the device): most sampled rows then draw without the host reading the row.
  virtual bool computes_candidates() const { return false; }

  // True when, besides, every candidates row whose input enables StepInput::candidates_draw gets
  // its token drawn (RowCandidates::drawn) — from the list where it decides, else from the whole
  // row (RowCandidates::drawn_from_row) as the session's sampler would, up to rounding: a sampler
  // without bias or penalties then never needs its row (the CUDA executor draws on the device).
  virtual bool draws_rows() const { return false; }

  // True when, besides, every candidates row whose input enables StepInput::rewrite is rewritten
  // first (core/score_rewrite.h: the session sampler's bias and penalties), so its candidates,
  // total and draw are of the scores the sampler's sample() draws from: a sampler with bias or
  // penalties then needs its row no more than one without (the CUDA executor rewrites on the
  // device). The row's log-probability summary and greedy token stay of the raw row.
  virtual bool rewrites_rows() const { return false; }

  // True when an execute() of a batch with BatchInput::keep_logits and no return_logits keeps
  // the kept rows (on the device, for the CUDA executor) until the next execute(), so that
  // fetch_logits() copies only the rows the caller turns out to read (a draw its candidates did
  // not decide, a sampler with bias or penalties, log-probabilities not summarized).
  virtual bool fetches_logits() const { return false; }

  // After a successful execute() of a batch with keep_logits: the output rows `rows` (indices
  // into its BatchOutput::outputs, ascending, no repeats) in a view of [outputs, vocab] f32 of
  // which only those rows are defined (the others may hold anything), valid until the next
  // execute(). An error when the last execute() kept no rows or failed, or a row is out of range.
  virtual StatusOr<std::span<const float>> fetch_logits(std::span<const int32_t> rows) {
    (void)rows;
    return failed_precondition("this executor keeps no logits rows to fetch");
  }
};

}  // namespace cellm
