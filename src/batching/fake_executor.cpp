#include "batching/fake_executor.h"

#include <algorithm>
#include <limits>
#include <string>

#include "batching/sampler.h"
#include "batching/step_plan.h"
#include "batching/token_logprobs.h"
#include "core/check.h"
#include "core/hash.h"

namespace cellm::testing {
std::vector<float> fake_logits(std::span<const int32_t> context, int32_t vocab_size) {
  uint64_t h = 0xCBF29CE484222325ULL;
  for (const int32_t token : context) h = splitmix64(h ^ static_cast<uint64_t>(token));
  std::vector<float> logits(vocab_size);
  for (int32_t v = 0; v < vocab_size; ++v) {
    logits[v] = static_cast<float>(splitmix64(h + static_cast<uint64_t>(v)) >> 40) * 0x1.0p-24f;
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
    : TableExecutor("FakeExecutor"), config_(config), cell_tokens_(config.max_cells, kNoToken) {
  create_sessions(config.max_cells,
                  {config.max_sessions, config.max_session_tokens, config.vocab_size});
}

ExecutorLimits FakeExecutor::limits() const {
  return {config_.max_step_tokens, config_.min_prefill_chunk, config_.max_sessions,
          config_.max_session_tokens, config_.vocab_size};
}

std::optional<SessionId> FakeExecutor::open_session() {
  const std::optional<SessionId> id = TableExecutor::open_session();
  if (id) {
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
  CELLM_RETURN_IF_ERROR(TableExecutor::close_session(id));
  std::lock_guard<std::mutex> lock(mutex_);
  --counts_.num_open;
  return ok_status();
}

StatusOr<SessionId> FakeExecutor::clone_session(SessionId src, int32_t upto) {
  CELLM_ASSIGN_OR_RETURN(const SessionId id, TableExecutor::clone_session(src, upto));
  std::lock_guard<std::mutex> lock(mutex_);
  ++counts_.num_open;
  counts_.opened.push_back(id);
  return id;
}

std::vector<int32_t> FakeExecutor::context_of(const PackedStep& step, int32_t token_index) const {
  const std::span<const int32_t> cells = cache().cells(step.seq_ids[token_index]);
  const int32_t pos = step.positions[token_index];
  CELLM_CHECK_LT(pos, static_cast<int32_t>(cells.size()))
      << "a kept row at position " << pos << " past its session's cells";
  std::vector<int32_t> context(pos + 1);
  for (int32_t p = 0; p <= pos; ++p) context[p] = cell_tokens_[cells[p]];
  return context;
}

StatusOr<BatchOutput> FakeExecutor::execute(const BatchInput& batch, bool return_logits) {
  std::function<Status(const BatchInput&)> fail_hook;
  std::function<void()> during;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    fail_hook = fail_hook_;
    during = during_execute_;
  }
  // The previous step's rows are no longer valid: poison them, so a caller that kept the view
  // across steps reads NaN.
  std::fill(logits_.begin(), logits_.end(), std::numeric_limits<float>::quiet_NaN());
  kept_valid_ = false;
  kept_.clear();
  const bool keep = batch.keep_logits && config_.fetches_logits && !return_logits;
  if (fail_hook) CELLM_RETURN_IF_ERROR(fail_hook(batch));
  CELLM_ASSIGN_OR_RETURN(PackedStep step, table().pack(batch));
  CellStep cells;
  for (const SliceCall& call : plan_slices(step.num_tokens, config_.max_step_tokens,
                                           config_.min_prefill_chunk, config_.decode_widths)) {
    const Status placed = place_call(step, call, &cells);
    CELLM_CHECK(placed.ok()) << "a packed step did not fit the cache: " << placed.to_string();
    for (int32_t t = 0; t < cells.num_tokens; ++t) {
      cell_tokens_[cells.token_cell[t]] = step.tokens[call.begin + t];
    }
  }
  const Status invariants = cache().check_invariants();
  CELLM_CHECK(invariants.ok()) << invariants.to_string();
  if (during) during();

  BatchOutput out = step.make_output();
  logits_.clear();
  for (size_t k = 0; k < step.kept_rows.size(); ++k) {
    std::vector<float> logits =
        fake_logits(context_of(step, step.kept_rows[k].token_index), config_.vocab_size);
    const auto poison = [&] {
      std::fill(logits.begin(), logits.end(), std::numeric_limits<float>::quiet_NaN());
    };
    if (config_.no_finite_logits) poison();
    // What the CUDA executor computes beside the rows, from the rows it computed.
    if (config_.greedy_tokens) out.outputs[k].greedy_token = argmax_finite(logits);
    const StepInput& input = batch.inputs[static_cast<size_t>(out.outputs[k].input_index)];
    if (config_.logprobs && input.num_top_logprobs >= 0) {
      out.outputs[k].logprobs =
          summarize_logprobs(logits, input.scored_token, input.num_top_logprobs);
    }
    if (config_.candidates && input.candidates_temperature > 0.0f) {
      if (rewrites_rows() && input.rewrite.enabled) {  // in place, as on the device
        apply_rewrite(input.rewrite, logits);
        std::lock_guard<std::mutex> lock(mutex_);
        ++counts_.num_rewritten_rows;
      }
      RowCandidates& listed = out.outputs[k].candidates.emplace(
          sampling_candidates(logits, input.candidates_temperature));
      const CandidatesDraw& draw = input.candidates_draw;
      // As the CUDA executor, no total where the cuts hold a top-k (no draw reads it then).
      if (draw.cuts.top_k > 0) listed.total = std::numeric_limits<double>::quiet_NaN();
      if (draw.enabled && !listed.top.empty()) {  // the draw the CUDA executor makes
        SamplingParams cuts;
        cuts.temperature = input.candidates_temperature;
        cuts.top_k = draw.cuts.top_k;
        cuts.top_p = draw.cuts.top_p;
        cuts.min_p = draw.cuts.min_p;
        Sampler sampler(cuts, draw.seed);
        listed.drawn = sampler.sample_from_candidates(listed, draw.position).value_or(kNoToken);
        if (listed.drawn == kNoToken && config_.draws_rows) {
          const std::vector<int32_t> context(static_cast<size_t>(draw.position), 0);
          const StatusOr<int32_t> drawn = sampler.sample(logits, context);
          if (drawn.ok()) {
            listed.drawn = *drawn;
            listed.drawn_from_row = true;
            listed.drawn_logit = logits[static_cast<size_t>(*drawn)];
          }
        }
        std::lock_guard<std::mutex> lock(mutex_);
        counts_.draws.emplace_back(draw.seed, draw.position, listed.drawn);
      }
    }
    if (config_.nan_logits) poison();
    if (return_logits) logits_.insert(logits_.end(), logits.begin(), logits.end());
    if (keep) kept_.insert(kept_.end(), logits.begin(), logits.end());
  }
  kept_valid_ = keep;
  if (return_logits) {
    out.vocab_size = config_.vocab_size;
    out.logits = logits_;
  }
  commit_step();
  std::lock_guard<std::mutex> lock(mutex_);
  ++counts_.num_executes;
  if (return_logits) ++counts_.num_logits_steps;
  if (keep) {
    ++counts_.num_kept_steps;
    counts_.num_kept_rows += static_cast<int64_t>(step.kept_rows.size());
  }
  counts_.num_tokens += step.num_tokens;
  counts_.max_step_tokens_seen = std::max(counts_.max_step_tokens_seen, step.num_tokens);
  return out;
}

StatusOr<std::span<const float>> FakeExecutor::fetch_logits(std::span<const int32_t> rows) {
  if (!kept_valid_) return failed_precondition("FakeExecutor: the last step kept no rows");
  if (config_.fail_fetches)
    return internal_error("FakeExecutor: fetch_logits fails (fail_fetches)");
  const auto vocab = static_cast<size_t>(config_.vocab_size);
  const size_t num_rows = kept_.size() / vocab;
  CELLM_RETURN_IF_ERROR(check_fetch_rows(rows, num_rows));
  logits_.assign(kept_.size(), std::numeric_limits<float>::quiet_NaN());
  for (const int32_t r : rows) {
    const auto row = static_cast<size_t>(r);
    std::copy_n(kept_.begin() + static_cast<ptrdiff_t>(row * vocab), vocab,
                logits_.begin() + static_cast<ptrdiff_t>(row * vocab));
  }
  std::lock_guard<std::mutex> lock(mutex_);
  counts_.num_fetched_rows += static_cast<int64_t>(rows.size());
  return std::span<const float>(logits_);
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

}  // namespace cellm::testing
