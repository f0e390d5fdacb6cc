// The checks and limits every executor derives from a program: whether a ProgramSpec can serve
// batches on its model, how many positions a session may hold, and the ExecutorLimits the
// scheduler budgets with.
//
// Shared by CpuExecutor and CudaExecutor (the CUDA backend links the CPU backend), so that a
// program means the same thing on each. Knows programs and batching's plain structs; no
// tensors, no sessions. Thread-safety: pure functions.
#pragma once

#include <cstdint>

#include "batching/executor.h"
#include "batching/session_table.h"
#include "core/status.h"
#include "model/model_config.h"
#include "program/program_spec.h"

namespace cellm {

// OK when `spec` can serve batches on `config`: ProgramSpec::validate, a slice plan plan_slices
// accepts (W, m, decode widths) and a logits_to_keep mode batching can use ('selected' or
// 'full'). Messages start with "program: " and name the key.
Status validate_program_for_batching(const ProgramSpec& spec, const ModelConfig& config);

// The positions one session may hold: `requested`, or the program's context when it is 0.
// InvalidArgument outside [1, cellm.max_context_len].
StatusOr<int32_t> resolve_max_session_tokens(int32_t requested, const ProgramSpec& spec);

// The limits an executor of this program runs under (max_session_tokens 0 = the context).
ExecutorLimits executor_limits(const ProgramSpec& spec, const ModelConfig& config,
                               int32_t max_sessions, int32_t max_session_tokens);

// The SessionTable's configuration for those limits.
SessionTableConfig session_table_config(const ExecutorLimits& limits);

}  // namespace cellm
