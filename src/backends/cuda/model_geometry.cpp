#include "backends/cuda/model_geometry.h"

#include <cmath>

namespace cellm {
namespace {

struct Geometry {
  std::string_view name;
  Architecture architecture;
  int32_t num_layers, hidden, ffn, heads, kv_heads, head_dim, vocab;
  float rope_base;
  bool rope_factors;  // llama3's, or phi3's LongRoPE pair
  bool qkv_bias;
  bool tied;
  float eps;
  int32_t window = 0;          // gemma: the windowed layers' window
  int32_t window_pattern = 0;  // gemma: every window_pattern-th layer global
};

constexpr Geometry kGeometries[] = {
    {"llama-3.1-8b", Architecture::kLlama, 32, 4096, 14336, 32, 8, 128, 128256, 500000.0f, true,
     false, false, 1e-5f},
    {"qwen2.5-7b", Architecture::kQwen2, 28, 3584, 18944, 28, 4, 128, 152064, 1000000.0f, false,
     true, false, 1e-6f},
    {"qwen3-8b", Architecture::kQwen3, 36, 4096, 12288, 32, 8, 128, 151936, 1000000.0f, false,
     false, false, 1e-6f},
    {"llama-3.2-1b", Architecture::kLlama, 16, 2048, 8192, 32, 8, 64, 128256, 500000.0f, true,
     false, true, 1e-5f},
    {"phi-3.5-mini", Architecture::kPhi3, 32, 3072, 8192, 32, 32, 96, 32064, 10000.0f, true, false,
     false, 1e-5f},
    {"gemma-3-4b", Architecture::kGemma3, 34, 2560, 10240, 8, 4, 256, 262208, 1000000.0f, false,
     false, true, 1e-6f, 1024, 6},
    {"gemma-2-9b", Architecture::kGemma2, 42, 3584, 14336, 16, 8, 256, 256000, 10000.0f, false,
     false, true, 1e-6f, 4096, 2},
    {"tiny", Architecture::kLlama, 4, 512, 1536, 8, 4, 64, 4096, 10000.0f, false, false, false,
     1e-5f},
    {"tiny-qwen", Architecture::kQwen2, 3, 256, 768, 4, 2, 64, 2048, 1000000.0f, false, true, false,
     1e-6f},
    {"tiny-gemma", Architecture::kGemma3, 4, 512, 1536, 4, 2, 256, 4096, 1000000.0f, false, false,
     true, 1e-6f, 16, 2},
    {"tiny-gemma2", Architecture::kGemma2, 4, 512, 1536, 4, 2, 256, 4096, 10000.0f, false, false,
     true, 1e-6f, 16, 2},
};

}  // namespace

std::vector<std::string> geometry_names() {
  std::vector<std::string> names;
  for (const Geometry& g : kGeometries) names.emplace_back(g.name);
  return names;
}

StatusOr<ModelConfig> named_geometry(std::string_view name) {
  for (const Geometry& g : kGeometries) {
    if (g.name != name) continue;
    ModelConfig c;
    c.architecture = g.architecture;
    c.num_layers = g.num_layers;
    c.hidden_size = g.hidden;
    c.ffn_size = g.ffn;
    c.num_heads = g.heads;
    c.num_kv_heads = g.kv_heads;
    c.head_dim = g.head_dim;
    c.value_head_dim = g.head_dim;
    c.vocab_size = g.vocab;
    c.context_length = 131072;
    c.rms_norm_eps = g.eps;
    const bool phi3 = g.architecture == Architecture::kPhi3;
    c.rope.style = rope_style_of(g.architecture);
    c.rope.num_rotary_dims = g.head_dim;
    c.rope.freq_base = g.rope_base;
    c.rope.has_freq_factors = g.rope_factors;
    if (phi3) {  // Phi-3.5-mini's LongRoPE: 4096 original positions, attention factor for 32x
      c.rope.long_factors_above_context = 4096;
      c.rope.attn_factor = 1.1902381f;
    }
    c.layer_windows.assign(static_cast<size_t>(g.num_layers), 0);
    c.has_qkv_bias = g.qkv_bias;
    c.has_qk_norm = g.architecture == Architecture::kQwen3;  // per-head q/k RMSNorm before RoPE
    c.tied_embeddings = g.tied;
    if (g.architecture == Architecture::kGemma2 || g.architecture == Architecture::kGemma3) {
      for (int32_t l = 0; l < g.num_layers; ++l) {
        if ((l + 1) % g.window_pattern != 0) c.layer_windows[static_cast<size_t>(l)] = g.window;
      }
      c.has_post_norms = true;
      c.ffn_activation = FfnActivation::kGeluTanh;
      c.embedding_scale = std::sqrt(static_cast<float>(g.hidden));
      c.attention_scale = 1.0f / std::sqrt(256.0f);  // query_pre_attn_scalar 256
    }
    if (g.architecture == Architecture::kGemma2) {  // as Gemma 2 9B's HF config has it
      c.attn_logit_softcap = 50.0f;
      c.final_logit_softcap = 30.0f;
    }
    if (g.architecture == Architecture::kGemma3) {  // as Gemma 3 4B's HF config has it
      c.rope.freq_scale = 1.0f / 8.0f;              // linear scaling on the global layers
      RopeConfig sliding = c.rope;
      sliding.freq_base = 10000.0f;
      sliding.freq_scale = 1.0f;
      c.sliding_rope = sliding;
      c.has_qk_norm = true;
    }
    return c;
  }
  std::string names;
  for (const std::string& n : geometry_names()) names += (names.empty() ? "" : ", ") + n;
  return not_found("unknown geometry '" + std::string(name) + "' (known: " + names + ")");
}

ProgramSpec random_program(const ModelConfig& config, int32_t max_context_len,
                           int32_t max_step_tokens, int32_t min_prefill_chunk,
                           std::vector<int32_t> decode_widths, KvDtype kv_dtype,
                           int32_t max_cells) {
  ProgramSpec spec = ProgramSpec::defaults_for(config);
  spec.max_context_len = max_context_len;
  spec.max_step_tokens = max_step_tokens;
  spec.min_prefill_chunk = min_prefill_chunk;
  spec.decode_widths = std::move(decode_widths);
  spec.kv_dtype = kv_dtype;
  spec.kv_max_cells = max_cells;
  spec.source = "random weights";
  return spec;
}

}  // namespace cellm
