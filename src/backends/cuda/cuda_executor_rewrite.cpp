// CudaExecutor's row rewrites: a candidates row whose sampler has bias or penalties
// (StepInput::rewrite) is rewritten in place on the device by kernels/row_rewrite.cuh after the
// call's log-probability summaries and before its candidates are listed and drawn, so that the
// list, its total and the draw are of the scores the session's Sampler::sample() draws from and
// the row never travels to the host (rewrites_rows()). Sessions asking this never run ahead (the
// step after needs the rewrite of a context that holds the token not yet drawn).
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_executor.h"
#include "backends/cuda/kernels/row_rewrite.cuh"

namespace cellm {
namespace {

constexpr size_t kAlignBytes = 16;

size_t aligned(size_t bytes) { return (bytes + kAlignBytes - 1) / kAlignBytes * kAlignBytes; }

}  // namespace

StatusOr<bool> CudaExecutor::prepare_rewrites(const BatchInput& batch, const BatchOutput& output) {
  const size_t rows = output.outputs.size();
  const auto input_of = [&](size_t i) -> const StepInput& {
    return batch.inputs[static_cast<size_t>(output.outputs[i].input_index)];
  };
  const auto rewritten = [&](const StepInput& input) {
    return input.candidates_temperature > 0.0f && input.rewrite.enabled;
  };
  rewrite_begin_.assign(rows + 1, 0);
  size_t num_entries = 0;
  size_t num_biases = 0;
  size_t num_rewritten = 0;
  for (size_t i = 0; i < rows; ++i) {
    const StepInput& input = input_of(i);
    if (rewritten(input)) {
      if (!rewrites_rows()) {
        return invalid_argument(
            "a row asks to be rewritten for its sampler (StepInput::rewrite), and this executor "
            "rewrites no rows");
      }
      num_entries += input.rewrite.tokens.size();
      num_biases += input.rewrite.biases.size();
      ++num_rewritten;
    }
    rewrite_begin_[i + 1] = static_cast<int32_t>(num_entries);
  }
  if (num_rewritten == 0) return false;
  rewrite_biases_offset_ = aligned(num_entries * sizeof(kernels::RowRewriteEntry));
  rewrite_penalties_offset_ =
      rewrite_biases_offset_ + aligned(std::max<size_t>(num_biases, 1) * sizeof(float));
  const size_t bytes = rewrite_penalties_offset_ + num_rewritten * sizeof(PenaltyParams);
  // No copy or kernel of an earlier step is in flight (its execute() synchronized): grow freely.
  CELLM_RETURN_IF_ERROR(host_rewrites_.grow_to(bytes).with_context("pinned row rewrites"));
  CELLM_RETURN_IF_ERROR(rewrites_.grow_to(bytes).with_context("row rewrites"));
  auto* host = host_rewrites_.as<uint8_t>();
  auto* entries = reinterpret_cast<kernels::RowRewriteEntry*>(host);
  auto* biases = reinterpret_cast<float*>(host + rewrite_biases_offset_);
  auto* penalties = reinterpret_cast<PenaltyParams*>(host + rewrite_penalties_offset_);
  int32_t bias_base = 0;
  int32_t row_index = 0;  // into penalties
  for (size_t i = 0; i < rows; ++i) {
    const StepInput& input = input_of(i);
    if (!rewritten(input)) continue;
    const RowRewrite& rewrite = input.rewrite;
    for (const TokenRewrite& t : rewrite.tokens) {
      *entries++ = {static_cast<int32_t>(i),  t.token,      t.count,
                    bias_base + t.first_bias, t.num_biases, row_index};
    }
    if (!rewrite.biases.empty()) {
      std::memcpy(biases + bias_base, rewrite.biases.data(), rewrite.biases.size_bytes());
    }
    bias_base += static_cast<int32_t>(rewrite.biases.size());
    penalties[row_index++] = rewrite.penalties;
  }
  CELLM_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(rewrites_.as<uint8_t>(), host, bytes, cudaMemcpyHostToDevice, stream_.get()));
  return true;
}

Status CudaExecutor::rewrite_rows(int32_t first_kept, int32_t num_kept) {
  const int32_t first_entry = rewrite_begin_[static_cast<size_t>(first_kept)];
  const int32_t end_entry = rewrite_begin_[static_cast<size_t>(first_kept + num_kept)];
  if (end_entry == first_entry) return ok_status();
  const auto* device = rewrites_.as<uint8_t>();
  kernels::RowRewriteParams p;
  p.num_entries = end_entry - first_entry;
  p.entries = reinterpret_cast<const kernels::RowRewriteEntry*>(device) + first_entry;
  p.biases = reinterpret_cast<const float*>(device + rewrite_biases_offset_);
  p.penalties = reinterpret_cast<const PenaltyParams*>(device + rewrite_penalties_offset_);
  p.first_row = first_kept;
  p.num_rows = num_kept;
  p.vocab = config_.vocab_size;
  p.logits = forward_->mutable_logits();  // [num_kept, vocab]: the call's kept rows
  p.stride = config_.vocab_size;
  return kernels::launch_row_rewrite(p, stream_.get());
}

}  // namespace cellm
