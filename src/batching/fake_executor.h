// FakeExecutor: a deterministic Executor for the runtime's unit tests — the real SessionTable,
// CellCache and plan_slices with a toy "model" whose logits are a hash of the session's context.
//
// fake_logits(context) is the whole model: row v is a pseudo-random value of (hash of every
// token at positions [0, p], v), so the next token depends on the entire context and any lost,
// duplicated or reordered token changes what follows. Like a real backend it stores what a token
// leaves behind per cell (its id, where a real one keeps K/V) and reads a session's context
// through the session's cell list, so a cache or rollback bug changes the logits. Tests compute
// expected outputs with fake_greedy() directly, independently of the Runner. Like every executor
// it returns logits as a view into its own buffer, valid until its next execute(). Hooks inject
// failures and let a test act while a step is running; every step checks the cache's invariants.
// Test code only (compiled into test binaries). Thread-safety: Executor methods on the engine
// thread; the counters and hooks setters may be used from the test thread (mutex).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <span>
#include <tuple>
#include <vector>

#include "batching/table_executor.h"

namespace cellm::testing {

struct FakeExecutorConfig {
  int32_t max_step_tokens = 64;  // W
  int32_t min_prefill_chunk = 4;
  std::vector<int32_t> decode_widths = {1};
  int32_t max_cells = 4096;
  int32_t max_sessions = 64;
  int32_t max_session_tokens = 1024;
  int32_t vocab_size = 32;
  // Fill OutputRow::greedy_token with each row's argmax, as the CUDA executor's device argmax does.
  bool greedy_tokens = false;
  // Return rows of NaN instead of the toy model's logits (greedy_token stays right): only a
  // caller that reads the rows fails on them.
  bool nan_logits = false;
  // Rows of NaN and no greedy token (kNoToken), as the CUDA executor reports a row with nothing
  // finite.
  bool no_finite_logits = false;
  // Fill OutputRow::logprobs where an input asks (summarize_logprobs of the row), as the CUDA
  // executor does on the device.
  bool logprobs = false;
  // Fill OutputRow::candidates where an input asks (sampling_candidates of the row), as the CUDA
  // executor does on the device, and draw from them where the input asks
  // (StepInput::candidates_draw: RowCandidates::drawn, listed in Counts::draws).
  bool candidates = false;
  // With candidates: draw where the list leaves the draw undecided from the whole row with the
  // sampler's sample() (RowCandidates::drawn_from_row, listed in Counts::draws too), as the CUDA
  // executor does on the device (Executor::draws_rows()).
  bool draws_rows = false;
  // With draws_rows: rewrite a candidates row first where its input asks (StepInput::rewrite), in
  // place as the CUDA executor does (Executor::rewrites_rows(); Counts::num_rewritten_rows).
  bool rewrites_rows = false;
  // Keep a step's rows for fetch_logits() when the batch asks (BatchInput::keep_logits), as the
  // CUDA executor keeps them on the device.
  bool fetches_logits = false;
  // With fetches_logits: fetch_logits() fails (nothing else does).
  bool fail_fetches = false;
};

// The toy model's logits for the token after `context` ([vocab], in [0, 1)).
std::vector<float> fake_logits(std::span<const int32_t> context, int32_t vocab_size);
// Greedy continuation of `context` by the toy model: n tokens.
std::vector<int32_t> fake_greedy(std::vector<int32_t> context, int32_t n, int32_t vocab_size);

class FakeExecutor : public TableExecutor {
 public:
  explicit FakeExecutor(const FakeExecutorConfig& config);

  Status initialize() override { return ok_status(); }
  ExecutorLimits limits() const override;
  StatusOr<BatchOutput> execute(const BatchInput& batch, bool return_logits) override;
  bool computes_greedy_tokens() const override { return config_.greedy_tokens; }
  bool computes_logprobs() const override { return config_.logprobs; }
  bool computes_candidates() const override { return config_.candidates; }
  bool draws_rows() const override { return config_.candidates && config_.draws_rows; }
  bool rewrites_rows() const override { return draws_rows() && config_.rewrites_rows; }
  bool fetches_logits() const override { return config_.fetches_logits; }
  // The kept rows asked for, the others NaN.
  StatusOr<std::span<const float>> fetch_logits(std::span<const int32_t> rows) override;
  // The session verbs are TableExecutor's, counted here.
  std::optional<SessionId> open_session() override;
  Status close_session(SessionId id) override;
  StatusOr<SessionId> clone_session(SessionId src, int32_t upto) override;

  // ---- Test controls (any thread) ----
  // Called at the start of every execute(); a non-OK result fails that step (nothing changes).
  void set_fail_hook(std::function<Status(const BatchInput&)> hook);
  // Called in the middle of every execute(), after the step is placed, before logits.
  void set_during_execute(std::function<void()> hook);

  struct Counts {
    int64_t num_executes = 0;
    int64_t num_logits_steps = 0;    // executes asked for logits (return_logits)
    int64_t num_kept_steps = 0;      // executes that kept their rows for fetch_logits()
    int64_t num_kept_rows = 0;       // the rows those kept
    int64_t num_fetched_rows = 0;    // rows fetch_logits() returned
    int64_t num_rewritten_rows = 0;  // rows rewritten for their sampler (rewrites_rows)
    int64_t num_tokens = 0;
    int32_t max_step_tokens_seen = 0;
    int32_t num_open = 0;                 // open now
    std::map<SessionId, int32_t> closes;  // close_session calls per id
    std::vector<SessionId> opened;        // every id handed out (open and clone)
    // Every draw made from candidates (FakeExecutorConfig::candidates) as (seed, position,
    // token), kNoToken where the list did not decide.
    std::vector<std::tuple<uint64_t, int64_t, int32_t>> draws;
  };
  Counts counts() const;

 private:
  // The context of the token at `token_index` of `step`: its session's tokens [0, its position].
  std::vector<int32_t> context_of(const PackedStep& step, int32_t token_index) const;

  FakeExecutorConfig config_;
  std::vector<int32_t> cell_tokens_;  // [max_cells] the token last written to each cell
  std::vector<float> logits_;         // [outputs of the last step, vocab]: BatchOutput::logits
  std::vector<float> kept_;           // [outputs of the last step, vocab]: what fetch_logits reads
  bool kept_valid_ = false;           // the last execute() succeeded and kept its rows

  mutable std::mutex mutex_;  // guards the hooks and counts_
  std::function<Status(const BatchInput&)> fail_hook_;
  std::function<void()> during_execute_;
  Counts counts_;
};

}  // namespace cellm::testing
