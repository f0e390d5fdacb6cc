// What the engine does with a token picked for a session: deliver it to the generation
// (metrics, stop matching, the callback) and go on, or finish the generation. The engine thread
// only (engine.h).
#include <algorithm>
#include <exception>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "batching/engine.h"
#include "core/check.h"
#include "core/logging.h"

namespace cellm::internal {

void Engine::complete_task(EngineSession& session, const ScheduledSlice& slice,
                           PickedToken picked) {
  if (!slice.wants_output) {  // max_new_tokens 0: the prompt ran, nothing to sample
    finish(session, FinishReason::kNewTokenLimit, "");
    return;
  }
  if (session.generation->state->cancel_requested.load(std::memory_order_acquire) ||
      !picked.token.has_value()) {
    finish(session, FinishReason::kCancelled, "");  // the sampled token is never delivered
    return;
  }
  const StatusOr<int32_t>& token = *picked.token;
  if (!token.ok()) {
    finish(session, FinishReason::kFailed, "sampling failed: " + token.status().to_string());
    return;
  }
  deliver(session, *token, picked.logprobs.has_value() ? &*picked.logprobs : nullptr);
}

void Engine::deliver(EngineSession& session, int32_t token, const TokenLogprobs* logprobs) {
  ActiveGeneration& generation = *session.generation;
  session.tokens.push_back(token);  // pending until fed back, part of the context from now on
  session.shared->position.store(static_cast<int32_t>(session.tokens.size()),
                                 std::memory_order_relaxed);
  const int64_t now = now_us();
  GenerationMetrics& metrics = generation.metrics;
  ++metrics.num_generated_tokens;
  if (metrics.num_generated_tokens == generation.config.min_new_tokens) {
    // min_new_tokens reached: the stop tokens the sampler banned until now may come.
    generation.sampler = Sampler(generation.config.sampling, generation.config.seed,
                                 generation.config.constrained());
  }
  if (metrics.first_token_us < 0) {
    metrics.first_token_us = now;
    std::lock_guard<std::mutex> lock(metrics_mutex_);
    ttft_.add(metrics.ttft_us());
  } else {
    generation.inter_token.add(now - generation.last_token_us);
    std::lock_guard<std::mutex> lock(metrics_mutex_);
    inter_token_.add(now - generation.last_token_us);
  }
  generation.last_token_us = now;
  {
    std::lock_guard<std::mutex> lock(metrics_mutex_);
    ++counters_.num_generated_tokens;
  }

  // A constrained generation's walker takes the token's bytes. A stop token may be picked where
  // the text may end (a match, or a whole JSON value that could go on) even if its bytes (most
  // have none) would not continue it; it ends the generation below, its bytes left out.
  const auto walk = [&](auto& walker, const char* what) {
    const bool stops = walker.complete() && is_stop_token(generation, token);
    const bool fed = walker.feed((*generation.token_bytes)[static_cast<size_t>(token)]);
    CELLM_CHECK(fed || stops) << "token " << token << " was picked outside the " << what
                              << " the mask allowed";
    return !stops && walker.must_end();
  };
  bool format_complete = false;
  if (generation.json.has_value()) format_complete = walk(*generation.json, "JSON");
  if (generation.text.has_value()) format_complete = walk(*generation.text, "text pattern");
  StopMatcher::Step stop = generation.stops.push(token);
  const int32_t one[1] = {token};
  const std::span<const TokenLogprobs> one_logprobs =
      logprobs != nullptr ? std::span<const TokenLogprobs>(logprobs, 1)
                          : std::span<const TokenLogprobs>();
  if (stop.outcome != StopMatcher::Outcome::kContinue || format_complete ||
      metrics.num_generated_tokens >= generation.config.max_new_tokens) {
    const FinishReason reason =
        stop.outcome == StopMatcher::Outcome::kStopToken    ? FinishReason::kStopToken
        : stop.outcome == StopMatcher::Outcome::kStopString ? FinishReason::kStopString
        : format_complete                                   ? FinishReason::kFormatComplete
                                                            : FinishReason::kNewTokenLimit;
    finish(session, reason, "", one, std::move(stop.text), one_logprobs);
    return;
  }
  metrics.inter_token = generation.inter_token.summary();
  generation.state->record(one, stop.text, metrics);
  GenerationUpdate update;
  update.tokens = one;
  update.logprobs = one_logprobs;
  update.prompt_logprobs = take_prompt_logprobs(generation);
  update.text = stop.text;
  if (const std::optional<std::string> thrown = invoke(generation.callback, update)) {
    finish(session, FinishReason::kFailed, "the generation callback threw: " + *thrown);
    return;
  }
  submit_next(session, generation);
}

std::optional<std::string> Engine::invoke(const GenerationCallback& callback,
                                          const GenerationUpdate& update) {
  if (!callback) return std::nullopt;
  try {
    callback(update);
  } catch (const std::exception& e) {
    return std::string(e.what());
  } catch (...) {
    return std::string("an exception that is not a std::exception");
  }
  return std::nullopt;
}

void Engine::finish(EngineSession& session, FinishReason reason, std::string_view error,
                    std::span<const int32_t> last_tokens, std::string text,
                    std::span<const TokenLogprobs> last_logprobs) {
  CELLM_CHECK(session.generation) << "finish without a generation";
  std::unique_ptr<ActiveGeneration> generation = std::move(session.generation);
  session.waits_for = 0;
  text += generation->stops.finish();
  GenerationMetrics& metrics = generation->metrics;
  metrics.end_us = now_us();
  metrics.inter_token = generation->inter_token.summary();
  {
    std::lock_guard<std::mutex> lock(metrics_mutex_);
    ++counters_.num_finished[static_cast<size_t>(reason)];
    last_end_us_ = std::max(last_end_us_, metrics.end_us);
  }
  generation->state->record(last_tokens, text, metrics);
  GenerationUpdate update;
  update.tokens = last_tokens;
  update.logprobs = last_logprobs;
  update.prompt_logprobs = take_prompt_logprobs(*generation);
  update.text = text;
  update.finished = true;
  update.finish_reason = reason;
  update.error = error;
  if (const std::optional<std::string> thrown = invoke(generation->callback, update)) {
    CELLM_LOG(kWarn) << "a generation callback threw on its final update (ignored): " << *thrown;
  }
  generation->state->mark_done(reason, error, metrics);
}

}  // namespace cellm::internal
