#include "backends/cpu/cpu_executor.h"

#include <span>
#include <string>
#include <utility>

#include "backends/cpu/executor_setup.h"
#include "core/check.h"

namespace cellm {

CpuExecutor::CpuExecutor(const ModelConfig& config, const ModelWeights& weights,
                         const ProgramSpec& spec, const CpuExecutorOptions& options)
    : TableExecutor("CpuExecutor"),
      config_(config),
      weights_(weights),
      spec_(spec),
      options_(options) {}

CpuExecutor::~CpuExecutor() = default;

Status CpuExecutor::initialize() {
  if (initialized_) return failed_precondition("CpuExecutor::initialize called twice");
  CELLM_RETURN_IF_ERROR(validate_program_for_batching(spec_, config_));
  CELLM_ASSIGN_OR_RETURN(options_.max_session_tokens,
                         resolve_max_session_tokens(options_.max_session_tokens, spec_));
  if (options_.num_threads < 0 ||
      static_cast<size_t>(options_.num_threads) > ThreadPool::kMaxThreads) {
    return invalid_argument("num_threads " + std::to_string(options_.num_threads) +
                            " is outside [0, " + std::to_string(ThreadPool::kMaxThreads) + "]");
  }
  const SessionTableConfig table_config = session_table_config(limits());
  CELLM_RETURN_IF_ERROR(validate_session_table_config(table_config));

  CpuKvGeometry geometry;
  geometry.num_layers = config_.num_layers;
  geometry.num_kv_heads = config_.num_kv_heads;
  geometry.head_dim = config_.head_dim;
  geometry.value_head_dim = config_.value_head_dim;
  geometry.dtype = spec_.kv_dtype;
  geometry.max_cells = spec_.kv_max_cells;

  pool_ = std::make_unique<ThreadPool>(static_cast<size_t>(options_.num_threads));
  create_sessions(spec_.kv_max_cells, table_config);
  kv_ = std::make_unique<CpuKvStorage>(geometry);
  forward_ = std::make_unique<CpuForward>(config_, weights_, pool_.get());
  initialized_ = true;
  return ok_status();
}

ExecutorLimits CpuExecutor::limits() const {
  return executor_limits(spec_, config_, options_.max_sessions, options_.max_session_tokens);
}

uint64_t CpuExecutor::kv_storage_bytes() const {
  CELLM_CHECK(initialized_) << "CpuExecutor used before initialize()";
  return kv_->num_bytes();
}

StatusOr<BatchOutput> CpuExecutor::execute(const BatchInput& batch, bool return_logits) {
  if (!initialized_) return failed_precondition("CpuExecutor::execute before initialize()");
  CELLM_ASSIGN_OR_RETURN(PackedStep step, table().pack(batch));
  BatchOutput output = step.make_output();
  float* logits = nullptr;  // [outputs, vocab] f32 in logits_, when asked
  if (return_logits) {
    logits_.assign(output.outputs.size() * static_cast<size_t>(config_.vocab_size), 0.0f);
    logits = logits_.data();
  }
  const std::vector<SliceCall> calls = plan_slices(step.num_tokens, spec_.max_step_tokens,
                                                   spec_.min_prefill_chunk, spec_.decode_widths);
  for (const SliceCall& call : calls) {
    const Status status = run_call(step, call, logits);
    if (!status.ok()) {
      abort_step(step);
      return status.with_context(std::string(slice_method_name(call.method)) + " call at token " +
                                 std::to_string(call.begin));
    }
  }
  commit_step();
  if (return_logits) {
    output.vocab_size = config_.vocab_size;
    output.logits = logits_;
  }
  ++stats_.num_steps;
  for (const SliceCall& call : calls) {
    ++(call.method == SliceMethod::kPrefill ? stats_.num_prefill_calls : stats_.num_decode_calls);
    stats_.num_tokens += call.num_tokens;
    stats_.num_padding_rows += call.width - call.num_tokens;
  }
  return output;
}

Status CpuExecutor::run_call(const PackedStep& step, const SliceCall& call, float* logits) {
  const int64_t call_index = num_calls_++;
  CELLM_RETURN_IF_ERROR(place_call(step, call, &cell_step_));
  CELLM_RETURN_IF_ERROR(kv_->reserve_rows(cache().high_water()));
  const RowSelection rows = step.select_rows(call.begin, call.begin + call.num_tokens);
  float* rows_out = logits == nullptr ? nullptr
                                      : logits + static_cast<size_t>(rows.first_kept) *
                                                     static_cast<size_t>(config_.vocab_size);
  forward_->run(std::span<const int32_t>(step.tokens).subspan(call.begin, call.num_tokens),
                cell_step_, rows.local_rows, *kv_, rows_out);
  if (options_.after_call_for_test) return options_.after_call_for_test(call_index);
  return ok_status();
}

}  // namespace cellm
