#include "backends/cpu/cpu_executor.h"

#include <span>
#include <string>
#include <utility>

#include "core/check.h"

namespace cellm {

CpuExecutor::CpuExecutor(const ModelConfig& config, const ModelWeights& weights,
                         const ProgramSpec& spec, const CpuExecutorOptions& options)
    : config_(config), weights_(weights), spec_(spec), options_(options) {}

CpuExecutor::~CpuExecutor() = default;

Status CpuExecutor::initialize() {
  if (initialized_) return failed_precondition("CpuExecutor::initialize called twice");
  CELLM_RETURN_IF_ERROR(spec_.validate(config_).with_context("program"));
  CELLM_RETURN_IF_ERROR(
      validate_slice_params(spec_.max_step_tokens, spec_.min_prefill_chunk, spec_.decode_widths)
          .with_context("program"));
  if (spec_.logits_to_keep_mode == LogitsToKeepMode::kLast) {
    return unimplemented(
        "program: logits_to_keep_mode 'last' cannot serve batches (cellm needs "
        "'selected' or 'full')");
  }
  if (options_.max_session_tokens == 0) options_.max_session_tokens = spec_.max_context_len;
  if (options_.max_session_tokens < 0 || options_.max_session_tokens > spec_.max_context_len) {
    return invalid_argument("max_session_tokens " + std::to_string(options_.max_session_tokens) +
                            " outside [1, " + std::to_string(spec_.max_context_len) +
                            "] (the program's cellm.max_context_len)");
  }
  if (options_.num_threads < 0) {
    return invalid_argument("num_threads " + std::to_string(options_.num_threads) + " is negative");
  }
  SessionTableConfig table_config;
  table_config.max_sessions = options_.max_sessions;
  table_config.max_session_tokens = options_.max_session_tokens;
  table_config.vocab_size = config_.vocab_size;
  CELLM_RETURN_IF_ERROR(validate_session_table_config(table_config));

  CpuKvGeometry geometry;
  geometry.num_layers = config_.num_layers;
  geometry.num_kv_heads = config_.num_kv_heads;
  geometry.head_dim = config_.head_dim;
  geometry.value_head_dim = config_.value_head_dim;
  geometry.dtype = spec_.kv_dtype;
  geometry.max_cells = spec_.kv_max_cells;

  pool_ = std::make_unique<ThreadPool>(static_cast<size_t>(options_.num_threads));
  cache_ = std::make_unique<CellCache>(spec_.kv_max_cells);
  table_ = std::make_unique<SessionTable>(*cache_, table_config);
  kv_ = std::make_unique<CpuKvStorage>(geometry);
  forward_ = std::make_unique<CpuForward>(config_, weights_, pool_.get());
  initialized_ = true;
  return ok_status();
}

ExecutorLimits CpuExecutor::limits() const {
  ExecutorLimits limits;
  limits.max_step_tokens = spec_.max_step_tokens;
  limits.min_prefill_chunk = spec_.min_prefill_chunk;
  limits.max_sessions = options_.max_sessions;
  limits.max_session_tokens =
      options_.max_session_tokens > 0 ? options_.max_session_tokens : spec_.max_context_len;
  limits.vocab_size = config_.vocab_size;
  return limits;
}

CacheUsage CpuExecutor::cache_usage() const {
  CELLM_CHECK(initialized_) << "CpuExecutor used before initialize()";
  return {cache_->max_cells(), cache_->num_free(), cache_->high_water()};
}

uint64_t CpuExecutor::kv_storage_bytes() const {
  CELLM_CHECK(initialized_) << "CpuExecutor used before initialize()";
  return kv_->num_bytes();
}

std::optional<SessionId> CpuExecutor::open_session() {
  CELLM_CHECK(initialized_) << "CpuExecutor used before initialize()";
  return table_->open();
}

Status CpuExecutor::close_session(SessionId id) {
  CELLM_CHECK(initialized_) << "CpuExecutor used before initialize()";
  return table_->close(id);
}

StatusOr<SessionId> CpuExecutor::clone_session(SessionId src, int32_t upto) {
  CELLM_CHECK(initialized_) << "CpuExecutor used before initialize()";
  return table_->clone(src, upto);
}

StatusOr<int32_t> CpuExecutor::session_length(SessionId id) const {
  CELLM_CHECK(initialized_) << "CpuExecutor used before initialize()";
  return table_->length(id);
}

Status CpuExecutor::rewind_session(SessionId id, int32_t pos) {
  CELLM_CHECK(initialized_) << "CpuExecutor used before initialize()";
  return table_->rewind(id, pos);
}

StatusOr<BatchOutput> CpuExecutor::execute(const BatchInput& batch, bool return_logits) {
  if (!initialized_) return failed_precondition("CpuExecutor::execute before initialize()");
  CELLM_ASSIGN_OR_RETURN(PackedStep step, table_->pack(batch));
  BatchOutput output = step.make_output();
  if (return_logits) {
    output.vocab_size = config_.vocab_size;
    output.logits.assign(output.outputs.size() * static_cast<size_t>(config_.vocab_size), 0.0f);
  }
  const std::vector<SliceCall> calls = plan_slices(step.num_tokens, spec_.max_step_tokens,
                                                   spec_.min_prefill_chunk, spec_.decode_widths);
  for (const SliceCall& call : calls) {
    const Status status = run_call(step, call, output);
    if (!status.ok()) {
      if (cache_->has_declared_step()) cache_->cancel_step();
      table_->rollback(step);
      return status.with_context(std::string(slice_method_name(call.method)) + " call at token " +
                                 std::to_string(call.begin));
    }
  }
  ++stats_.num_steps;
  for (const SliceCall& call : calls) {
    ++(call.method == SliceMethod::kPrefill ? stats_.num_prefill_calls : stats_.num_decode_calls);
    stats_.num_tokens += call.num_tokens;
    stats_.num_padding_rows += call.width - call.num_tokens;
  }
  return output;
}

Status CpuExecutor::run_call(const PackedStep& step, const SliceCall& call, BatchOutput& output) {
  const int32_t begin = call.begin;
  const int32_t num_tokens = call.num_tokens;
  const auto seqs = std::span<const SeqId>(step.seq_ids).subspan(begin, num_tokens);
  const auto positions = std::span<const int32_t>(step.positions).subspan(begin, num_tokens);
  CELLM_ASSIGN_OR_RETURN(const bool admitted, cache_->declare_step(seqs, positions));
  if (!admitted) {
    return internal_error("the cell pool refused " + std::to_string(num_tokens) +
                          " tokens that SessionTable::pack admitted");
  }
  cache_->place(&cell_step_);
  CELLM_RETURN_IF_ERROR(kv_->reserve_rows(cache_->high_water()));
  const RowSelection rows = step.select_rows(begin, begin + num_tokens);
  float* logits = output.logits.empty()
                      ? nullptr
                      : output.logits.data() + static_cast<size_t>(rows.first_kept) *
                                                   static_cast<size_t>(output.vocab_size);
  forward_->run(std::span<const int32_t>(step.tokens).subspan(begin, num_tokens), cell_step_,
                rows.local_rows, *kv_, logits);
  return ok_status();
}

}  // namespace cellm
