// One step of the engine: plan (scheduler + memory), execute, pick each sampled row's token,
// hand it to engine_deliver.cpp.
#include <algorithm>
#include <optional>
#include <span>
#include <string>

#include "batching/engine.h"
#include "batching/token_logprobs.h"
#include "core/check.h"
#include "core/logging.h"

namespace cellm::internal {
namespace {

// Output row `row`'s logits ([vocab] f32, a view into the executor's memory).
std::span<const float> logits_row(const BatchOutput& out, size_t row) {
  const auto vocab = static_cast<size_t>(out.vocab_size);
  CELLM_CHECK_GE(out.logits.size(), (row + 1) * vocab) << "executor returned too few logits";
  return out.logits.subspan(row * vocab, vocab);
}

// A row with no finite logit that the engine reports without reading it (its argmax or its
// candidates said so).
Status no_finite_logit(size_t position) {
  return failed_precondition(
      "no token has a finite score at position " + std::to_string(position) +
      " (NaN or infinite logits, or logit_bias or the response format banned "
      "every token)");
}

}  // namespace

// The pool as the scheduler sees it while planning: frees cells by rewinding sessions to 0 (their
// tokens stay on the host, so the next task re-feeds them).
class Engine::Memory : public SchedulerMemory {
 public:
  explicit Memory(Engine& engine) : engine_(engine) {}

  int32_t num_free_cells() override { return engine_.executor_.cache_usage().num_free; }

  // The least recently used of the idle sessions holding cells and the retained prefixes.
  bool evict_idle() override {
    EngineSession* victim = nullptr;
    for (auto& [key, session] : engine_.sessions_) {
      if (session.generation || session.committed == 0) continue;
      if (victim == nullptr || session.last_used < victim->last_used) victim = &session;
    }
    const int retained = engine_.lru_retained();
    if (retained >= 0 &&
        (victim == nullptr ||
         engine_.retained_[static_cast<size_t>(retained)].last_used <= victim->last_used)) {
      engine_.drop_retained();
    } else if (victim != nullptr) {
      release(*victim);
    } else {
      return false;
    }
    std::lock_guard<std::mutex> lock(engine_.metrics_mutex_);
    ++engine_.counters_.num_idle_evictions;
    return true;
  }

  void preempt(SessionId id) override {
    EngineSession* session = engine_.find_by_id(id);
    CELLM_CHECK(session != nullptr && session->generation) << "preempt of an idle session " << id;
    release(*session);
    engine_.preempted_.push_back({session->shared->key});
    ++session->generation->metrics.num_preemptions;
    std::lock_guard<std::mutex> lock(engine_.metrics_mutex_);
    ++engine_.counters_.num_preemptions;
  }

 private:
  void release(EngineSession& session) {
    const Status status = engine_.executor_.rewind_session(session.id, 0);
    CELLM_CHECK(status.ok()) << "rewind to 0 for preemption: " << status.to_string();
    session.committed = 0;
  }

  Engine& engine_;
};

Engine::EngineSession* Engine::find_by_id(SessionId id) {
  const auto key = key_of_.find(id);
  if (key == key_of_.end()) return nullptr;
  return &sessions_.at(key->second);
}

void Engine::submit_next(EngineSession& session, const ActiveGeneration& generation) {
  ensure_executor_session(session);
  const auto end = static_cast<int32_t>(session.tokens.size());
  const bool decode = session.committed > 0 && end == session.committed + 1;
  scheduler_.submit({session.id, decode ? TaskKind::kDecode : TaskKind::kPrompt, session.committed,
                     end, generation.config.max_new_tokens > 0, generation.arrival});
}

void Engine::run_step() {
  ++step_;
  resume_preempted();
  Memory memory(*this);
  const StepSchedule plan = scheduler_.schedule(memory);
  if (plan.slices.empty()) {
    // Cannot happen while submit refuses what can never fit; never hang on it.
    const Status status =
        internal_error("the scheduler could not place a single token: the cell pool (" +
                       std::to_string(executor_.cache_usage().max_cells) +
                       " cells) is held by nothing it may "
                       "release");
    for (const SchedulerTask& task : scheduler_.clear()) {
      if (EngineSession* session = find_by_id(task.session)) {
        finish(*session, FinishReason::kFailed, status.to_string());
      }
    }
    return;
  }

  // One input per slice, or, where a generation wants prompt log-probabilities, its slice cut
  // after every position whose row it keeps. row_positions: each output row's position.
  BatchInput batch;
  batch.inputs.reserve(plan.slices.size());
  std::vector<int32_t> row_positions;
  bool prompt_rows = false;
  for (const ScheduledSlice& slice : plan.slices) {
    EngineSession& session = *find_by_id(slice.session);
    CELLM_CHECK_EQ(slice.begin, session.committed) << "slice of session " << slice.session;
    // Only a generation asking for prompt log-probabilities has positions to cut after.
    const bool cuts = session.generation->config.sampling.prompt_logprobs >= 0;
    int32_t begin = slice.begin;
    for (int32_t p = cuts ? slice.begin : slice.end - 1; p < slice.end; ++p) {
      const bool prompt_row = wants_prompt_row(session, p);
      const bool last = p == slice.end - 1;
      if (!prompt_row && !last) continue;
      const bool wants_output = prompt_row || slice.wants_output;
      StepInput& input = batch.inputs.emplace_back();
      input = {session.id, 0, session.tokens, begin, p + 1, wants_output};
      // The log-probabilities the row is kept for, summarized by executors that can.
      const SamplingParams& sampling = session.generation->config.sampling;
      if (last && slice.wants_output) {
        input.num_top_logprobs = sampling.logprobs;
        Sampler& sampler = session.generation->sampler;
        if (lists_candidates(*session.generation)) {
          // A greedy sampler's rewritten row is listed at any temperature: its best token is the
          // argmax (the lower id on ties), which pick_from_candidates takes.
          const bool greedy = sampling.temperature <= 0.0f;
          input.candidates_temperature = greedy ? 1.0f : sampling.temperature;
          // The draw pick_from_candidates makes, so an executor may make it first.
          input.candidates_draw = {!greedy, listed_draw_params(sampling), sampler.seed(),
                                   static_cast<int64_t>(session.tokens.size())};
          if (sampler.rewrites_scores()) {
            SamplerRewrite& rewrite = session.generation->rewrite;
            sampler.rewrite_into(session.tokens, rewrite);
            input.rewrite = rewrite.view();
          }
        }
      } else if (prompt_row) {
        input.num_top_logprobs = sampling.prompt_logprobs;
        input.scored_token = session.tokens[static_cast<size_t>(p + 1)];
      }
      if (wants_output) row_positions.push_back(p);
      prompt_rows = prompt_rows || prompt_row;
      begin = p + 1;
    }
  }
  const int64_t start_us = now_us();
  const RowsNeeded needed = step_needs_logits(plan, prompt_rows);
  batch.keep_logits = needed == RowsNeeded::kSome && executor_.fetches_logits();
  const bool return_logits =
      needed == RowsNeeded::kAll || (needed == RowsNeeded::kSome && !batch.keep_logits);
  StatusOr<BatchOutput> output = executor_.execute(batch, return_logits);
  const int64_t end_us = now_us();
  {
    std::lock_guard<std::mutex> lock(metrics_mutex_);
    LatencyStats& kind = plan.num_prompt_tokens == 0   ? decode_steps_
                         : plan.num_decode_tokens == 0 ? prompt_steps_
                                                       : mixed_steps_;
    kind.add(end_us - start_us);
    if (!output.ok()) ++counters_.num_failed_steps;
  }
  if (!output.ok()) {
    fail_step(plan, output.status());
    publish_pool();
    return;
  }
  CELLM_CHECK_EQ(output->outputs.size(), row_positions.size())
      << "executor returned another number of output rows than the step asked for";
  CELLM_CHECK(output->vocab_size == limits_.vocab_size || output->logits.empty())
      << "executor returned rows of " << output->vocab_size << " logits, vocab is "
      << limits_.vocab_size;

  // Commit: every slice's positions are now held by the executor.
  int64_t recomputed = 0;
  for (const ScheduledSlice& slice : plan.slices) {
    EngineSession& session = *find_by_id(slice.session);
    recomputed += std::max(0, std::min(slice.end, session.high_committed) - slice.begin);
    session.committed = slice.end;
    session.high_committed = std::max(session.high_committed, slice.end);
    session.last_used = step_;
    ActiveGeneration& generation = *session.generation;
    if (generation.last_step != step_) ++generation.metrics.num_steps;
    generation.last_step = step_;
    if (generation.metrics.first_step_us < 0) generation.metrics.first_step_us = start_us;
    if (slice.kind == TaskKind::kPrompt)
      generation.metrics.num_prefilled_tokens += slice.end - slice.begin;
  }
  {
    std::lock_guard<std::mutex> lock(metrics_mutex_);
    counters_.num_decode_tokens += plan.num_decode_tokens;
    counters_.num_prompt_tokens += plan.num_prompt_tokens;
    counters_.num_recomputed_tokens += recomputed;
  }
  publish_pool();

  // Outputs, then callbacks, in slice order: prompt log-probabilities as their rows come, then
  // every completing task's token picked (on the sampling pool where several rows are read on
  // the host), then delivered.
  struct Completion {
    const ScheduledSlice* slice;
    EngineSession* session;
    size_t row;
    PickedToken picked;
  };
  std::vector<Completion> completions;
  size_t next_row = 0;  // output rows follow the inputs that want one, in order
  for (const ScheduledSlice& slice : plan.slices) {
    EngineSession* session = find_by_id(slice.session);
    size_t row = 0;
    // The slice's rows: prompt log-probabilities first, then its sampling row (if any).
    while (next_row < row_positions.size() && output->outputs[next_row].session == slice.session) {
      const int32_t p = row_positions[next_row];
      if (p == slice.end - 1 && slice.wants_output) {
        row = next_row++;
        break;
      }
      if (session == nullptr || !session->generation) {
        ++next_row;
        continue;
      }
      ActiveGeneration& generation = *session->generation;
      if (generation.next_prompt_logprob == p + 1) {
        const int32_t next_token = session->tokens[static_cast<size_t>(p + 1)];
        const std::optional<RowLogprobs>& summary = output->outputs[next_row].logprobs;
        generation.prompt_logprobs.push_back(
            summary.has_value() ? logprobs_from_summary(*summary, next_token, summary->scored_logit)
                                : token_logprobs(logits_row(*output, next_row), next_token,
                                                 generation.config.sampling.prompt_logprobs));
        ++generation.next_prompt_logprob;
      }
      ++next_row;
    }
    if (!slice.completes_task) continue;
    if (session == nullptr || !session->generation) continue;
    completions.push_back({&slice, session, row, {}});
  }

  // Rows the host reads are picked in parallel; the others (the executor's argmax, its
  // summaries, sampling candidates that decide the draw) on this thread. Picking touches only
  // each row's own generation.
  std::vector<size_t> reading;
  for (size_t i = 0; i < completions.size(); ++i) {
    Completion& c = completions[i];
    if (!c.slice->wants_output ||
        c.session->generation->state->cancel_requested.load(std::memory_order_acquire)) {
      continue;  // nothing to pick: complete_task finishes it
    }
    if (std::optional<PickedToken> picked = pick_from_candidates(*c.session, *output, c.row)) {
      c.picked = std::move(*picked);
    } else if (pick_reads_row(*c.session, *output, c.row, batch.keep_logits)) {
      reading.push_back(i);
    } else {
      c.picked = pick_token(*c.session, *output, c.row);
    }
  }
  if (batch.keep_logits && !reading.empty()) {
    // Only the rows read here travel to the host: samplers that read their row, draws the
    // candidates left undecided, log-probabilities not summarized.
    std::vector<int32_t> rows;
    rows.reserve(reading.size());
    for (const size_t i : reading) rows.push_back(static_cast<int32_t>(completions[i].row));
    StatusOr<std::span<const float>> fetched = executor_.fetch_logits(rows);
    if (fetched.ok()) {
      output->vocab_size = limits_.vocab_size;
      output->logits = *fetched;
    } else {
      CELLM_LOG(kError) << "fetching " << rows.size()
                        << " logits rows failed: " << fetched.status().to_string();
      for (const size_t i : reading) {
        completions[i].picked.token.emplace(fetched.status().with_context("fetching its logits"));
      }
      reading.clear();
    }
  }
  sampling_pool_.parallel_for(reading.size(), [&](size_t begin, size_t end) {
    for (size_t k = begin; k < end; ++k) {
      Completion& c = completions[reading[k]];
      c.picked = pick_token(*c.session, *output, c.row);
    }
  });
  for (Completion& c : completions) {
    // Found again: delivering an earlier one ran callbacks and may have finished generations.
    EngineSession* session = find_by_id(c.slice->session);
    if (session == nullptr || !session->generation) continue;
    complete_task(*session, *c.slice, std::move(c.picked));
  }
}

bool Engine::wants_prompt_row(const EngineSession& session, int32_t position) {
  const ActiveGeneration* generation = session.generation.get();
  return generation != nullptr && generation->config.sampling.prompt_logprobs >= 0 &&
         position + 1 >= generation->next_prompt_logprob && position + 1 < generation->prompt_end;
}

std::span<const TokenLogprobs> Engine::take_prompt_logprobs(ActiveGeneration& generation) {
  if (generation.prompt_logprobs_sent || generation.config.sampling.prompt_logprobs < 0) return {};
  generation.prompt_logprobs_sent = true;
  return generation.prompt_logprobs;
}

Engine::RowsNeeded Engine::step_needs_logits(const StepSchedule& plan, bool prompt_rows) {
  const bool summaries = executor_.computes_logprobs();
  if (!executor_.computes_greedy_tokens() || (prompt_rows && !summaries)) return RowsNeeded::kAll;
  // A row the host may read: one whose sampler reads it (bias, penalties, or a draw its
  // candidates may leave undecided), or whose log-probabilities are not summarized. An executor
  // that fetches rows keeps them for those few; another copies every row.
  const RowsNeeded some = executor_.fetches_logits() ? RowsNeeded::kSome : RowsNeeded::kAll;
  for (const ScheduledSlice& slice : plan.slices) {
    if (!slice.wants_output) continue;
    const EngineSession* session = find_by_id(slice.session);
    if (session == nullptr || !session->generation) continue;
    const ActiveGeneration& generation = *session->generation;
    const Sampler& sampler = generation.sampler;
    const bool decided =
        sampler.takes_argmax() ||
        (executor_.computes_candidates() && sampler.candidates_always_decide()) ||
        (lists_candidates(generation) &&
         (executor_.draws_rows() || generation.config.sampling.temperature <= 0.0f));
    if (!decided || (generation.config.sampling.logprobs >= 0 && !summaries)) return some;
  }
  // Every row takes its greedy token or its draw from the executor's argmax or candidates, and
  // its log-probabilities from the executor's summary: [rows, vocab] floats stay on the device.
  return RowsNeeded::kNone;
}

void Engine::fail_step(const StepSchedule& plan, const Status& status) {
  const std::string message = "executor failed: " + status.to_string();
  CELLM_LOG(kError) << message << " (" << plan.slices.size() << " sessions in the step)";
  for (const ScheduledSlice& slice : plan.slices) {
    EngineSession& session = *find_by_id(slice.session);
    session.poisoned = failed_precondition("session unusable after an " + message);
    session.shared->set_status(session.poisoned);
    scheduler_.cancel(session.id);  // a partial prompt task is still there
    finish(session, FinishReason::kFailed, message);
  }
}

bool Engine::lists_candidates(const ActiveGeneration& generation) const {
  const Sampler& sampler = generation.sampler;
  if (!executor_.computes_candidates() || sampler.masked()) return false;
  if (sampler.takes_candidates()) return true;
  // A rewritten row: greedy takes the list's head, sampling the executor's draw.
  const SamplingParams& sampling = generation.config.sampling;
  return sampler.rewrites_scores() && sampling.logprobs < 0 && executor_.rewrites_rows() &&
         (sampling.temperature <= 0.0f || executor_.draws_rows());
}

std::optional<Engine::PickedToken> Engine::pick_from_candidates(const EngineSession& session,
                                                                const BatchOutput& out,
                                                                size_t row) const {
  const ActiveGeneration& generation = *session.generation;
  const OutputRow& output = out.outputs[row];
  if (!output.candidates.has_value() || !lists_candidates(generation)) return std::nullopt;
  const int32_t num_logprobs = generation.config.sampling.logprobs;
  if (num_logprobs >= 0 && !output.logprobs.has_value()) return std::nullopt;  // needs the row
  PickedToken picked;
  if (output.candidates->top.empty()) {  // the step may have copied no row to say it from
    picked.token.emplace(no_finite_logit(session.tokens.size()));
    return picked;
  }
  const RowCandidates& candidates = *output.candidates;
  if (generation.config.sampling.temperature <= 0.0f) {  // a rewritten row's argmax
    picked.token.emplace(candidates.top.front().first);
    return picked;  // no log-probabilities: they would need the raw row
  }
  std::optional<int32_t> token = generation.sampler.sample_from_candidates(
      candidates, static_cast<int64_t>(session.tokens.size()));
  if (!token.has_value() && executor_.draws_rows()) {
    // The list leaves the draw to the row, which the executor drew on its side (or, where the
    // rounding of its total had its list decide, from the list): no row was kept for it.
    if (candidates.drawn == kNoToken) {
      picked.token.emplace(internal_error("the executor drew no token from a row it listed"));
      return picked;
    }
    token = candidates.drawn;
  }
  if (!token.has_value()) return std::nullopt;
  picked.token.emplace(*token);
  if (num_logprobs >= 0) {
    // A token drawn from the row comes with its logit; any other is one of the candidates.
    float logit = candidates.drawn_logit;
    if (!candidates.drawn_from_row || *token != candidates.drawn) {
      const auto& top = candidates.top;
      const auto listed = std::find_if(top.begin(), top.end(),
                                       [&](const auto& entry) { return entry.first == *token; });
      CELLM_CHECK(listed != top.end()) << "a token drawn from candidates is not among them";
      logit = listed->second;
    }
    picked.logprobs = logprobs_from_summary(*output.logprobs, *token, logit);
  }
  return picked;
}

bool Engine::pick_reads_row(const EngineSession& session, const BatchOutput& out, size_t row,
                            bool rows_kept) {
  const ActiveGeneration& generation = *session.generation;
  const OutputRow& output = out.outputs[row];
  const bool samples_row = output.greedy_token == kNoToken || !generation.sampler.takes_argmax();
  const bool scores_row = generation.config.sampling.logprobs >= 0 && !output.logprobs.has_value();
  const bool fetches_row = rows_kept && !generation.sampler.takes_argmax();
  return (samples_row && (!out.logits.empty() || fetches_row)) || scores_row;
}

Engine::PickedToken Engine::pick_token(EngineSession& session, const BatchOutput& out, size_t row) {
  ActiveGeneration& generation = *session.generation;
  CELLM_CHECK(row < out.outputs.size() && out.outputs[row].session == session.id)
      << "output row " << row << " does not belong to session " << session.id;
  // Plain greedy takes the executor's argmax when it computed one (the CUDA executor does it on
  // the device): reading 256 rows of a 128K vocabulary on the host would cost as much as the
  // step. Otherwise the sampler reads the row in place (a view valid until the next execute()).
  const int32_t greedy = out.outputs[row].greedy_token;
  PickedToken picked;
  StatusOr<int32_t>& token = picked.token.emplace(greedy);
  if (greedy == kNoToken && generation.sampler.takes_argmax() && out.logits.empty()) {
    // The executor found no finite logit and, every row being greedy, returned none to sample.
    token = no_finite_logit(session.tokens.size());
  } else if (greedy == kNoToken || !generation.sampler.takes_argmax()) {
    const std::span<const float> logits = logits_row(out, row);
    const std::optional<int32_t> best_allowed =
        generation.json.has_value() || generation.text.has_value()
            ? constrain(generation, logits, greedy)
            : std::nullopt;
    if (best_allowed.has_value()) {
      token = *best_allowed;
    } else {
      token = generation.sampler.sample(logits, session.tokens, generation.allowed);
    }
  }
  const int32_t num_logprobs = generation.config.sampling.logprobs;
  if (!token.ok() || num_logprobs < 0) return picked;
  const std::optional<RowLogprobs>& summary = out.outputs[row].logprobs;
  if (!summary.has_value()) {
    picked.logprobs = token_logprobs(logits_row(out, row), *token, num_logprobs);
    return picked;
  }
  // The argmax's logit is the row's largest; any other token was sampled from the row itself.
  const float token_logit =
      *token == greedy ? summary->max_logit : logits_row(out, row)[static_cast<size_t>(*token)];
  picked.logprobs = logprobs_from_summary(*summary, *token, token_logit);
  return picked;
}

}  // namespace cellm::internal
