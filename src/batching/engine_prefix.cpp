// Prefix reuse (RunnerOptions::prefix_reuse): where a context's leading positions are already in
// some session's cells, a new generation starts from a clone of them; closed sessions are kept
// (retained) for that while the pool and the executor have room.
#include <algorithm>
#include <string>

#include "batching/engine.h"
#include "core/check.h"
#include "core/logging.h"

namespace cellm::internal {
namespace {

// Positions at the start of `held` equal to `context`'s, at most `limit`.
int32_t common_prefix(std::span<const int32_t> held, std::span<const int32_t> context,
                      int32_t limit) {
  const size_t n = std::min({held.size(), context.size(), static_cast<size_t>(limit)});
  const auto mismatch =
      std::mismatch(held.begin(), held.begin() + static_cast<ptrdiff_t>(n), context.begin());
  return static_cast<int32_t>(mismatch.first - held.begin());
}

}  // namespace

void Engine::close_executor_session(SessionId id, const std::string& what) {
  const Status status = executor_.close_session(id);
  if (!status.ok()) CELLM_LOG(kError) << "closing " << what << ": " << status.to_string();
}

Engine::HeldPrefix Engine::longest_held_prefix(const EngineSession& session,
                                               std::span<const int32_t> context, int32_t limit) {
  HeldPrefix best;
  const auto consider = [&](SessionId id, std::span<const int32_t> held, int64_t& last_used) {
    const int32_t n = common_prefix(held, context, limit);
    if (n > best.length) best = {n, id, &last_used};
  };
  for (auto& [key, other] : sessions_) {
    if (&other == &session || !other.poisoned.ok() || other.committed == 0) continue;
    consider(other.id, std::span<const int32_t>(other.tokens).first(other.committed),
             other.last_used);
  }
  for (RetainedPrefix& retained : retained_) {
    consider(retained.id, retained.tokens, retained.last_used);
  }
  return best;
}

int32_t Engine::reuse_prefix(EngineSession& session, std::span<const int32_t> context) {
  const PrefixReuseOptions& options = options_.prefix_reuse;
  // The context's last position always runs: its logits give the first token.
  const auto usable = static_cast<int32_t>(context.size()) - 1;
  const int32_t worth = session.committed + std::max(options.min_tokens, 1);
  if (!options.enabled || usable < worth) return 0;
  HeldPrefix held = longest_held_prefix(session, context, usable);
  if (held.length < worth) return 0;
  const auto exhausted = [](const StatusOr<SessionId>& s) {
    return !s.ok() && s.status().code() == StatusCode::kResourceExhausted;
  };
  StatusOr<SessionId> clone = executor_.clone_session(held.id, held.length);
  if (exhausted(clone)) {
    // At the executor's session limit. A session holding no cells gives its executor session up
    // (it opens another when it runs: submit_next); then a retained prefix other than the donor
    // is closed; at last a session holding nothing takes a retained donor over.
    if (session.committed == 0 && session.has_executor_session()) {
      release_executor_session(session);
      clone = executor_.clone_session(held.id, held.length);
    }
    if (exhausted(clone) && drop_retained(held.id)) {
      held = longest_held_prefix(session, context, usable);  // the donor moved in retained_
      clone = executor_.clone_session(held.id, held.length);
    }
    if (exhausted(clone) && !session.has_executor_session() &&
        adopt_retained(session, held.id, held.length)) {
      return count_reuse(session, held.length);
    }
  }
  if (!clone.ok()) {  // compute the context instead
    CELLM_LOG(kDebug) << "prefix reuse skipped: " << clone.status().to_string();
    return 0;
  }
  release_executor_session(session);
  session.id = *clone;
  key_of_[*clone] = session.shared->key;
  *held.last_used = step_;
  return count_reuse(session, held.length);
}

int32_t Engine::count_reuse(EngineSession& session, int32_t length) {
  const int32_t gained = length - session.committed;
  session.committed = length;
  session.high_committed = std::max(session.high_committed, length);
  std::lock_guard<std::mutex> lock(metrics_mutex_);
  ++counters_.num_prefix_hits;
  counters_.num_reused_tokens += gained;
  return gained;
}

void Engine::ensure_executor_session(EngineSession& session) {
  if (session.has_executor_session()) return;
  std::optional<SessionId> id = executor_.open_session();
  while (!id && drop_retained()) id = executor_.open_session();  // retained prefixes go first
  CELLM_CHECK(id.has_value()) << session_name(session.shared->key)
                              << " found no executor session though at most "
                              << limits_.max_sessions << " sessions are open";
  session.id = *id;
  key_of_[*id] = session.shared->key;
}

void Engine::release_executor_session(EngineSession& session) {
  if (!session.has_executor_session()) return;
  close_executor_session(session.id, session_name(session.shared->key));
  key_of_.erase(session.id);
  session.id = kNoExecutorSession;
}

bool Engine::adopt_retained(EngineSession& session, SessionId id, int32_t length) {
  CELLM_CHECK(!session.has_executor_session() && session.committed == 0)
      << "only a session holding nothing takes a retained prefix over";
  const auto it = std::find_if(retained_.begin(), retained_.end(),
                               [&](const RetainedPrefix& r) { return r.id == id; });
  if (it == retained_.end()) return false;
  const Status status = executor_.rewind_session(id, length);
  CELLM_CHECK(status.ok()) << "rewinding a retained prefix to " << length << ": "
                           << status.to_string();
  retained_.erase(it);
  count_retained();
  session.id = id;
  key_of_[id] = session.shared->key;
  return true;
}

void Engine::resume_preempted() {
  std::erase_if(preempted_, [&](Preempted& entry) {
    const auto it = sessions_.find(entry.key);
    if (it == sessions_.end()) return true;
    EngineSession& session = it->second;
    // Back at 0 with its generation, which may take other sessions' cells; else done with.
    if (!session.generation || session.committed != 0 || session.waits_for != 0 ||
        session.generation->config.sampling.prompt_logprobs >= 0) {
      return true;
    }
    // What other cells hold of its context, looked up once (a scan of every session's tokens).
    const auto usable = static_cast<int32_t>(session.tokens.size()) - 1;
    if (entry.held < 0) entry.held = longest_held_prefix(session, session.tokens, usable).length;
    if (entry.held == 0) return true;
    // As a prompt holding no cell starts only when all of it fits, it starts from the prefix only
    // when the rest fits, with a cell to spare for each task's next step (else it would be the
    // first preempted again); until then it waits here, or the scheduler starts it from 0.
    const int32_t rest = static_cast<int32_t>(session.tokens.size()) - entry.held;
    if (executor_.cache_usage().num_free < rest + scheduler_.num_tasks()) return false;
    const SessionId before = session.id;
    session.generation->metrics.num_reused_tokens += reuse_prefix(session, session.tokens);
    if (session.id != before) {  // a clone, or its own executor session given up for one
      const std::optional<SchedulerTask> task = scheduler_.cancel(before);
      CELLM_CHECK(task.has_value()) << "a preempted generation without its task";
      submit_next(session, *session.generation);
    }
    return true;  // started from the prefix, or the prefix is gone: the scheduler starts it
  });
}

bool Engine::wait_for_prefix(EngineSession& session) {
  const PrefixReuseOptions& options = options_.prefix_reuse;
  const auto usable = static_cast<int32_t>(session.tokens.size()) - 1;
  const int32_t more = std::max(options.min_tokens, 1);
  if (!options.enabled || usable < session.committed + more) return false;
  const int32_t held = longest_held_prefix(session, session.tokens, usable).length;
  // A running generation's context (computed or not) that shares at least `more` positions
  // beyond what is held.
  int32_t best = std::max(held, session.committed) + more - 1;
  uint64_t donor = 0;
  for (const auto& [key, other] : sessions_) {
    if (&other == &session || !other.generation || other.waits_for != 0 || !other.poisoned.ok()) {
      continue;
    }
    const int32_t n = common_prefix(other.tokens, session.tokens, usable);
    if (n > best && other.committed < n) best = n, donor = key;
  }
  if (donor == 0) return false;
  session.waits_for = donor;
  session.wait_until = best;
  std::lock_guard<std::mutex> lock(metrics_mutex_);
  ++counters_.num_prefix_waits;
  return true;
}

bool Engine::has_waiting() const {
  for (const auto& [key, session] : sessions_) {
    if (session.waits_for != 0) return true;
  }
  return false;
}

void Engine::release_waiting() {
  const bool all = scheduler_.empty();  // nothing runs that could end a wait: end them all
  for (auto& [key, session] : sessions_) {
    if (session.waits_for == 0) continue;
    CELLM_CHECK(session.generation) << "a session waits for a prefix without a generation";
    const auto donor = sessions_.find(session.waits_for);
    const bool over = all || donor == sessions_.end() || !donor->second.generation ||
                      donor->second.waits_for != 0 || !donor->second.poisoned.ok() ||
                      donor->second.committed >= session.wait_until;
    if (!over) continue;
    session.waits_for = 0;
    session.generation->metrics.num_reused_tokens += reuse_prefix(session, session.tokens);
    submit_next(session, *session.generation);
  }
}

bool Engine::retain(const EngineSession& session) {
  const PrefixReuseOptions& options = options_.prefix_reuse;
  if (!options.enabled || options.max_retained <= 0 || !session.poisoned.ok() ||
      session.committed < std::max(options.min_tokens, 1)) {
    return false;
  }
  const std::span<const int32_t> held =
      std::span<const int32_t>(session.tokens).first(session.committed);
  for (size_t i = 0; i < retained_.size(); ++i) {
    RetainedPrefix& other = retained_[i];
    const int32_t common = common_prefix(other.tokens, held, session.committed);
    if (common == session.committed) {  // nothing new: `other` holds all of it already
      other.last_used = std::max(other.last_used, step_);
      return false;
    }
    if (common == static_cast<int32_t>(other.tokens.size())) {  // extends `other`: replace it
      close_executor_session(other.id, "a retained prefix");
      retained_.erase(retained_.begin() + static_cast<ptrdiff_t>(i));
      count_retained();
      break;
    }
  }
  retained_.push_back({session.id, std::vector<int32_t>(held.begin(), held.end()), step_});
  while (static_cast<int32_t>(retained_.size()) > options.max_retained) drop_retained();
  count_retained();
  return true;
}

int Engine::lru_retained(std::optional<SessionId> keep) const {
  int victim = -1;
  for (size_t i = 0; i < retained_.size(); ++i) {
    if (retained_[i].id == keep) continue;
    if (victim < 0 || retained_[i].last_used < retained_[static_cast<size_t>(victim)].last_used) {
      victim = static_cast<int>(i);
    }
  }
  return victim;
}

bool Engine::drop_retained(std::optional<SessionId> keep) {
  const int victim = lru_retained(keep);
  if (victim < 0) return false;
  close_executor_session(retained_[static_cast<size_t>(victim)].id, "a retained prefix");
  retained_.erase(retained_.begin() + victim);
  count_retained();
  return true;
}

void Engine::count_retained() {
  std::lock_guard<std::mutex> lock(metrics_mutex_);
  counters_.num_retained_prefixes = static_cast<int32_t>(retained_.size());
}

}  // namespace cellm::internal
