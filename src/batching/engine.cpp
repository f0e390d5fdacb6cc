#include "batching/engine.h"

#include <algorithm>
#include <limits>
#include <string>

#include "core/check.h"
#include "core/logging.h"

namespace cellm::internal {

std::string session_name(uint64_t key) { return "session " + std::to_string(key); }

Engine::Engine(Executor& executor, DecodeFirstScheduler scheduler, RunnerOptions options)
    : executor_(executor),
      limits_(executor.limits()),
      options_(std::move(options)),
      token_mask_(options_.token_bytes),
      start_time_(std::chrono::steady_clock::now()),
      scheduler_(std::move(scheduler)),
      sampling_pool_(
          options_.sampling_threads > 0
              ? std::min(static_cast<size_t>(options_.sampling_threads), ThreadPool::kMaxThreads)
              : std::clamp<size_t>(std::thread::hardware_concurrency(), 1, 16)) {
  counters_.pool_max_cells = executor_.cache_usage().max_cells;
}

// ---- Any thread ----

bool Engine::push(Command& command) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return false;
    queue_.push_back(std::move(command));
  }
  cv_.notify_one();
  return true;
}

void Engine::wake() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    wake_ = true;
  }
  cv_.notify_one();
}

void Engine::request_shutdown() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_one();
}

bool Engine::on_engine_thread() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return engine_thread_ == std::this_thread::get_id();
}

int64_t Engine::now_us() const {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() -
                                                               start_time_)
      .count();
}

EngineMetrics Engine::metrics() const {
  std::lock_guard<std::mutex> lock(metrics_mutex_);
  EngineMetrics m = counters_;
  m.decode_steps = decode_steps_.summary();
  m.prompt_steps = prompt_steps_.summary();
  m.mixed_steps = mixed_steps_.summary();
  m.ttft = ttft_.summary();
  m.inter_token = inter_token_.summary();
  m.num_steps = m.decode_steps.count + m.prompt_steps.count + m.mixed_steps.count;
  m.elapsed_us = first_submit_us_ < 0 ? 0 : std::max<int64_t>(last_end_us_ - first_submit_us_, 0);
  const int64_t decode_time_us = m.decode_steps.total_us + m.mixed_steps.total_us;
  if (decode_time_us > 0) {
    m.decode_tokens_per_s =
        static_cast<double>(m.num_decode_tokens) * 1e6 / static_cast<double>(decode_time_us);
  }
  if (m.elapsed_us > 0) {
    m.generated_tokens_per_s =
        static_cast<double>(m.num_generated_tokens) * 1e6 / static_cast<double>(m.elapsed_us);
  }
  return m;
}

// ---- Engine thread ----

void Engine::run() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    engine_thread_ = std::this_thread::get_id();
  }
  for (;;) {
    std::vector<Command> commands;
    bool stopping = false;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      if (scheduler_.empty() && !has_waiting()) {
        cv_.wait(lock, [&] { return !queue_.empty() || stopping_ || wake_; });
      }
      commands.swap(queue_);
      wake_ = false;
      stopping = stopping_;
    }
    for (Command& command : commands) apply(command);
    reap_cancelled();
    if (stopping) {
      shutdown_all();
      return;
    }
    release_waiting();
    if (!scheduler_.empty()) run_step();
  }
}

void Engine::apply(Command& command) {
  switch (command.kind) {
    case Command::Kind::kOpen:
      open(command);
      return;
    case Command::Kind::kClose:
      close(command.session->key);
      return;
    case Command::Kind::kClone:
      clone(command);
      return;
    case Command::Kind::kStart:
      start(command);
      return;
  }
}

// Whether another session may open: each open one takes at most one executor session, retained
// prefixes give way to them.
Status Engine::check_room(const char* what) const {
  if (static_cast<int64_t>(sessions_.size()) < limits_.max_sessions) return ok_status();
  return resource_exhausted(std::string(what) + ": " + std::to_string(limits_.max_sessions) +
                            " sessions are open, the most the executor allows; close one first");
}

void Engine::open(Command& command) {
  const Status room = check_room("open");
  if (!room.ok()) {
    command.session->set_status(room);
    return;
  }
  EngineSession& session = sessions_[command.session->key];  // its executor session comes later
  session.shared = command.session;
  session.last_used = step_;
}

void Engine::close(uint64_t key) {
  const auto it = sessions_.find(key);
  if (it == sessions_.end()) return;  // never opened
  EngineSession& session = it->second;
  if (session.generation) {
    scheduler_.cancel(session.id);
    finish(session, FinishReason::kCancelled, "the session was closed");
  }
  if (retain(session)) {
    key_of_.erase(session.id);
  } else {
    release_executor_session(session);
  }
  session.shared->set_status(failed_precondition(session_name(key) + " is closed"));
  sessions_.erase(it);
}

void Engine::clone(Command& command) {
  const auto source = sessions_.find(command.source_key);
  const std::string what = "clone of " + session_name(command.source_key);
  if (source == sessions_.end()) {
    command.session->set_status(failed_precondition(what + ": the session is not open"));
    return;
  }
  const EngineSession& src = source->second;
  if (!src.poisoned.ok()) {
    command.session->set_status(failed_precondition(what + ": " + src.poisoned.message()));
    return;
  }
  const auto length = static_cast<int32_t>(src.tokens.size());
  if (command.upto < 0 || command.upto > length) {
    command.session->set_status(out_of_range(what + ": upto " + std::to_string(command.upto) +
                                             " outside [0, " + std::to_string(length) +
                                             "], its position"));
    return;
  }
  const Status room = check_room(what.c_str());
  if (!room.ok()) {
    command.session->set_status(room);
    return;
  }
  const int32_t shared_positions = std::min(command.upto, src.committed);
  SessionId id = kNoExecutorSession;  // sharing no cells, it opens its own when it runs
  if (shared_positions > 0) {
    StatusOr<SessionId> clone = executor_.clone_session(src.id, shared_positions);
    while (!clone.ok() && clone.status().code() == StatusCode::kResourceExhausted &&
           drop_retained()) {
      clone = executor_.clone_session(src.id, shared_positions);  // retained prefixes go first
    }
    if (!clone.ok()) {
      command.session->set_status(clone.status().with_context(what));
      return;
    }
    id = *clone;
    key_of_[id] = command.session->key;
  }
  const std::vector<int32_t> tokens(src.tokens.begin(), src.tokens.begin() + command.upto);
  EngineSession& session = sessions_[command.session->key];
  session.shared = command.session;
  session.id = id;
  session.tokens = tokens;
  session.committed = shared_positions;
  session.high_committed = shared_positions;
  session.last_used = step_;
  session.shared->position.store(command.upto, std::memory_order_relaxed);
}

Status Engine::check_start(const EngineSession& session, const StartRequest& request) const {
  const GenConfig& config = request.config;
  if (!session.poisoned.ok()) return session.poisoned;
  if (session.generation) {
    return failed_precondition("the session already has a generation running");
  }
  CELLM_RETURN_IF_ERROR(validate_gen_config(config));
  const auto in_vocab = [&](int32_t token) { return token >= 0 && token < limits_.vocab_size; };
  const std::string vocab =
      " is outside the vocabulary [0, " + std::to_string(limits_.vocab_size) + ")";
  for (size_t i = 0; i < request.prompt.size(); ++i) {
    if (!in_vocab(request.prompt[i])) {
      return invalid_argument("prompt token " + std::to_string(i) + " (" +
                              std::to_string(request.prompt[i]) + ")" + vocab);
    }
  }
  for (const int32_t token : config.stop_tokens) {
    if (!in_vocab(token)) return invalid_argument("stop token " + std::to_string(token) + vocab);
  }
  for (const LogitBias& bias : config.sampling.logit_bias) {
    if (!in_vocab(bias.token)) {
      return invalid_argument("logit_bias token " + std::to_string(bias.token) + vocab);
    }
  }
  if (!config.stop_strings.empty() && !options_.text_streams) {
    return invalid_argument("stop strings need a text stream factory (RunnerOptions)");
  }
  if (config.text_pattern != nullptr && config.constrained_to_json()) {
    return invalid_argument("a text pattern and a JSON response format exclude each other");
  }
  if (config.constrained() &&
      options_.token_bytes.size() != static_cast<size_t>(limits_.vocab_size)) {
    return invalid_argument("a constrained output format needs the bytes of each of the " +
                            std::to_string(limits_.vocab_size) +
                            " tokens (RunnerOptions::token_bytes)");
  }
  const int64_t context =
      static_cast<int64_t>(session.tokens.size()) + static_cast<int64_t>(request.prompt.size());
  if (context == 0) {
    return invalid_argument("empty prompt on an empty session: nothing to condition on");
  }
  const int64_t needed = context + config.max_new_tokens;
  const std::string need = "context of " + std::to_string(context) + " tokens + max_new_tokens " +
                           std::to_string(config.max_new_tokens) + " = " + std::to_string(needed);
  if (needed > limits_.max_session_tokens) {
    return out_of_range(need + " exceeds max_session_tokens " +
                        std::to_string(limits_.max_session_tokens));
  }
  if (needed > counters_.pool_max_cells) {
    return resource_exhausted(need + " exceeds the whole cell pool of " +
                              std::to_string(counters_.pool_max_cells) + " cells");
  }
  return ok_status();
}

void Engine::start(Command& command) {
  StartRequest& request = *command.start;
  {
    std::lock_guard<std::mutex> lock(metrics_mutex_);
    ++counters_.num_submitted;
    const int64_t submit_us = request.state->metrics.submit_us;
    if (first_submit_us_ < 0 || submit_us < first_submit_us_) first_submit_us_ = submit_us;
  }
  const auto it = sessions_.find(command.session->key);
  Status refused;
  if (it == sessions_.end()) {
    const Status status = [&] {
      std::lock_guard<std::mutex> lock(command.session->mutex);
      return command.session->status;
    }();
    refused = status.ok() ? failed_precondition(session_name(command.session->key) + " is not open")
                          : status;
  } else {
    refused = check_start(it->second, request);
  }
  if (!refused.ok()) {
    {
      std::lock_guard<std::mutex> lock(metrics_mutex_);
      ++counters_.num_refusals;
      ++counters_.num_finished[static_cast<size_t>(FinishReason::kFailed)];
      last_end_us_ = std::max(last_end_us_, now_us());
    }
    finish_without_engine(*request.state, request.callback, FinishReason::kFailed,
                          "refused: " + refused.to_string());
    return;
  }

  EngineSession& session = it->second;
  auto generation = std::make_unique<ActiveGeneration>(ActiveGeneration{
      request.state, request.config, std::move(request.callback),
      Sampler(request.config.sampling, request.config.seed, request.config.constrained()),
      StopMatcher({}, {}, nullptr), GenerationMetrics{}, LatencyStats{}, -1, -1, ++next_arrival_});
  if (request.config.constrained_to_json()) {
    generation->json.emplace(request.config.json_schema != nullptr ? request.config.json_schema
                                                                   : JsonSchema::any_object(),
                             kJsonMaxWhitespaceRun);
    generation->token_bytes = &options_.token_bytes;
    generation->token_mask = &token_mask_;
  }
  if (request.config.text_pattern != nullptr) {
    generation->text.emplace(request.config.text_pattern);
    generation->token_bytes = &options_.token_bytes;
    generation->token_mask = &token_mask_;
  }
  std::vector<int32_t> stop_tokens = request.config.stop_tokens;
  if (request.config.use_default_stop_tokens) {
    stop_tokens.insert(stop_tokens.end(), options_.default_stop_tokens.begin(),
                       options_.default_stop_tokens.end());
  }
  session.tokens.insert(session.tokens.end(), request.prompt.begin(), request.prompt.end());
  std::unique_ptr<TextStream> text;
  if (options_.text_streams) text = options_.text_streams(session.tokens);
  if (request.config.min_new_tokens > 0) {  // stop tokens banned until then (deliver lifts it)
    SamplingParams early = request.config.sampling;
    for (const int32_t t : stop_tokens) {
      early.logit_bias.push_back({t, -std::numeric_limits<float>::infinity()});
    }
    generation->sampler = Sampler(early, request.config.seed, request.config.constrained());
  }
  generation->stop_tokens = stop_tokens;  // a text pattern's mask allows them where it may end
  generation->stops = StopMatcher(std::move(stop_tokens), request.config.stop_strings,
                                  std::move(text), request.config.min_new_tokens);
  {
    std::lock_guard<std::mutex> lock(request.state->mutex);
    generation->metrics = request.state->metrics;  // submit time, prompt size
  }
  session.shared->position.store(static_cast<int32_t>(session.tokens.size()),
                                 std::memory_order_relaxed);
  const auto prompt_end = static_cast<int32_t>(session.tokens.size());
  generation->prompt_end = prompt_end;
  generation->next_prompt_logprob =
      std::max(prompt_end - static_cast<int32_t>(request.prompt.size()), 1);
  session.generation = std::move(generation);
  session.last_used = step_;

  const auto context = static_cast<int32_t>(session.tokens.size());
  if (session.committed == context) {
    // Nothing pending: with no token wanted there is nothing to run; otherwise run the last
    // position again to get its logits.
    if (request.config.max_new_tokens == 0) {
      finish(session, FinishReason::kNewTokenLimit, "");
      return;
    }
    const Status status = executor_.rewind_session(session.id, context - 1);
    CELLM_CHECK(status.ok()) << "rewind by one: " << status.to_string();
    session.committed = context - 1;
  }
  const int32_t first_prompt_row = session.generation->next_prompt_logprob - 1;
  if (request.config.sampling.prompt_logprobs >= 0) {
    // Every prompt position's row is computed: run again what the session holds of them, and
    // take nothing from other sessions' cells.
    if (session.committed > first_prompt_row) {
      const Status status = executor_.rewind_session(session.id, first_prompt_row);
      CELLM_CHECK(status.ok()) << "rewind for prompt logprobs: " << status.to_string();
      session.committed = first_prompt_row;
    }
    submit_next(session, *session.generation);
    return;
  }
  // Prefix reuse: wait for a running generation computing more of the context than any
  // session's cells hold, or start from a clone of what they hold.
  if (wait_for_prefix(session)) return;
  session.generation->metrics.num_reused_tokens = reuse_prefix(session, session.tokens);
  submit_next(session, *session.generation);
}

void Engine::reap_cancelled() {
  for (auto& [key, session] : sessions_) {
    if (session.generation &&
        session.generation->state->cancel_requested.load(std::memory_order_acquire)) {
      scheduler_.cancel(session.id);
      finish(session, FinishReason::kCancelled, "");
    }
  }
}

void Engine::shutdown_all() {
  for (auto& [key, session] : sessions_) {
    if (session.generation) {
      scheduler_.cancel(session.id);
      finish(session, FinishReason::kCancelled, "the runner shut down");
    }
  }
  CELLM_CHECK(scheduler_.empty()) << "tasks left at shutdown";
  for (auto& [key, session] : sessions_) {
    release_executor_session(session);
    session.shared->set_status(failed_precondition("the runner shut down"));
  }
  sessions_.clear();
  key_of_.clear();
  while (drop_retained()) {
  }
}

void Engine::publish_pool() {
  const CacheUsage usage = executor_.cache_usage();
  std::lock_guard<std::mutex> lock(metrics_mutex_);
  EngineMetrics& m = counters_;
  m.pool_used_cells = usage.max_cells - usage.num_free;
  m.pool_peak_used_cells = std::max(m.pool_peak_used_cells, m.pool_used_cells);
  if (usage.high_water > m.pool_peak_high_water) {
    m.pool_peak_high_water = usage.high_water;
    ++m.pool_num_growths;
  }
  m.pool_high_water = usage.high_water;
}

}  // namespace cellm::internal
