// CudaExecutor's log-probability summaries: the rows that ask (StepInput::num_top_logprobs) are
// summarized on the device by kernels/row_logprobs.cuh after each call's forward, and only the
// summaries (176 bytes a row, against a row of vocab floats) come back to the host.
#include <algorithm>
#include <cstdint>
#include <utility>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_executor.h"
#include "backends/cuda/kernels/row_logprobs.cuh"

namespace cellm {

static_assert(kMaxTopLogprobs <= kernels::kMaxRowTop,
              "the device summary holds fewer top tokens than a row may ask for");

StatusOr<bool> CudaExecutor::prepare_logprobs(const BatchInput& batch, const BatchOutput& output) {
  const bool any =
      std::any_of(output.outputs.begin(), output.outputs.end(), [&](const OutputRow& r) {
        return batch.inputs[static_cast<size_t>(r.input_index)].num_top_logprobs >= 0;
      });
  if (!any) return false;
  const size_t rows = output.outputs.size();
  const size_t ask_bytes = 2 * rows * sizeof(int32_t);
  const size_t row_bytes = rows * sizeof(kernels::RowLogprobsSummary);
  // No copy or kernel of an earlier step is in flight (its execute() synchronized): grow freely.
  for (auto [buffer, bytes] :
       {std::pair{&host_logprob_asks_, ask_bytes}, std::pair{&host_logprob_rows_, row_bytes}}) {
    CELLM_RETURN_IF_ERROR(buffer->grow_to(bytes).with_context("pinned log-probability summaries"));
  }
  const size_t scratch_bytes = kernels::row_logprobs_scratch_bytes(static_cast<int32_t>(rows));
  const bool new_scratch = logprob_scratch_.num_bytes() < scratch_bytes;
  for (auto [buffer, bytes] :
       {std::pair{&logprob_asks_, ask_bytes}, std::pair{&logprob_rows_, row_bytes},
        std::pair{&logprob_scratch_, scratch_bytes}}) {
    CELLM_RETURN_IF_ERROR(buffer->grow_to(bytes).with_context("log-probability summaries"));
  }
  if (new_scratch) {  // the kernel leaves it zeroed after every launch
    CELLM_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(logprob_scratch_.as<uint8_t>(), 0,
                                               logprob_scratch_.num_bytes(), stream_.get()));
  }
  int32_t* asks = host_logprob_asks_.as<int32_t>();  // [2, rows]: num_top, then scored token
  for (size_t i = 0; i < rows; ++i) {
    const StepInput& input = batch.inputs[static_cast<size_t>(output.outputs[i].input_index)];
    asks[i] = input.num_top_logprobs;
    asks[rows + i] = input.scored_token;
  }
  logprob_stride_ = static_cast<int32_t>(rows);
  CELLM_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(logprob_asks_.as<int32_t>(), asks, ask_bytes,
                                             cudaMemcpyHostToDevice, stream_.get()));
  return true;
}

Status CudaExecutor::summarize_rows(int32_t first_kept, int32_t num_kept) {
  kernels::RowLogprobsParams p;
  p.num_rows = num_kept;
  p.vocab = config_.vocab_size;
  p.logits = forward_->logits();  // [num_kept, vocab]: the call's kept rows
  p.stride = config_.vocab_size;
  p.num_top = logprob_asks_.as<int32_t>() + first_kept;
  p.scored = logprob_asks_.as<int32_t>() + logprob_stride_ + first_kept;
  p.out = logprob_rows_.as<kernels::RowLogprobsSummary>() + first_kept;
  // Each call's launch uses the scratch from its start: the one before left it zeroed.
  p.scratch = logprob_scratch_.as<void>();
  p.scratch_bytes = logprob_scratch_.num_bytes();
  CELLM_RETURN_IF_ERROR(kernels::launch_row_logprobs(p, stream_.get()));
  CELLM_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(host_logprob_rows_.as<kernels::RowLogprobsSummary>() + first_kept, p.out,
                      static_cast<size_t>(num_kept) * sizeof(kernels::RowLogprobsSummary),
                      cudaMemcpyDeviceToHost, stream_.get()));
  return ok_status();
}

void CudaExecutor::take_logprobs(const BatchInput& batch, BatchOutput& output) const {
  const auto* summaries = host_logprob_rows_.as<const kernels::RowLogprobsSummary>();
  for (size_t i = 0; i < output.outputs.size(); ++i) {
    OutputRow& row = output.outputs[i];
    if (batch.inputs[static_cast<size_t>(row.input_index)].num_top_logprobs < 0) continue;
    const kernels::RowLogprobsSummary& s = summaries[i];
    RowLogprobs& out = row.logprobs.emplace();
    out.max_logit = s.max_logit;
    out.log_sum_exp = s.log_sum_exp;
    out.scored_logit = s.scored_logit;
    const int32_t num_top = std::clamp(s.num_top, 0, kernels::kMaxRowTop);
    out.top.reserve(static_cast<size_t>(num_top));
    for (int32_t k = 0; k < num_top; ++k) out.top.emplace_back(s.top_ids[k], s.top_logits[k]);
  }
}

}  // namespace cellm
