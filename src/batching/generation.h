// GenerationHandle: the caller's side of one generation (cancel, done, wait, finish reason,
// error message, metrics, what was delivered), and GenerationUpdate, what its callback receives.
//
// The Runner's engine thread calls the generation's callback with updates in order: each holds
// the tokens delivered by one step (usually one) and their text; the last one has `finished`
// set and carries the finish reason, exactly once, together with the last tokens. A token that
// reached the callback is part of the session's context (the pending-token rule, DESIGN §5).
// GenerationState is the shared record behind a handle; only the runtime writes it.
// Thread-safety: every GenerationHandle method may be called from any thread, including from
// inside a callback (wait() there would deadlock: callbacks must not block).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "batching/gen_config.h"
#include "batching/metrics.h"
#include "batching/token_logprobs.h"

namespace cellm {

struct GenerationUpdate {
  std::span<const int32_t> tokens;  // tokens delivered by this update (may be empty)
  // One per token when the generation asked for them (SamplingParams::logprobs >= 0), else empty.
  std::span<const TokenLogprobs> logprobs;
  // With the generation's first update, when it asked for them (SamplingParams::prompt_logprobs
  // >= 0): one per prompt token, in order, but for a token at the session's position 0 (nothing
  // predicts it). Else empty.
  std::span<const TokenLogprobs> prompt_logprobs;
  std::string_view text;  // text shown by it (empty without a TextStreamFactory)
  bool finished = false;
  FinishReason finish_reason = FinishReason::kFailed;  // meaningful when finished
  std::string_view error;  // why, when finished as kFailed (or kCancelled by a shutdown/close)
};

// Runs on the engine thread; must not block. An exception it throws is caught there and ends the
// generation as kFailed (the engine keeps serving the others).
using GenerationCallback = std::function<void(const GenerationUpdate&)>;

namespace internal {

// Shared by a GenerationHandle and the engine.
struct GenerationState {
  std::atomic<bool> cancel_requested{false};
  std::function<void()> wake_engine;  // set before the handle is shared; may be empty

  mutable std::mutex mutex;
  std::condition_variable done_cv;
  bool done = false;  // guarded by mutex (and every field below)
  FinishReason reason = FinishReason::kFailed;
  std::string error;
  GenerationMetrics metrics;
  std::vector<int32_t> tokens;  // [delivered]
  std::string text;             // delivered text

  // The engine's writes.
  void record(std::span<const int32_t> new_tokens, std::string_view new_text,
              const GenerationMetrics& now);
  void mark_done(FinishReason reason, std::string_view error, const GenerationMetrics& final);
};

// Delivers a final update to `callback` on this thread and marks `state` done: for a generation
// that never reached the engine (refused before it, or after shutdown). Exceptions are swallowed.
void finish_without_engine(GenerationState& state, const GenerationCallback& callback,
                           FinishReason reason, std::string_view error);

}  // namespace internal

class GenerationHandle {
 public:
  GenerationHandle() = default;  // not valid: every query CELLM_CHECKs valid()
  explicit GenerationHandle(std::shared_ptr<internal::GenerationState> state)
      : state_(std::move(state)) {}

  bool valid() const { return state_ != nullptr; }
  // Asks the engine to end the generation (kCancelled) at its next step; tokens delivered so far
  // stay in the session's context, a token sampled but not yet delivered is dropped. No effect
  // once done.
  void cancel() const;
  bool done() const;
  void wait() const;
  // True when done within `timeout`.
  bool wait_for(std::chrono::milliseconds timeout) const;

  // Valid once done (CELLM_CHECK).
  FinishReason finish_reason() const;
  std::string error_message() const;  // empty unless kFailed or a cancel with a cause
  // Complete once done; a snapshot while running.
  GenerationMetrics metrics() const;
  std::vector<int32_t> tokens() const;  // delivered so far
  std::string text() const;             // shown so far

 private:
  std::shared_ptr<internal::GenerationState> state_;
};

}  // namespace cellm
