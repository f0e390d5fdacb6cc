// CpuExecutor: the Executor (batching/executor.h) of the CPU backend — the plain, exact
// reference every other backend is checked against.
//
// One step: SessionTable::pack validates the batch (a refused batch changes nothing), then
// plan_slices cuts the packed tokens into method calls exactly as the CUDA executor will (a slice
// of at least m tokens is one prefill call; shorter ones are decode calls of the program's static
// widths, whose padding rows the CPU simply skips). Each call declares and places its tokens in
// the CellCache, grows the K/V storage to the cache's high water, and runs CpuForward, which
// writes the logits of the call's kept rows straight into the BatchOutput. A call that fails
// rolls the whole step back (SessionTable::rollback), so every session is as it was. Sampling is
// not done here: OutputRow::token stays kNoToken. Thread-safety: every call from one thread
// (the engine thread); the forward uses the executor's own ThreadPool.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "backends/cpu/cpu_forward.h"
#include "backends/cpu/cpu_kv_storage.h"
#include "batching/executor.h"
#include "batching/session_table.h"
#include "batching/step_plan.h"
#include "cache/cell_cache.h"
#include "core/thread_pool.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "program/program_spec.h"

namespace cellm {

struct CpuExecutorOptions {
  int32_t max_sessions = 64;       // sessions open at once
  int32_t max_session_tokens = 0;  // positions one session may hold; 0 = the program's context
  int32_t num_threads = 0;         // forward threads, the caller's included; 0 = every core
};

// What the executor has run since it was built (the method calls of the plans).
struct CpuExecutorStats {
  int64_t num_steps = 0;          // execute() calls that succeeded
  int64_t num_prefill_calls = 0;  // prefill method calls
  int64_t num_decode_calls = 0;   // decode method calls
  int64_t num_tokens = 0;         // real tokens run
  int64_t num_padding_rows = 0;   // decode rows padded up to a static width (skipped on CPU)
};

class CpuExecutor final : public Executor {
 public:
  // The weights' GgufFile must outlive the executor. Nothing is checked or allocated until
  // initialize(), which must succeed before any other call.
  CpuExecutor(const ModelConfig& config, const ModelWeights& weights, const ProgramSpec& spec,
              const CpuExecutorOptions& options = {});
  ~CpuExecutor() override;

  // Validates the program spec against the model (W, m, decode widths, cache geometry, vocab)
  // and the options; builds the cache, the session table, the storage and the forward.
  Status initialize() override;
  ExecutorLimits limits() const override;
  CacheUsage cache_usage() const override;

  std::optional<SessionId> open_session() override;
  Status close_session(SessionId id) override;
  StatusOr<SessionId> clone_session(SessionId src, int32_t upto) override;
  StatusOr<int32_t> session_length(SessionId id) const override;
  Status rewind_session(SessionId id, int32_t pos) override;

  StatusOr<BatchOutput> execute(const BatchInput& batch, bool return_logits) override;

  const ProgramSpec& spec() const { return spec_; }
  // Bytes of K/V storage allocated now (grows with the cache's high water).
  uint64_t kv_storage_bytes() const;
  const CpuExecutorStats& stats() const { return stats_; }

 private:
  // One call of the plan: declare + place its real tokens in the cache, grow the storage, run
  // the forward into `output`'s logits rows (if any). Padding rows of a decode call are skipped.
  Status run_call(const PackedStep& step, const SliceCall& call, BatchOutput& output);

  ModelConfig config_;
  ModelWeights weights_;
  ProgramSpec spec_;
  CpuExecutorOptions options_;
  bool initialized_ = false;

  // Built by initialize(); table_ refers to cache_, so it is declared after it.
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<CellCache> cache_;
  std::unique_ptr<SessionTable> table_;
  std::unique_ptr<CpuKvStorage> kv_;
  std::unique_ptr<CpuForward> forward_;
  CellStep cell_step_;  // reused by every call (its vectors keep their capacity)
  CpuExecutorStats stats_;
};

}  // namespace cellm
