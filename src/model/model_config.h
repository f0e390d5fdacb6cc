// ModelConfig: the hyperparameters of a decoder-only transformer, read from GGUF metadata.
//
// Supports the architectures cellm can run — llama (Llama 1/2/3, including llama3 rope
// frequencies), mistral, qwen2 (q/k/v biases), qwen3 (per-head q/k RMSNorm), phi3 (Phi-3, Phi-3.5,
// Phi-4-mini: neox rope, LongRoPE factor pairs and attention factor), gemma2 and gemma3 (Gemma 2
// and Gemma 3 text: embeddings scaled by sqrt(hidden), GELU-gated MLP, norms after the attention
// and the MLP too, every `sliding_window_pattern`-th layer global and the others windowed —
// gemma2 every other layer, its attention scores and final logits soft-capped; gemma3 every
// sixth, its windowed layers with their own rope —, llama.cpp's attention scale) — with the
// defaults
// the GGUF conventions define when a key is absent (rope base 10000, head size from
// `attention.key_length` else hidden/heads, rotary dims = head size, kv heads = heads, vocab =
// token count). Any other architecture is an `unimplemented` error naming it. Counts and their
// defaults must lie in [1, 2^30] (layers: at most 65536), heads times head size must fit int32,
// and rope and norm constants must be finite and > 0: every refusal names the key. Shapes of the
// tensors are checked by model_weights.h, not here. Knows nothing of tokenizers or backends.
// Thread-safety: plain data.
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "gguf/gguf_file.h"

namespace cellm {

enum class Architecture { kLlama, kMistral, kQwen2, kQwen3, kPhi3, kGemma2, kGemma3 };

std::string_view architecture_name(Architecture architecture);

// How rotary pairs are laid out within a head.
enum class RopeStyle {
  kNormal,  // adjacent pairs (2i, 2i + 1): GGUF llama, mistral
  kNeox,    // halves (i, i + rotary_dims / 2): qwen2, qwen3, phi3, gemma2, gemma3
};

// The rotary layout an architecture's GGUF files use (the table from_gguf reads).
RopeStyle rope_style_of(Architecture architecture);

// The gate's activation in the gated MLP: down(act(gate · x) ⊙ (up · x)).
enum class FfnActivation {
  kSilu,      // x · sigmoid(x): SwiGLU (llama, mistral, qwen, phi3)
  kGeluTanh,  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))): GeGLU (gemma2, gemma3)
};

struct RopeConfig {
  RopeStyle style = RopeStyle::kNormal;
  int32_t num_rotary_dims = 0;  // leading dims of each head that rotate (even)
  float freq_base = 10000.0f;   // theta
  float freq_scale = 1.0f;      // linear scaling: positions multiplied by this (1 / factor)
  // Per-pair divisors of the frequencies: llama3's `rope_freqs.weight`, or phi3 LongRoPE's pair
  // `rope_factors_short.weight` / `rope_factors_long.weight` (ModelWeights::rope_freqs says which
  // one a program uses).
  bool has_freq_factors = false;
  // phi3 LongRoPE: a program serving more positions than this (the original training context,
  // `rope.scaling.original_context_length`) uses the long factors, else the short ones —
  // llama.cpp's rule; 0 = no such pair.
  int32_t long_factors_above_context = 0;
  float attn_factor = 1.0f;  // cos and sin multiplied by this (`rope.scaling.attn_factor`)
};

struct ModelConfig {
  Architecture architecture = Architecture::kLlama;
  int32_t num_layers = 0;
  int32_t hidden_size = 0;     // embedding width
  int32_t ffn_size = 0;        // MLP inner width
  int32_t num_heads = 0;       // query heads
  int32_t num_kv_heads = 0;    // key/value heads (GQA: num_heads is a multiple of it)
  int32_t head_dim = 0;        // key/query head size
  int32_t value_head_dim = 0;  // value head size
  int32_t vocab_size = 0;      // rows of the embedding and of the LM head
  int32_t context_length = 0;  // trained context (metadata; the program sets the served limit)
  float rms_norm_eps = 1e-5f;
  RopeConfig rope;
  std::vector<int32_t> layer_windows;  // [num_layers]; 0 = full attention, w > 0 = sliding window
  bool has_qkv_bias = false;           // qwen2: biases on q, k and v projections
  bool has_qk_norm = false;            // qwen3: RMSNorm over each q and k head before RoPE
  bool tied_embeddings = false;        // no output.weight: the LM head is token_embd
  // gemma2, gemma3: the attention's output and the MLP's output are each RMS-normed
  // (post_attention_norm, post_ffw_norm) before they join the residual stream.
  bool has_post_norms = false;
  FfnActivation ffn_activation = FfnActivation::kSilu;
  float embedding_scale = 1.0f;  // token embeddings multiplied by this (gemma: sqrt(hidden))
  float attention_scale = 0.0f;  // scores are (q · k) · this; 0 = 1 / sqrt(head_dim)
  // gemma2: scores (after the scale) and the LM head's logits soft-capped, x → cap · tanh(x /
  // cap) (`attn_logit_softcapping`, `final_logit_softcapping`); 0 = not capped.
  float attn_logit_softcap = 0.0f;
  float final_logit_softcap = 0.0f;
  // gemma3: the rope of the sliding-window layers (base 10000, unscaled) where the global layers
  // take `rope`; absent: every layer takes `rope`.
  std::optional<RopeConfig> sliding_rope;

  int32_t q_width() const { return num_heads * head_dim; }
  int32_t kv_width() const { return num_kv_heads * head_dim; }
  int32_t v_width() const { return num_kv_heads * value_head_dim; }
  float query_scale() const {
    return attention_scale > 0.0f ? attention_scale
                                  : 1.0f / std::sqrt(static_cast<float>(head_dim));
  }
  // The rope of layer `layer`: sliding_rope on a windowed layer when the model has one.
  const RopeConfig& layer_rope(int32_t layer) const {
    return sliding_rope.has_value() && layer_windows[static_cast<size_t>(layer)] > 0 ? *sliding_rope
                                                                                     : rope;
  }

  // Reads the config from a GGUF model; tensors decide the architecture's optional parts
  // (biases, tied embeddings, rope factors). Errors name the key or the architecture.
  static StatusOr<ModelConfig> from_gguf(const GgufFile& file);

  // One line for logs and `cellm inspect`: "llama: 5 layers, hidden 64, ...".
  std::string summary() const;
};

}  // namespace cellm
