#include "batching/runner.h"

#include "batching/engine.h"
#include "core/check.h"

namespace cellm {

using internal::Command;
using internal::Engine;
using internal::SessionShared;

// ---- Session ----

Session& Session::operator=(Session&& other) noexcept {
  if (this != &other) {
    close();
    shared_ = std::move(other.shared_);
    engine_ = std::move(other.engine_);
  }
  return *this;
}

Session::~Session() { close(); }

int32_t Session::position() const {
  CELLM_CHECK(valid()) << "position() of a Session that is not valid";
  return shared_->position.load(std::memory_order_relaxed);
}

Status Session::status() const {
  if (!valid()) return failed_precondition("the Session is empty (moved from or closed)");
  std::lock_guard<std::mutex> lock(shared_->mutex);
  return shared_->status;
}

GenerationHandle Session::generate_async(std::vector<int32_t> prompt_delta, GenConfig config,
                                         GenerationCallback callback) {
  auto state = std::make_shared<internal::GenerationState>();
  const std::shared_ptr<Engine> engine = engine_.lock();
  state->metrics.num_prompt_tokens = static_cast<int32_t>(prompt_delta.size());
  if (engine) {
    state->metrics.submit_us = engine->now_us();
    state->wake_engine = [weak = engine_] {
      if (const std::shared_ptr<Engine> e = weak.lock()) e->wake();
    };
  }
  if (!valid() || !engine) {
    internal::finish_without_engine(
        *state, callback, FinishReason::kFailed,
        valid() ? "the runner is gone" : "the Session is empty (moved from or closed)");
    return GenerationHandle(state);
  }
  Command command;
  command.kind = Command::Kind::kStart;
  command.session = shared_;
  command.start = std::make_unique<internal::StartRequest>(internal::StartRequest{
      state, std::move(prompt_delta), std::move(config), std::move(callback)});
  if (!engine->push(command)) {
    internal::finish_without_engine(*state, command.start->callback, FinishReason::kCancelled,
                                    "the runner shut down");
  }
  return GenerationHandle(state);
}

Session Session::clone_async(int32_t upto) const {
  const std::shared_ptr<Engine> engine = engine_.lock();
  if (!valid() || !engine) {
    // A valid Session whose engine is gone: it can never be opened.
    auto shared = std::make_shared<SessionShared>(0);
    shared->set_status(failed_precondition("clone of a session whose runner is gone or empty"));
    return Session(std::move(shared), engine_);
  }
  auto shared = std::make_shared<SessionShared>(engine->new_session_key());
  Command command;
  command.kind = Command::Kind::kClone;
  command.session = shared;
  command.source_key = shared_->key;
  command.upto = upto;
  if (!engine->push(command)) shared->set_status(failed_precondition("the runner shut down"));
  return Session(std::move(shared), engine_);
}

void Session::close() {
  if (!valid()) return;
  if (const std::shared_ptr<Engine> engine = engine_.lock()) {
    Command command;
    command.kind = Command::Kind::kClose;
    command.session = shared_;
    engine->push(command);  // refused after shutdown, which closed it already
  }
  shared_.reset();
  engine_.reset();
}

// ---- Runner ----

Runner::Runner(Executor& executor, DecodeFirstScheduler scheduler, RunnerOptions options)
    : engine_(std::make_shared<Engine>(executor, std::move(scheduler), std::move(options))) {
  thread_ = std::thread([engine = engine_.get()] { engine->run(); });
}

Runner::~Runner() {
  CELLM_CHECK(!engine_->on_engine_thread()) << "a Runner destroyed on its own engine thread";
  shutdown();
}

Session Runner::open_session() {
  auto shared = std::make_shared<SessionShared>(engine_->new_session_key());
  Command command;
  command.kind = Command::Kind::kOpen;
  command.session = shared;
  if (!engine_->push(command)) shared->set_status(failed_precondition("the runner shut down"));
  return Session(std::move(shared), engine_);
}

void Runner::shutdown() {
  engine_->request_shutdown();
  if (engine_->on_engine_thread()) return;  // from a callback: the loop stops after this step
  std::lock_guard<std::mutex> lock(join_mutex_);
  if (thread_.joinable()) thread_.join();
}

EngineMetrics Runner::metrics() const { return engine_->metrics(); }

}  // namespace cellm
