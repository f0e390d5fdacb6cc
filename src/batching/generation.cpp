#include "batching/generation.h"

#include "core/check.h"
#include "core/logging.h"

namespace cellm {
namespace internal {

void GenerationState::record(std::span<const int32_t> new_tokens, std::string_view new_text,
                             const GenerationMetrics& now) {
  std::lock_guard<std::mutex> lock(mutex);
  tokens.insert(tokens.end(), new_tokens.begin(), new_tokens.end());
  text.append(new_text);
  metrics = now;
}

void GenerationState::mark_done(FinishReason finish_reason, std::string_view finish_error,
                                const GenerationMetrics& final) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    CELLM_CHECK(!done) << "a generation finished twice";
    done = true;
    reason = finish_reason;
    error = std::string(finish_error);
    metrics = final;
  }
  done_cv.notify_all();
}

void finish_without_engine(GenerationState& state, const GenerationCallback& callback,
                           FinishReason reason, std::string_view error) {
  GenerationMetrics metrics;
  {
    std::lock_guard<std::mutex> lock(state.mutex);
    metrics = state.metrics;
  }
  metrics.end_us = metrics.submit_us;
  if (callback) {
    GenerationUpdate update;
    update.finished = true;
    update.finish_reason = reason;
    update.error = error;
    try {
      callback(update);
    } catch (const std::exception& e) {
      CELLM_LOG(kWarn) << "a generation callback threw on its final update: " << e.what();
    } catch (...) {
      CELLM_LOG(kWarn) << "a generation callback threw on its final update";
    }
  }
  state.mark_done(reason, error, metrics);
}

}  // namespace internal

void GenerationHandle::cancel() const {
  CELLM_CHECK(valid()) << "cancel() on an empty GenerationHandle";
  state_->cancel_requested.store(true, std::memory_order_release);
  if (state_->wake_engine) state_->wake_engine();
}

bool GenerationHandle::done() const {
  CELLM_CHECK(valid()) << "done() on an empty GenerationHandle";
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->done;
}

void GenerationHandle::wait() const {
  CELLM_CHECK(valid()) << "wait() on an empty GenerationHandle";
  std::unique_lock<std::mutex> lock(state_->mutex);
  state_->done_cv.wait(lock, [&] { return state_->done; });
}

bool GenerationHandle::wait_for(std::chrono::milliseconds timeout) const {
  CELLM_CHECK(valid()) << "wait_for() on an empty GenerationHandle";
  std::unique_lock<std::mutex> lock(state_->mutex);
  return state_->done_cv.wait_for(lock, timeout, [&] { return state_->done; });
}

FinishReason GenerationHandle::finish_reason() const {
  CELLM_CHECK(valid()) << "finish_reason() on an empty GenerationHandle";
  std::lock_guard<std::mutex> lock(state_->mutex);
  CELLM_CHECK(state_->done) << "finish_reason() before the generation is done";
  return state_->reason;
}

std::string GenerationHandle::error_message() const {
  CELLM_CHECK(valid()) << "error_message() on an empty GenerationHandle";
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->error;
}

GenerationMetrics GenerationHandle::metrics() const {
  CELLM_CHECK(valid()) << "metrics() on an empty GenerationHandle";
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->metrics;
}

std::vector<int32_t> GenerationHandle::tokens() const {
  CELLM_CHECK(valid()) << "tokens() on an empty GenerationHandle";
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->tokens;
}

std::string GenerationHandle::text() const {
  CELLM_CHECK(valid()) << "text() on an empty GenerationHandle";
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->text;
}

}  // namespace cellm
