// CudaExecutor's sampling candidates: the rows that ask (StepInput::candidates_temperature > 0)
// are listed on the device by kernels/row_candidates.cuh after each call's forward — their best
// kSamplingCandidates tokens and the softmax normalizer at their temperature — and only the lists
// (280 bytes a row) come back, for the sampler to draw from without reading the row. A row whose
// input enables StepInput::candidates_draw gets its token drawn on the device too
// (RowCandidates::drawn), which a step run ahead starts from (cuda_executor_ahead.cpp); where the
// list leaves it undecided, kernels/row_draw.cuh draws it from the whole row (draws_rows()).
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <utility>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_executor.h"
#include "backends/cuda/kernels/row_candidates.cuh"
#include "backends/cuda/kernels/row_draw.cuh"

namespace cellm {

kernels::RowCandidatesAsk CudaExecutor::row_ask(float temperature, const CandidatesDraw& draw) {
  kernels::RowCandidatesAsk ask;
  ask.temperature = temperature;
  ask.draw = draw.enabled ? 1 : 0;
  ask.cuts = draw.cuts;
  ask.seed = draw.seed;
  ask.position = draw.position;
  return ask;
}

static_assert(kSamplingCandidates == kernels::kMaxCandidates,
              "the device lists as many candidates as the sampler reads");

StatusOr<bool> CudaExecutor::prepare_candidates(const BatchInput& batch,
                                                const BatchOutput& output) {
  const bool any =
      std::any_of(output.outputs.begin(), output.outputs.end(), [&](const OutputRow& r) {
        return batch.inputs[static_cast<size_t>(r.input_index)].candidates_temperature > 0.0f;
      });
  if (!any) return false;
  const size_t rows = output.outputs.size();
  const size_t ask_bytes = rows * sizeof(kernels::RowCandidatesAsk);
  const size_t row_bytes = rows * sizeof(kernels::RowCandidatesSummary);
  // No copy or kernel of an earlier step is in flight (its execute() synchronized): grow freely.
  for (auto [buffer, bytes] :
       {std::pair{&host_candidate_asks_, ask_bytes}, std::pair{&host_candidate_rows_, row_bytes}}) {
    CELLM_RETURN_IF_ERROR(buffer->grow_to(bytes).with_context("pinned sampling candidates"));
  }
  const size_t scratch_bytes = kernels::row_candidates_scratch_bytes(static_cast<int32_t>(rows));
  const bool new_scratch = candidate_scratch_.num_bytes() < scratch_bytes;
  for (auto [buffer, bytes] :
       {std::pair{&candidate_asks_, ask_bytes}, std::pair{&candidate_rows_, row_bytes},
        std::pair{&candidate_scratch_, scratch_bytes}}) {
    CELLM_RETURN_IF_ERROR(buffer->grow_to(bytes).with_context("sampling candidates"));
  }
  if (new_scratch) {  // the kernel leaves it zeroed after every launch
    CELLM_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(candidate_scratch_.as<uint8_t>(), 0,
                                               candidate_scratch_.num_bytes(), stream_.get()));
  }
  auto* asks = host_candidate_asks_.as<kernels::RowCandidatesAsk>();  // temperature 0: none
  for (size_t i = 0; i < rows; ++i) {
    const StepInput& input = batch.inputs[static_cast<size_t>(output.outputs[i].input_index)];
    asks[i] = row_ask(input.candidates_temperature, input.candidates_draw);
  }
  CELLM_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(candidate_asks_.as<kernels::RowCandidatesAsk>(), asks,
                                             ask_bytes, cudaMemcpyHostToDevice, stream_.get()));
  return true;
}

Status CudaExecutor::list_candidates(int32_t first_kept, int32_t num_kept,
                                     kernels::RowCandidatesSummary* host_lists) {
  kernels::RowCandidatesParams p;
  p.num_rows = num_kept;
  p.vocab = config_.vocab_size;
  p.logits = forward_->logits();  // [num_kept, vocab]: the call's kept rows
  p.stride = config_.vocab_size;
  p.asks = candidate_asks_.as<kernels::RowCandidatesAsk>() + first_kept;
  p.out = candidate_rows_.as<kernels::RowCandidatesSummary>() + first_kept;
  // Each call's launch uses the scratch from its start: the one before left it zeroed. Rows are
  // split over several blocks (one block alone reads a 128K row at one SM's rate) unless
  // CELLM_CUDA_CANDIDATES_SPLIT=0.
  static const bool split = [] {
    const char* value = std::getenv("CELLM_CUDA_CANDIDATES_SPLIT");
    return value == nullptr || std::string(value) != "0";
  }();
  if (split) {
    p.scratch = candidate_scratch_.as<void>();
    p.scratch_bytes = candidate_scratch_.num_bytes();
  }
  CELLM_RETURN_IF_ERROR(kernels::launch_row_candidates(p, stream_.get()));
  if (draws_rows()) {  // the rows the lists left undecided; the others' clusters leave at once
    kernels::RowDrawParams d;
    d.num_rows = num_kept;
    d.vocab = config_.vocab_size;
    d.logits = p.logits;
    d.stride = p.stride;
    d.asks = p.asks;
    d.summaries = p.out;
    CELLM_RETURN_IF_ERROR(kernels::launch_row_draw(d, stream_.get()));
  }
  CELLM_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(host_lists + first_kept, p.out,
                      static_cast<size_t>(num_kept) * sizeof(kernels::RowCandidatesSummary),
                      cudaMemcpyDeviceToHost, stream_.get()));
  return ok_status();
}

void CudaExecutor::take_candidates(const BatchInput& batch, BatchOutput& output) const {
  const auto* lists = host_candidate_rows_.as<const kernels::RowCandidatesSummary>();
  for (size_t i = 0; i < output.outputs.size(); ++i) {
    OutputRow& row = output.outputs[i];
    if (!(batch.inputs[static_cast<size_t>(row.input_index)].candidates_temperature > 0.0f)) {
      continue;
    }
    row.candidates.emplace(candidates_of(lists[i]));
  }
}

bool CudaExecutor::draws_rows() const {
  return options_.row_draws && config_.vocab_size <= kernels::kRowDrawMaxVocab;
}

RowCandidates CudaExecutor::candidates_of(const kernels::RowCandidatesSummary& s) {
  RowCandidates out;
  out.max_logit = s.max_logit;
  out.temperature = s.temperature;
  out.total = s.total;
  const int32_t num = std::clamp(s.num, 0, kernels::kMaxCandidates);
  out.top.reserve(static_cast<size_t>(num));
  for (int32_t k = 0; k < num; ++k) out.top.emplace_back(s.ids[k], s.logits[k]);
  // The device's draw from the list is one of the listed tokens (anything else is not a draw).
  if (s.drawn_from_row == 1) {
    out.drawn_from_row = s.drawn >= 0;
    out.drawn = s.drawn >= 0 ? s.drawn : kNoToken;
    out.drawn_logit = s.drawn_logit;
    return out;
  }
  const bool listed = std::any_of(s.ids, s.ids + num, [&](int32_t id) { return id == s.drawn; });
  out.drawn = s.drawn >= 0 && listed ? s.drawn : kNoToken;
  return out;
}

}  // namespace cellm
