// CpuExecutor: the Executor (batching/executor.h) of the CPU backend — the plain, exact
// reference every other backend is checked against.
//
// One step (the transaction is TableExecutor's): SessionTable::pack validates the batch (a
// refused batch changes nothing), then plan_slices cuts the packed tokens into method calls
// exactly as the CUDA executor does (a slice of at least m tokens is one prefill call; shorter
// ones are decode calls of the program's static widths, whose padding rows the CPU simply skips).
// Each call places its tokens in the CellCache, grows the K/V storage to the cache's high water,
// and runs CpuForward, which writes the logits of the call's kept rows straight into the
// executor's logits buffer; BatchOutput::logits is a view of it, valid until the next execute().
// A call that fails rolls the whole step back, so every session is exactly as it was (a rewind
// the batch asked for included). Sampling is not done here: OutputRow::token stays kNoToken.
// Thread-safety: every call from one thread (the engine thread); the forward uses the executor's
// own ThreadPool.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "backends/cpu/cpu_forward.h"
#include "backends/cpu/cpu_kv_storage.h"
#include "batching/step_plan.h"
#include "batching/table_executor.h"
#include "core/thread_pool.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "program/program_spec.h"

namespace cellm {

struct CpuExecutorOptions {
  int32_t max_sessions = 64;       // sessions open at once
  int32_t max_session_tokens = 0;  // positions one session may hold; 0 = the program's context
  // Forward threads, the caller's included; 0 = every core; at most ThreadPool::kMaxThreads.
  int32_t num_threads = 0;
  // Test hook (fault injection): called after each method call's forward with the number of
  // calls run before it; a non-OK Status fails that call as if its forward had failed.
  std::function<Status(int64_t call_index)> after_call_for_test;
};

// What the executor has run since it was built (the method calls of the plans).
struct CpuExecutorStats {
  int64_t num_steps = 0;          // execute() calls that succeeded
  int64_t num_prefill_calls = 0;  // prefill method calls
  int64_t num_decode_calls = 0;   // decode method calls
  int64_t num_tokens = 0;         // real tokens run
  int64_t num_padding_rows = 0;   // decode rows padded up to a static width (skipped on CPU)
};

class CpuExecutor final : public TableExecutor {
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
  StatusOr<BatchOutput> execute(const BatchInput& batch, bool return_logits) override;

  const ProgramSpec& spec() const { return spec_; }
  // Bytes of K/V storage allocated now (grows with the cache's high water).
  uint64_t kv_storage_bytes() const;
  const CpuExecutorStats& stats() const { return stats_; }

 private:
  // One call of the plan: place its real tokens in the cache, grow the storage, run the forward
  // into the call's rows of `logits` ([outputs, vocab] f32; null: no logits). Padding rows of a
  // decode call are skipped.
  Status run_call(const PackedStep& step, const SliceCall& call, float* logits);

  ModelConfig config_;
  ModelWeights weights_;
  ProgramSpec spec_;
  CpuExecutorOptions options_;
  bool initialized_ = false;

  // Built by initialize() (with the cache and the session table, TableExecutor's).
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<CpuKvStorage> kv_;
  std::unique_ptr<CpuForward> forward_;
  CellStep cell_step_;         // reused by every call (its vectors keep their capacity)
  std::vector<float> logits_;  // [outputs of the last step, vocab] f32: BatchOutput::logits
  CpuExecutorStats stats_;
  int64_t num_calls_ = 0;  // method calls run, failed ones included (after_call_for_test)
};

}  // namespace cellm
