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
// every session is as it was. A one-session greedy step may run the session's next step ahead
// (options.run_ahead, cuda_executor_ahead.cpp): enqueued before this one is waited for, taken by
// the execute() that asks for it, given back by any other call. Sampling is not done here:
// OutputRow::token stays kNoToken (with options.device_argmax, OutputRow::greedy_token is each
// row's argmax, computed on the device). Weights are uploaded once (or handed over already on the
// device) and shared by both methods. Thread-safety: every call from one thread (the engine's).
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
#include "backends/cuda/kernels/row_candidates.cuh"
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
  // counted). 0 without, and for a step run ahead (its device work began before it was asked).
  double last_step_device_ms = 0.0;
  int64_t num_steps_run_ahead = 0;      // steps execute() found already run (options.run_ahead)
  int64_t num_steps_ahead_dropped = 0;  // steps run ahead that no execute() asked for
  int64_t num_fetched_rows = 0;         // rows fetch_logits() copied to the host
};

// Device memory a CudaExecutor of this model and program needs beside its weights: its KV pool at
// the largest kv_max_cells allows, and a reserve for its scratch, graphs and cuBLAS (a tenth of
// the device's memory, at least 2 GiB). Resident bf16 copies are kept where they leave this much
// free (CudaExecutorOptions::resident_bf16_if_room).
StatusOr<uint64_t> cuda_executor_room(const ModelConfig& config, const ProgramSpec& spec,
                                      int device);

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
  // Rows whose input asks (StepInput::num_top_logprobs >= 0) are summarized on the device
  // (kernels/row_logprobs.cuh) into OutputRow::logprobs, and rows asking for sampling candidates
  // (StepInput::candidates_temperature > 0) listed there (kernels/row_candidates.cuh) into
  // OutputRow::candidates; only the summaries and the lists are copied. A batch that asks to
  // keep its rows (BatchInput::keep_logits) and copies none leaves them on the device: the last
  // call's in the forward's logits buffer, earlier calls' copied beside it (kept_logits_).
  StatusOr<BatchOutput> execute(const BatchInput& batch, bool return_logits) override;
  bool computes_greedy_tokens() const override { return options_.device_argmax; }
  bool computes_logprobs() const override { return true; }
  bool computes_candidates() const override { return true; }
  // With options.row_draws, for vocabularies the cluster holds (kernels/row_draw.cuh).
  bool draws_rows() const override;
  // With options.row_rewrites and draws_rows() (kernels/row_rewrite.cuh).
  bool rewrites_rows() const override { return options_.row_rewrites && draws_rows(); }
  bool fetches_logits() const override { return true; }
  // The rows asked for, copied into the pinned rows of host_logits_ (runs of rows adjacent on
  // the device in one copy); every row when the step copied them all anyway.
  StatusOr<std::span<const float>> fetch_logits(std::span<const int32_t> rows) override;

  // TableExecutor's session verbs, each dropping a step run ahead first (options.run_ahead);
  // cache_usage() and session_length() answer as if it were dropped, without dropping it.
  CacheUsage cache_usage() const override;
  std::optional<SessionId> open_session() override;
  Status close_session(SessionId id) override;
  StatusOr<SessionId> clone_session(SessionId src, int32_t upto) override;
  StatusOr<int32_t> session_length(SessionId id) const override;
  Status rewind_session(SessionId id, int32_t pos) override;

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
  // What a step's kept rows ask of the device beyond their logits and argmax.
  struct RowAsks {
    bool logprobs = false;    // summaries (prepare_logprobs uploaded the asks)
    bool candidates = false;  // sampling candidates (prepare_candidates uploaded the asks)
    bool rewrites = false;    // rows rewritten before their candidates (prepare_rewrites)
    bool keep = false;        // their logits stay on the device for fetch_logits()
  };
  // Where a call run ahead puts what the step's own buffers would receive (null: those buffers).
  struct CallTargets {
    int32_t* host_tokens = nullptr;  // pinned: the kept rows' argmax (host_tokens_)
    // Device: the call's tokens are copied from there after the upload (a step run ahead reads
    // the token the step before computed: its argmax, or its draw).
    const int32_t* token_source = nullptr;
    kernels::RowCandidatesSummary* host_lists = nullptr;  // pinned (host_candidate_rows_)
    bool timed = true;  // the step's first call records step_begin_ (options.time_steps)
  };
  // One call of the plan: declare + place its real tokens, grow the pool, upload, run the
  // forward (graph or eager), copy the kept rows' logits to pinned memory at `first_kept` and,
  // with device_argmax, their argmax tokens to host_tokens_. With `asks.logprobs`, the kept rows
  // that ask are summarized for log-probabilities and the summaries copied to host_logprob_rows_;
  // with `asks.candidates`, the same for sampling candidates into host_candidate_rows_; with
  // `asks.keep`, where each kept row's logits stay on the device into kept_rows_ (a call before
  // the step's last copies them into kept_logits_).
  Status run_call(const PackedStep& step, const SliceCall& call, bool copy_logits, RowAsks asks,
                  const CallTargets& targets);
  // Log-probability summaries (cuda_executor_logprobs.cpp). Whether any output row of the step
  // asks; if so, grows the buffers and enqueues the upload of every row's ask.
  StatusOr<bool> prepare_logprobs(const BatchInput& batch, const BatchOutput& output);
  // Enqueues the summaries of the call's kept rows [first_kept, first_kept + num_kept) from the
  // forward's logits, and their copy to host_logprob_rows_.
  Status summarize_rows(int32_t first_kept, int32_t num_kept);
  // After the step synchronized: OutputRow::logprobs of every row that asked.
  void take_logprobs(const BatchInput& batch, BatchOutput& output) const;
  // Sampling candidates (cuda_executor_candidates.cpp), the same three steps.
  StatusOr<bool> prepare_candidates(const BatchInput& batch, const BatchOutput& output);
  Status list_candidates(int32_t first_kept, int32_t num_kept,
                         kernels::RowCandidatesSummary* host_lists);
  void take_candidates(const BatchInput& batch, BatchOutput& output) const;
  // Rewrites (cuda_executor_rewrite.cpp): whether any candidates row of the step asks to be
  // rewritten (StepInput::rewrite); if so, flattens them into entries and enqueues their upload.
  // An error when a row asks and this executor does not rewrite rows.
  StatusOr<bool> prepare_rewrites(const BatchInput& batch, const BatchOutput& output);
  // Enqueues the rewrite of the call's kept rows [first_kept, first_kept + num_kept) in the
  // forward's logits (before their candidates are listed).
  Status rewrite_rows(int32_t first_kept, int32_t num_kept);

  // What a one-session step asks of its row beyond the argmax: sampling candidates at a
  // temperature (> 0) and the token drawn from them (the draw's position that of the token).
  struct TailAsk {
    float temperature = 0.0f;
    CandidatesDraw draw;
    friend bool operator==(const TailAsk&, const TailAsk&) = default;
  };
  // Run ahead (cuda_executor_ahead.cpp). Whether `batch` is one session's one-token step whose
  // token is the one the previous one-session step computed at the position after it (its argmax,
  // or its draw from its candidates), asking what that step asked of the step after it, for no
  // logits and no rows kept, with running ahead possible.
  bool follows_tail(const BatchInput& batch, bool return_logits) const;
  // What `batch`'s one input asks of its row (follows_tail's).
  static TailAsk ask_of(const BatchInput& batch);
  // What the step after one that asked `ask` asks: the same, its draw one position further.
  static TailAsk next_ask(TailAsk ask);
  // Packs, places and enqueues the one-token step of `session` at `position` asking `ask`, its
  // token the one the stream computes last (the argmax, or with a temperature the draw); a
  // refusal (pool, context, anything) just runs nothing ahead.
  void run_ahead(SessionId session, int32_t position, const TailAsk& ask);
  // Gives back a step run ahead that nobody asked for (its cell freed, the session as before).
  void drop_ahead();
  // execute() of the step run ahead: waits for it and returns its output (and runs the next).
  StatusOr<BatchOutput> take_ahead();
  // Remembers the token a one-session step computed for its session's next step — its argmax, or
  // its draw from its candidates — and what that step will ask (or forgets, for any other step).
  void note_tail(const BatchInput& batch, const BatchOutput& output);
  // OutputRow::candidates of one listed row.
  static RowCandidates candidates_of(const kernels::RowCandidatesSummary& summary);
  // A row's ask as the candidates kernel reads it: the temperature (0: none) and the draw.
  static kernels::RowCandidatesAsk row_ask(float temperature, const CandidatesDraw& draw);
  // A successful step of these calls in stats_.
  void count_step(const std::vector<SliceCall>& calls);

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
  // Log-probability summaries, grown with the step asking for the most rows: each output row's
  // ask ([2, outputs] int32: num_top, then the scored token) and its summary
  // ([outputs] kernels::RowLogprobsSummary), on the host (pinned) and on the device.
  PinnedBuffer host_logprob_asks_;
  PinnedBuffer host_logprob_rows_;
  DeviceBuffer logprob_asks_;
  DeviceBuffer logprob_rows_;
  DeviceBuffer logprob_scratch_;  // the kernel's split partials; zeroed when (re)allocated
  int32_t logprob_stride_ = 0;    // outputs of the step: where the scored tokens start in the asks
  // Sampling candidates, grown likewise: each output row's temperature ([outputs] f32, 0: none)
  // and its list ([outputs] kernels::RowCandidatesSummary), pinned and on the device.
  PinnedBuffer host_candidate_asks_;
  PinnedBuffer host_candidate_rows_;
  DeviceBuffer candidate_asks_;
  DeviceBuffer candidate_rows_;
  DeviceBuffer candidate_scratch_;  // the kernel's split partials; zeroed when (re)allocated
  // Row rewrites of the last prepared step, grown likewise: the kernel's entries, then the
  // biases (f32), then each rewritten row's PenaltyParams, one upload (pinned, then device).
  PinnedBuffer host_rewrites_;
  DeviceBuffer rewrites_;
  std::vector<int32_t> rewrite_begin_;   // [outputs + 1]: each output row's first entry
  size_t rewrite_biases_offset_ = 0;     // bytes into the buffers
  size_t rewrite_penalties_offset_ = 0;  // bytes into the buffers
  std::span<const float> last_logits_;
  // Rows kept on the device for fetch_logits() (BatchInput::keep_logits): those of a step's
  // calls before its last ([outputs of a step, vocab] f32, grown with the widest such step), and
  // where each output row of the last step that kept them is ([outputs], device pointers).
  DeviceBuffer kept_logits_;
  std::vector<const float*> kept_rows_;
  bool kept_valid_ = false;  // the last execute() succeeded and kept its rows (or copied them)
  CellStep cell_step_;       // reused by every call
  CudaEvent step_begin_;     // options.time_steps: before the first call's upload
  CudaEvent step_end_;       // after the last call's copies
  CudaEvent step_done_;      // after a step's own calls: what execute() waits for
  CudaExecutorStats stats_;

  // A one-token greedy decode step enqueued before anyone asked for it (options.run_ahead).
  struct AheadStep {
    SessionId session = 0;
    int32_t position = 0;  // its token's position: the session's length without it
    TailAsk ask;           // what it asks of its row
    PackedStep step;       // packed and placed; dropped by abort_step()
    SliceCall call;        // its one decode call
    int slot = 0;          // which ahead_slots_ entry receives its token and marks its end
    CacheUsage usage;      // the pool before it was placed: what cache_usage() reports
  };
  struct AheadSlot {
    PinnedBuffer token;  // [1] int32: the step's argmax
    PinnedBuffer ask;    // [1] kernels::RowCandidatesAsk: its candidates' ask, uploaded
    PinnedBuffer lists;  // [1] kernels::RowCandidatesSummary: its candidates and draw
    CudaEvent done;      // after its copies
  };
  // The token the last one-session step computed for its session's next step, the position the
  // token takes when fed back, and what that next step asks.
  struct Tail {
    SessionId session = 0;
    int32_t position = -1;
    int32_t token = -1;
    TailAsk ask;
  };
  std::optional<AheadStep> ahead_;
  AheadSlot ahead_slots_[2];
  int next_ahead_slot_ = 0;
  Tail tail_;
  int32_t ahead_payload_ = 0;  // the placeholder token packed for a step run ahead
};

}  // namespace cellm
