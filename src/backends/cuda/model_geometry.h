// model_geometry: ModelConfigs of well-known models by name, for programs with random weights
// (`cellm bench --geometry`, tests): the shapes, rope and attention layout of the real model,
// none of its values. No CUDA types. Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "model/model_config.h"
#include "program/program_spec.h"

namespace cellm {

// "llama-3.1-8b", "qwen2.5-7b", "qwen3-8b" (per-head q/k norms), "llama-3.2-1b", "phi-3.5-mini"
// (phi3: head size 96, LongRoPE), "gemma-3-4b" (gemma3: heads of 256, post norms, GeGLU, five
// windowed layers in six), "gemma-2-9b" (gemma2: the same parts, every other layer windowed, scores
// and logits soft-capped at 50 and 30), and small ones for tests: "tiny" (llama, 4 layers, hidden
// 512, vocab 4096), "tiny-qwen" (qwen2 with q/k/v biases), "tiny-gemma" (gemma3, heads of 256, a
// window of 16 on every other layer) and "tiny-gemma2" (its gemma2 twin). NotFound lists the names.
StatusOr<ModelConfig> named_geometry(std::string_view name);
std::vector<std::string> geometry_names();

// A program for a random model of `config`: ProgramSpec::defaults_for with `max_context_len`
// positions, W, m and decode widths as given, and `kv_dtype` cells.
ProgramSpec random_program(const ModelConfig& config, int32_t max_context_len,
                           int32_t max_step_tokens, int32_t min_prefill_chunk,
                           std::vector<int32_t> decode_widths, KvDtype kv_dtype, int32_t max_cells);

}  // namespace cellm
