#include "backends/cpu/executor_setup.h"

#include <string>

#include "batching/step_plan.h"

namespace cellm {

Status validate_program_for_batching(const ProgramSpec& spec, const ModelConfig& config) {
  CELLM_RETURN_IF_ERROR(spec.validate(config).with_context("program"));
  CELLM_RETURN_IF_ERROR(
      validate_slice_params(spec.max_step_tokens, spec.min_prefill_chunk, spec.decode_widths)
          .with_context("program"));
  if (spec.logits_to_keep_mode == LogitsToKeepMode::kLast) {
    return unimplemented(
        "program: logits_to_keep_mode 'last' cannot serve batches (cellm needs "
        "'selected' or 'full')");
  }
  return ok_status();
}

StatusOr<int32_t> resolve_max_session_tokens(int32_t requested, const ProgramSpec& spec) {
  const int32_t resolved = requested == 0 ? spec.max_context_len : requested;
  if (resolved < 1 || resolved > spec.max_context_len) {
    return invalid_argument("max_session_tokens " + std::to_string(requested) + " outside [1, " +
                            std::to_string(spec.max_context_len) +
                            "] (the program's cellm.max_context_len)");
  }
  return resolved;
}

ExecutorLimits executor_limits(const ProgramSpec& spec, const ModelConfig& config,
                               int32_t max_sessions, int32_t max_session_tokens) {
  ExecutorLimits limits;
  limits.max_step_tokens = spec.max_step_tokens;
  limits.min_prefill_chunk = spec.min_prefill_chunk;
  limits.max_sessions = max_sessions;
  limits.max_session_tokens = max_session_tokens > 0 ? max_session_tokens : spec.max_context_len;
  limits.vocab_size = config.vocab_size;
  return limits;
}

SessionTableConfig session_table_config(const ExecutorLimits& limits) {
  SessionTableConfig config;
  config.max_sessions = limits.max_sessions;
  config.max_session_tokens = limits.max_session_tokens;
  config.vocab_size = limits.vocab_size;
  return config;
}

}  // namespace cellm
