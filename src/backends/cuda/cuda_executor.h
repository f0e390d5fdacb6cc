// CudaExecutor: the Executor (batching/executor.h) of the CUDA backend — the same steps as
// CpuExecutor (cpu_executor.h), run on one GPU.
//
// Sessions and the step transaction are TableExecutor's (table_executor.h), and the program's
// checks and limits executor_setup's (backends/cpu/executor_setup.h), so a program and a batch
// mean exactly what they mean on the CPU. One step: SessionTable::pack validates the batch (a
// refused batch changes nothing), then plan_slices cuts it into method calls exactly as on the
// CPU. Each call places its tokens in the CellCache (place_call), grows the KvPool to the
// cache's high water (row 0 is the scratch row of padding tokens, cell c is row c + 1), uploads
// the placement with one copy (CudaCellCache), and runs the forward: a `decode` call replays the
// CUDA graph captured at initialize() for its static width (padding rows write the scratch row
// and are dropped) and context bound (CudaForward::static_context_bound: with long sessions
// allowed, a second set of graphs serves steps whose sequences are short); a `prefill` call runs
// eagerly at its exact width in [m, W]. The kept rows'
// logits are copied into pinned host memory, which BatchOutput::logits views (no further copy;
// valid until the next execute()). Every call of a step is enqueued on one stream and the step
// synchronizes once at the end; a failure anywhere rolls the whole step back (abort_step), so
// every session is as it was. Sampling is not done here: OutputRow::token stays kNoToken (with
// options.device_argmax, OutputRow::greedy_token is each row's argmax, computed on the device).
// Weights are uploaded once (or handed over already on the device) and shared by both methods.
// Thread-safety: every call from one thread (the engine's).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <utility>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_cell_cache.h"
#include "backends/cuda/cuda_forward.h"
#include "backends/cuda/cuda_weights.h"
#include "backends/cuda/device_memory.h"
#include "backends/cuda/kv_pool.h"
#include "batching/step_plan.h"
#include "batching/table_executor.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "program/program_spec.h"

namespace cellm {

// What the executor has run since it was built.
struct CudaExecutorStats {
  int64_t num_steps = 0;           // execute() calls that succeeded
  int64_t num_prefill_calls = 0;   // prefill method calls (eager)
  int64_t num_decode_calls = 0;    // decode method calls
  int64_t num_graph_launches = 0;  // decode calls replayed from a captured graph
  int64_t num_tokens = 0;          // real tokens run
  int64_t num_padding_rows = 0;    // decode rows padded up to a static width
  // With CudaExecutorOptions::time_steps, the last step's device time: from its first upload to
  // the end of its last copy to the host (the host's preparation before, and its wait after, not
  // counted). 0 without.
  double last_step_device_ms = 0.0;
};

class CudaExecutor final : public TableExecutor {
 public:
  // Uploads `weights` at initialize() (their GgufFile must stay alive until then).
  CudaExecutor(const ModelConfig& config, const ModelWeights& weights, const ProgramSpec& spec,
               const CudaExecutorOptions& options = {});
  // Runs over weights already on the device (random geometries for benchmarks); `weights` must
  // match `config` and may be shared by several executors.
  CudaExecutor(const ModelConfig& config, std::shared_ptr<const CudaWeights> weights,
               const ProgramSpec& spec, const CudaExecutorOptions& options = {});
  ~CudaExecutor() override;

  // Validates the program against the model and the options, uploads the weights, creates the
  // pool, the step buffers, the forward and the stream, and captures one decode graph per width.
  Status initialize() override;
  ExecutorLimits limits() const override;

  // With return_logits, BatchOutput::logits views the kept rows ([outputs, vocab], f32) in
  // pinned host memory, valid until the next execute(); so does last_logits(). With
  // options.device_argmax, OutputRow::greedy_token is each row's argmax, and a step that asks for
  // no logits copies none (unless set_copy_logits(true)); without it, rows are always copied.
  StatusOr<BatchOutput> execute(const BatchInput& batch, bool return_logits) override;
  bool computes_greedy_tokens() const override { return options_.device_argmax; }

  // The kept rows' logits of the last successful execute(), [outputs, vocab] f32 in pinned host
  // memory; valid until the next execute().
  std::span<const float> last_logits() const { return last_logits_; }

  const ProgramSpec& spec() const { return spec_; }
  const CudaExecutorStats& stats() const { return stats_; }
  KvPoolMetrics kv_metrics() const;
  const CudaWeights& weights() const { return *weights_; }
  // Waits for every call enqueued so far (benchmarks time around it).
  Status synchronize();
  // The stream every call runs on (benchmarks record events on it).
  cudaStream_t stream() const { return stream_.get(); }
  // With options.device_argmax: whether steps that do not return logits still copy them to
  // pinned memory (last_logits()); false by default. Without device_argmax, always copied.
  void set_copy_logits(bool copy) { copy_logits_ = copy; }
  // Decode calls replay their graphs (true, the default when options.use_graphs) or run the
  // same kernels eagerly (false). Turning graphs on needs options.use_graphs at initialize().
  Status set_use_graphs(bool use_graphs);

 private:
  // The CUDA-only checks on top of executor_setup's: the pool's row count fits.
  Status validate();
  Status capture_graphs();
  // One call of the plan: declare + place its real tokens, grow the pool, upload, run the
  // forward (graph or eager), copy the kept rows' logits to pinned memory at `first_kept`.
  Status run_call(const PackedStep& step, const SliceCall& call, bool copy_logits);

  ModelConfig config_;
  const ModelWeights* host_weights_ = nullptr;  // until initialize() uploads them
  std::shared_ptr<const CudaWeights> weights_;
  ProgramSpec spec_;
  CudaExecutorOptions options_;
  bool initialized_ = false;
  bool replay_graphs_ = false;  // decode calls launch graphs_ (else the forward, eagerly)
  bool copy_logits_ = false;    // see set_copy_logits

  // Built by initialize() (with the cache and the session table, TableExecutor's).
  CudaStream stream_;
  cublasHandle_t cublas_ = nullptr;
  DeviceBuffer cublas_workspace_;
  std::unique_ptr<KvPool> pool_;
  std::unique_ptr<CudaCellCache> steps_;
  std::unique_ptr<CudaForward> forward_;
  // Instantiated decode graphs by (width, context bound): CudaForward::static_context_bound's
  // values, one or two per width.
  std::map<std::pair<int32_t, int32_t>, cudaGraphExec_t> graphs_;
  PinnedBuffer host_logits_;  // [outputs of a step, vocab] f32; grown with the widest step
  PinnedBuffer host_tokens_;  // [outputs of a step] int32: device argmax (options.device_argmax)
  std::span<const float> last_logits_;
  CellStep cell_step_;    // reused by every call
  CudaEvent step_begin_;  // options.time_steps: before the first call's upload
  CudaEvent step_end_;    // after the last call's copies
  CudaExecutorStats stats_;
};

}  // namespace cellm
