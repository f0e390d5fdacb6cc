// HfConfig: a Hugging Face `config.json` for the architectures cellm runs (LlamaForCausalLM,
// MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, Phi3ForCausalLM, Gemma2ForCausalLM,
// Gemma3ForCausalLM),
// and the GGUF model keys it becomes.
//
// Required keys: model_type (or architectures), hidden_size, intermediate_size,
// num_hidden_layers, num_attention_heads, vocab_size. Optional keys take transformers' defaults:
// num_key_value_heads = heads, head_dim = hidden / heads (qwen3: 128), rms_norm_eps 1e-6,
// rope_theta 10000, max_position_embeddings 2048 (qwen3: 32768), tie_word_embeddings false,
// no rope scaling, no sliding window. `rope_parameters` (transformers 5) is read like
// rope_theta + rope_scaling. Rope scaling: "default", "linear" (GGUF `rope.scaling.*` keys) and
// "llama3" (the rope_freqs tensor: llama3_rope_factors); others are Unimplemented. For llama3 the
// original context is rope_scaling's own `original_max_position_embeddings`, as transformers
// reads it; when rope_scaling lacks it, the top-level key (all llama.cpp's converter reads), else
// 8192. The arch test models carry 64 in both places, so either reading gives their reference
// factors [1, 2.4422593, 8, ...]; the factors equal llama.cpp's converter's bit for bit.
// phi3 also takes "longrope" (and its old name "su"): `short_factor` and `long_factor`, one
// positive number per rotary pair (GGUF tensors rope_factors_short / rope_factors_long), and an
// attention factor — `attention_factor`, else from `factor`, else from max_position_embeddings /
// original_max_position_embeddings (default 4096) as transformers computes it:
// sqrt(1 + ln f / ln original), 1 for f <= 1 — and `partial_rotary_factor` (rotary dims
// int(head_dim · factor), even).
// gemma3 (model_type gemma3_text) takes Gemma3TextConfig's defaults (the counts of Gemma 3 2B's
// text shape: hidden 2304, ffn 9216, 26 layers, 8 heads over 4 kv heads, vocab 262208; head_dim
// 256, query_pre_attn_scalar 256, sliding_window 4096, sliding_window_pattern 6, rope_theta 1e6,
// rope_local_base_freq 10000, max_position_embeddings 131072, tied embeddings); `layer_types`
// (transformers 5) must follow one pattern (every p-th layer global); transformers 5's
// `rope_parameters` per layer type ({full_attention: ..., sliding_attention: ...}) are read like
// rope_theta + rope_scaling and rope_local_base_freq; hidden_activation must be
// gelu_pytorch_tanh, and logit soft-capping is Unimplemented there. gemma2 takes
// Gemma2Config's defaults (the same counts, vocab 256000; rope_theta 10000 on every layer,
// max_position_embeddings 8192, sliding_window_pattern 2 — the even layers windowed —,
// attn_logit_softcapping 50 and final_logit_softcapping 30; a null cap — no soft-capping, which
// GGUF cannot say — and rope scaling are Unimplemented). A
// Gemma3ForConditionalGeneration config (model_type gemma3: Gemma 3 4B, 12B, 27B) gives its
// `text_config`, with the top level's bos / eos ids and name where the text config lacks them.
// Sliding windows: mistral's and phi3's `sliding_window` for every layer; qwen2/qwen3 only with
// `use_sliding_window`, for layers ≥ `max_window_layers` (`layer_types` overrides); a window that
// is not the same on every layer is Unimplemented (GGUF has one key for it). Biases beyond qwen2's
// q/k/v (`attention_bias` on o_proj, `mlp_bias`) are Unimplemented. GPTQ settings come from
// `quantization_config` (or quantize_config.json, read by the caller): gptq_config.h.
// Counts must be integers in [1, 2^30]; floats (rms_norm_eps, rope_theta, rope factors) numbers
// that are finite and > 0 as a float. Errors are one line that starts with the file's name and
// names the key (model/hf_json.h: nesting deeper than 64 is refused before it is walked).
// Thread-safety: plain data.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "gguf/gguf_file.h"
#include "model/model_config.h"

namespace cellm {

struct HfRopeScaling {
  std::string type;  // "" (none), "linear", "llama3" or "longrope"
  float factor = 1.0f;
  float low_freq_factor = 1.0f;   // llama3
  float high_freq_factor = 4.0f;  // llama3
  // llama3 and longrope: original_max_position_embeddings (default 8192; phi3 4096)
  int32_t original_context_length = 8192;
  std::vector<float> short_factors;  // longrope: [rotary dims / 2] divisors
  std::vector<float> long_factors;   // longrope: [rotary dims / 2]
  float attention_factor = 1.0f;     // longrope: cos and sin multiplied by this
};

struct HfConfig {
  std::string model_type;  // "llama", "mistral", "qwen2", "qwen3", "phi3", "gemma2", "gemma3_text"
  Architecture architecture = Architecture::kLlama;
  int32_t hidden_size = 0;
  int32_t intermediate_size = 0;
  int32_t num_layers = 0;
  int32_t num_heads = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t num_rotary_dims = 0;  // head_dim, or int(head_dim · partial_rotary_factor) (phi3)
  int32_t vocab_size = 0;
  int32_t max_position_embeddings = 0;
  float rms_norm_eps = 1e-6f;
  float rope_theta = 10000.0f;
  HfRopeScaling rope_scaling;
  bool tie_word_embeddings = false;
  int32_t sliding_window = 0;  // 0 = full attention on every layer
  // gemma2/3: layer l is global when (l + 1) % sliding_window_pattern == 0, windowed otherwise
  // (0: the window, if any, is on every layer).
  int32_t sliding_window_pattern = 0;
  float rope_local_base_freq = 10000.0f;  // gemma3: the windowed layers' rope base
  float query_pre_attn_scalar = 0.0f;     // gemma2/3: scores scaled by 1 / sqrt(this); 0 = head_dim
  // gemma2: scores and final logits soft-capped, x → cap · tanh(x / cap); 0 = not capped.
  float attn_logit_softcap = 0.0f;
  float final_logit_softcap = 0.0f;
  FfnActivation activation = FfnActivation::kSilu;
  // The text model of a Gemma3ForConditionalGeneration checkpoint (its `text_config`; its weights
  // under language_model.model. or model.language_model., the vision tower's left out).
  bool text_of_multimodal = false;
  std::optional<int32_t> bos_token_id;
  std::vector<int32_t> eos_token_ids;  // an int or a list in config.json
  std::string name;                    // `_name_or_path` or the directory name

  // Parses config.json text; `where` (the path) prefixes errors.
  static StatusOr<HfConfig> parse(std::string_view json_text, std::string_view where);
  // Reads `<dir>/config.json`.
  static StatusOr<HfConfig> from_dir(const std::string& dir);

  // True when llama.cpp's llama arch runs it (llama, mistral): Q/K rows are permuted and
  // `general.architecture` is "llama".
  bool uses_llama_layout() const;
  std::string_view gguf_architecture() const;  // "llama", "qwen2", "qwen3", "phi3", "gemma2", ...

  // The model keys a GGUF model of this config carries (general.architecture, <arch>.*), as
  // llama.cpp's converter writes them, plus key/value lengths and rope dimensions always.
  std::vector<std::pair<std::string, GgufValue>> gguf_metadata() const;

  // llama3 only: one divisor per rotary pair, [head_dim / 2]. parse() refuses every value it
  // divides by that is not > 0 and low_freq_factor >= high_freq_factor, so the factors are finite
  // and between 1 and `factor`; HfCheckpoint computes them after the tensors' shape checks.
  std::vector<float> llama3_rope_factors() const;
};

}  // namespace cellm
