// TableExecutor: the half of an Executor that is the same on every backend — sessions kept in a
// SessionTable over a CellCache, and the transaction around a step.
//
// CpuExecutor, CudaExecutor and the tests' FakeExecutor derive from it; each builds the cache
// and the table in its initialize() (create_sessions), and writes execute() as: pack the batch
// (table().pack); for each call of the plan, place_call() and run its forward; if a call fails,
// abort_step() and return the error; at the end, commit_step(). The session verbs of the Executor
// interface are implemented here once, and cache_usage() reads the cache. It knows no tensors,
// devices or programs (the backend owns the K/V bytes and the forward). Calling a session verb
// before create_sessions() is a bug in the caller (CELLM_CHECK). Thread-safety: every call from the
// engine thread, like any Executor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "batching/executor.h"
#include "batching/session_table.h"
#include "batching/step_plan.h"
#include "cache/cell_cache.h"

namespace cellm {

class TableExecutor : public Executor {
 public:
  ~TableExecutor() override;

  CacheUsage cache_usage() const override;
  std::optional<SessionId> open_session() override;
  Status close_session(SessionId id) override;
  StatusOr<SessionId> clone_session(SessionId src, int32_t upto) override;
  StatusOr<int32_t> session_length(SessionId id) const override;
  Status rewind_session(SessionId id, int32_t pos) override;

  // The session's cell list (position -> cell), for tests and diagnostics. NotFound.
  StatusOr<std::vector<int32_t>> session_cells(SessionId id) const;

 protected:
  // `name` names the executor in the messages of misuse ("CpuExecutor used before ...").
  explicit TableExecutor(std::string name);

  // Builds a pool of max_cells cells and the session table over it (config must validate). Once.
  void create_sessions(int32_t max_cells, const SessionTableConfig& config);
  bool has_sessions() const { return table_ != nullptr; }
  CellCache& cache();
  const CellCache& cache() const;
  SessionTable& table();

  // Declares and places the real tokens of `call` (positions and sequences from `step`) and
  // fills *cells. An Internal error when the pool refuses what pack() admitted.
  Status place_call(const PackedStep& step, const SliceCall& call, CellStep* cells);
  // After a failed call: drops a declared step and returns every session of `step` to exactly
  // where it was before the batch (SessionTable::rollback).
  void abort_step(const PackedStep& step);
  // After the last call succeeded: frees the cells the batch's rewinds dropped.
  void commit_step();
  // fetch_logits()'s rows, checked against the `num_rows` output rows the last step kept: each
  // in range, ascending, no repeats. InvalidArgument naming the first that is not.
  Status check_fetch_rows(std::span<const int32_t> rows, size_t num_rows) const;

 private:
  void check_sessions() const;  // CELLM_CHECK that create_sessions() ran

  std::string name_;
  // Built by create_sessions(); table_ refers to cache_, so it is declared after it.
  std::unique_ptr<CellCache> cache_;
  std::unique_ptr<SessionTable> table_;
};

}  // namespace cellm
