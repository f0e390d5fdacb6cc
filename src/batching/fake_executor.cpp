#include "batching/fake_executor.h"

#include <algorithm>
#include <string>

#include "batching/step_plan.h"
#include "core/check.h"

namespace cellm::testing {
namespace {

uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

}  // namespace

std::vector<float> fake_logits(std::span<const int32_t> context, int32_t vocab_size) {
  uint64_t h = 0xCBF29CE484222325ULL;
  for (const int32_t token : context) h = mix(h ^ static_cast<uint64_t>(token));
  std::vector<float> logits(vocab_size);
  for (int32_t v = 0; v < vocab_size; ++v) {
    logits[v] = static_cast<float>(mix(h + static_cast<uint64_t>(v)) >> 40) * 0x1.0p-24f;
  }
  return logits;
}

std::vector<int32_t> fake_greedy(std::vector<int32_t> context, int32_t n, int32_t vocab_size) {
  std::vector<int32_t> out;
  for (int32_t i = 0; i < n; ++i) {
    const std::vector<float> logits = fake_logits(context, vocab_size);
    const auto best =
        static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    out.push_back(best);
    context.push_back(best);
  }
  return out;
}

FakeExecutor::FakeExecutor(const FakeExecutorConfig& config)
    : config_(config),
      cache_(config.max_cells),
      table_(cache_, {config.max_sessions, config.max_session_tokens, config.vocab_size}) {}

ExecutorLimits FakeExecutor::limits() const {
  return {config_.max_step_tokens, config_.min_prefill_chunk, config_.max_sessions,
          config_.max_session_tokens, config_.vocab_size};
}

CacheUsage FakeExecutor::cache_usage() const {
  return {cache_.max_cells(), cache_.num_free(), cache_.high_water()};
}

std::optional<SessionId> FakeExecutor::open_session() {
  const std::optional<SessionId> id = table_.open();
  if (id) {
    held_[*id] = {};
    std::lock_guard<std::mutex> lock(mutex_);
    ++counts_.num_open;
    counts_.opened.push_back(*id);
  }
  return id;
}

Status FakeExecutor::close_session(SessionId id) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++counts_.closes[id];
  }
  CELLM_RETURN_IF_ERROR(table_.close(id));
  held_.erase(id);
  std::lock_guard<std::mutex> lock(mutex_);
  --counts_.num_open;
  return ok_status();
}

StatusOr<SessionId> FakeExecutor::clone_session(SessionId src, int32_t upto) {
  CELLM_ASSIGN_OR_RETURN(const SessionId id, table_.clone(src, upto));
  const std::vector<int32_t>& source = held_.at(src);
  held_[id] = std::vector<int32_t>(source.begin(), source.begin() + upto);
  std::lock_guard<std::mutex> lock(mutex_);
  ++counts_.num_open;
  counts_.opened.push_back(id);
  return id;
}

StatusOr<int32_t> FakeExecutor::session_length(SessionId id) const { return table_.length(id); }

Status FakeExecutor::rewind_session(SessionId id, int32_t pos) {
  CELLM_RETURN_IF_ERROR(table_.rewind(id, pos));
  held_.at(id).resize(pos);
  check_consistent();
  return ok_status();
}

StatusOr<BatchOutput> FakeExecutor::execute(const BatchInput& batch, bool return_logits) {
  std::function<Status(const BatchInput&)> fail_hook;
  std::function<void()> during;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    fail_hook = fail_hook_;
    during = during_execute_;
  }
  if (fail_hook) CELLM_RETURN_IF_ERROR(fail_hook(batch));
  CELLM_ASSIGN_OR_RETURN(PackedStep step, table_.pack(batch));
  for (const SessionStart& start : step.session_starts) held_.at(start.session).resize(start.pos);
  for (const SliceCall& call : plan_slices(step.num_tokens, config_.max_step_tokens,
                                           config_.min_prefill_chunk, config_.decode_widths)) {
    const std::span<const SeqId> seqs(step.seq_ids.data() + call.begin, call.num_tokens);
    const std::span<const int32_t> positions(step.positions.data() + call.begin, call.num_tokens);
    StatusOr<bool> admitted = cache_.declare_step(seqs, positions);
    CELLM_CHECK(admitted.ok() && *admitted) << "a packed step did not fit the cache";
    cache_.place();
  }
  for (int32_t t = 0; t < step.num_tokens; ++t)
    held_.at(step.sessions[t]).push_back(step.tokens[t]);
  check_consistent();
  if (during) during();

  BatchOutput out = step.make_output();
  if (return_logits) {
    out.vocab_size = config_.vocab_size;
    out.logits.reserve(step.kept_rows.size() * config_.vocab_size);
    for (const KeptRow& row : step.kept_rows) {
      const std::vector<int32_t>& held = held_.at(row.session);
      const int32_t pos = step.positions[row.token_index];
      const std::vector<float> logits =
          fake_logits(std::span<const int32_t>(held.data(), pos + 1), config_.vocab_size);
      out.logits.insert(out.logits.end(), logits.begin(), logits.end());
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  ++counts_.num_executes;
  counts_.num_tokens += step.num_tokens;
  counts_.max_step_tokens_seen = std::max(counts_.max_step_tokens_seen, step.num_tokens);
  return out;
}

void FakeExecutor::set_fail_hook(std::function<Status(const BatchInput&)> hook) {
  std::lock_guard<std::mutex> lock(mutex_);
  fail_hook_ = std::move(hook);
}

void FakeExecutor::set_during_execute(std::function<void()> hook) {
  std::lock_guard<std::mutex> lock(mutex_);
  during_execute_ = std::move(hook);
}

FakeExecutor::Counts FakeExecutor::counts() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return counts_;
}

void FakeExecutor::check_consistent() const {
  for (const auto& [id, held] : held_) {
    const StatusOr<int32_t> length = table_.length(id);
    CELLM_CHECK(length.ok() && *length == static_cast<int32_t>(held.size()))
        << "session " << id << " holds " << held.size() << " tokens but the cache says "
        << (length.ok() ? std::to_string(*length) : length.status().to_string());
  }
  const Status invariants = cache_.check_invariants();
  CELLM_CHECK(invariants.ok()) << invariants.to_string();
}

}  // namespace cellm::testing
