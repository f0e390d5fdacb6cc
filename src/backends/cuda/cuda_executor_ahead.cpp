// CudaExecutor's run-ahead (CudaExecutorOptions::run_ahead): a batch-1 session's next step
// enqueued before the current one is waited for, and the session verbs that must give it back
// first. A greedy session's next token is the step's argmax; a sampled one's is the draw from its
// candidates on the device (StepInput::candidates_draw), run ahead only where no row is kept for
// the host (the candidates always decide: a top-k inside the list), so a step run ahead is given
// back only when the host's draw differs (rounding of exp) or nothing is finite. A row rewritten
// for its sampler's bias or penalties (StepInput::rewrite) never runs ahead.
#include <span>
#include <vector>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_executor.h"

namespace cellm {

CudaExecutor::TailAsk CudaExecutor::ask_of(const BatchInput& batch) {
  const StepInput& input = batch.inputs[0];
  TailAsk ask;
  if (input.candidates_temperature > 0.0f) {
    ask.temperature = input.candidates_temperature;
    ask.draw = input.candidates_draw;
  }
  return ask;
}

CudaExecutor::TailAsk CudaExecutor::next_ask(TailAsk ask) {
  if (ask.draw.enabled) ++ask.draw.position;  // the next token's
  return ask;
}

bool CudaExecutor::follows_tail(const BatchInput& batch, bool return_logits) const {
  if (!options_.run_ahead || !options_.device_argmax || !replay_graphs_ || copy_logits_ ||
      return_logits || batch.keep_logits || batch.inputs.size() != 1) {
    return false;
  }
  const StepInput& input = batch.inputs[0];
  // A row summarized for log-probabilities, or listing candidates it draws nothing from, is not
  // what the step run ahead computes.
  const TailAsk ask = ask_of(batch);
  return input.wants_output && input.num_top_logprobs < 0 && !input.rewrite.enabled &&
         (ask.temperature <= 0.0f || ask.draw.enabled) && input.end - input.begin == 1 &&
         input.session == tail_.session && input.start_pos + input.begin == tail_.position &&
         input.tokens[static_cast<size_t>(input.begin)] == tail_.token && ask == tail_.ask &&
         (!ahead_.has_value() || ahead_->position == tail_.position);
}

void CudaExecutor::note_tail(const BatchInput& batch, const BatchOutput& output) {
  tail_ = {};
  if (batch.inputs.size() != 1 || output.outputs.size() != 1) return;
  const StepInput& input = batch.inputs[0];
  const OutputRow& row = output.outputs[0];
  const TailAsk asked = ask_of(batch);
  // A rewritten row's next step needs the rewrite of a context that holds its draw: none runs
  // ahead of it.
  if (input.rewrite.enabled) return;
  int32_t token = row.greedy_token;
  if (asked.temperature > 0.0f) {
    token = asked.draw.enabled && row.candidates.has_value() ? row.candidates->drawn : kNoToken;
  }
  if (token == kNoToken) return;
  tail_ = {input.session, input.start_pos + input.end, token, next_ask(asked)};
}

void CudaExecutor::run_ahead(SessionId session, int32_t position, const TailAsk& ask) {
  const CacheUsage usage = TableExecutor::cache_usage();
  BatchInput batch;
  batch.inputs.push_back(
      {session, position, std::span<const int32_t>(&ahead_payload_, 1), 0, 1, true});
  StatusOr<PackedStep> packed = table().pack(batch);  // commits the step before it
  if (!packed.ok()) return;  // the context or the pool is full: nothing runs ahead
  const std::vector<SliceCall> calls = plan_slices(packed->num_tokens, spec_.max_step_tokens,
                                                   spec_.min_prefill_chunk, spec_.decode_widths);
  const int slot = next_ahead_slot_;
  AheadSlot& target = ahead_slots_[slot];
  Status status = calls.size() == 1 && calls[0].method == SliceMethod::kDecode
                      ? ok_status()
                      : failed_precondition("not one decode call");
  const bool draws = ask.temperature > 0.0f;
  CallTargets targets;
  targets.host_tokens = target.token.as<int32_t>();
  targets.token_source = forward_->argmax_tokens();
  targets.timed = false;
  if (status.ok() && draws) {
    // Its row's ask from the slot's own pinned ask (the slot's last step was waited for), to the
    // device asks' first row (a step with candidates grew them); its token the step before's draw.
    auto* pinned = target.ask.as<kernels::RowCandidatesAsk>();
    *pinned = row_ask(ask.temperature, ask.draw);
    status = cuda_status(cudaMemcpyAsync(candidate_asks_.as<kernels::RowCandidatesAsk>(), pinned,
                                         sizeof(*pinned), cudaMemcpyHostToDevice, stream_.get()),
                         "ahead");
    targets.token_source = &candidate_rows_.as<kernels::RowCandidatesSummary>()->drawn;
    targets.host_lists = target.lists.as<kernels::RowCandidatesSummary>();
  }
  if (status.ok()) {
    RowAsks asks;
    asks.candidates = draws;
    status = run_call(*packed, calls[0], /*copy_logits=*/false, asks, targets);
  }
  if (status.ok()) status = cuda_status(cudaEventRecord(target.done.get(), stream_.get()), "ahead");
  if (!status.ok()) {
    abort_step(*packed);  // what was enqueued runs on; its cell is free again
    return;
  }
  next_ahead_slot_ = 1 - slot;
  ahead_ = AheadStep{session, position, ask, std::move(packed).value(), calls[0], slot, usage};
}

void CudaExecutor::drop_ahead() {
  if (!ahead_.has_value()) return;
  abort_step(ahead_->step);
  ahead_.reset();
  ++stats_.num_steps_ahead_dropped;
}

StatusOr<BatchOutput> CudaExecutor::take_ahead() {
  AheadStep taken = std::move(ahead_).value();
  ahead_.reset();
  BatchOutput output = taken.step.make_output();
  last_logits_ = {};
  // Its token is the one the stream computes last: the step after it can go on right away.
  const TailAsk next = next_ask(taken.ask);
  run_ahead(taken.session, taken.position + 1, next);
  AheadSlot& slot = ahead_slots_[taken.slot];
  const Status synced = cuda_status(cudaEventSynchronize(slot.done.get()), "CudaExecutor step");
  if (!synced.ok()) {
    drop_ahead();
    abort_step(taken.step);
    return synced;
  }
  const int32_t argmax = slot.token.as<int32_t>()[0];
  OutputRow& row = output.outputs[0];
  row.greedy_token = argmax < 0 ? kNoToken : argmax;  // -1: nothing finite
  int32_t token = row.greedy_token;
  if (taken.ask.temperature > 0.0f) {
    row.candidates.emplace(candidates_of(*slot.lists.as<kernels::RowCandidatesSummary>()));
    token = row.candidates->drawn;
  }
  if (!ahead_.has_value()) commit_step();  // else the next step's pack() committed it
  if (token == kNoToken) {
    tail_ = {};
    drop_ahead();  // it ran on no token
  } else {
    tail_ = {taken.session, taken.position + 1, token, next};
  }
  stats_.last_step_device_ms = 0.0;
  ++stats_.num_steps_run_ahead;
  count_step({taken.call});
  return output;
}

CacheUsage CudaExecutor::cache_usage() const {
  return ahead_.has_value() ? ahead_->usage : TableExecutor::cache_usage();
}

std::optional<SessionId> CudaExecutor::open_session() {
  drop_ahead();
  return TableExecutor::open_session();
}

Status CudaExecutor::close_session(SessionId id) {
  drop_ahead();
  return TableExecutor::close_session(id);
}

StatusOr<SessionId> CudaExecutor::clone_session(SessionId src, int32_t upto) {
  drop_ahead();
  return TableExecutor::clone_session(src, upto);
}

StatusOr<int32_t> CudaExecutor::session_length(SessionId id) const {
  if (ahead_.has_value() && ahead_->session == id) return ahead_->position;
  return TableExecutor::session_length(id);
}

Status CudaExecutor::rewind_session(SessionId id, int32_t pos) {
  drop_ahead();
  if (id == tail_.session) tail_ = {};  // its position is gone
  return TableExecutor::rewind_session(id, pos);
}

}  // namespace cellm
