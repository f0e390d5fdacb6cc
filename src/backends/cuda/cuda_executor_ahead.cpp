// CudaExecutor's run-ahead (CudaExecutorOptions::run_ahead): a batch-1 greedy session's next step
// enqueued before the current one is waited for, and the session verbs that must give it back
// first.
#include <span>
#include <vector>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_executor.h"

namespace cellm {

bool CudaExecutor::follows_greedy(const BatchInput& batch, bool return_logits) const {
  if (!options_.run_ahead || !options_.device_argmax || !replay_graphs_ || copy_logits_ ||
      return_logits || batch.keep_logits || batch.inputs.size() != 1) {
    return false;
  }
  const StepInput& input = batch.inputs[0];
  // A row summarized for log-probabilities or listing candidates is not what the step run ahead
  // computes.
  return input.wants_output && input.num_top_logprobs < 0 && input.candidates_temperature <= 0.0f &&
         input.end - input.begin == 1 && input.session == greedy_tail_.session &&
         input.start_pos + input.begin == greedy_tail_.position &&
         input.tokens[static_cast<size_t>(input.begin)] == greedy_tail_.token &&
         (!ahead_.has_value() || ahead_->position == greedy_tail_.position);
}

void CudaExecutor::note_greedy(const BatchInput& batch, const BatchOutput& output) {
  greedy_tail_ = {};
  if (batch.inputs.size() != 1 || output.outputs.size() != 1) return;
  const StepInput& input = batch.inputs[0];
  if (output.outputs[0].greedy_token == kNoToken) return;
  greedy_tail_ = {input.session, input.start_pos + input.end, output.outputs[0].greedy_token};
}

void CudaExecutor::run_ahead(SessionId session, int32_t position) {
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
  if (status.ok()) {
    status = run_call(*packed, calls[0], /*copy_logits=*/false, /*asks=*/{},
                      target.token.as<int32_t>(), forward_->argmax_tokens(), /*timed=*/false);
  }
  if (status.ok()) status = cuda_status(cudaEventRecord(target.done.get(), stream_.get()), "ahead");
  if (!status.ok()) {
    abort_step(*packed);  // what was enqueued runs on; its cell is free again
    return;
  }
  next_ahead_slot_ = 1 - slot;
  ahead_ = AheadStep{session, position, std::move(packed).value(), calls[0], slot, usage};
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
  // Its token is the argmax the stream computes last: the step after it can go on right away.
  run_ahead(taken.session, taken.position + 1);
  AheadSlot& slot = ahead_slots_[taken.slot];
  const Status synced = cuda_status(cudaEventSynchronize(slot.done.get()), "CudaExecutor step");
  if (!synced.ok()) {
    drop_ahead();
    abort_step(taken.step);
    return synced;
  }
  const int32_t token = slot.token.as<int32_t>()[0];
  output.outputs[0].greedy_token = token < 0 ? kNoToken : token;  // -1: nothing finite
  if (!ahead_.has_value()) commit_step();  // else the next step's pack() committed it
  if (token < 0) {
    greedy_tail_ = {};
    drop_ahead();  // it ran on no token
  } else {
    greedy_tail_ = {taken.session, taken.position + 1, token};
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
  if (id == greedy_tail_.session) greedy_tail_ = {};  // its position is gone
  return TableExecutor::rewind_session(id, pos);
}

}  // namespace cellm
