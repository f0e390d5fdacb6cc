#include "model/model_config.h"

#include <fmt/format.h>

#include <cmath>
#include <optional>

#include "core/check.h"
#include "gguf/gguf_text.h"

namespace cellm {
namespace {

struct ArchitectureInfo {
  std::string_view gguf_name;
  Architecture architecture;
  RopeStyle rope_style;
};

// The GGUF `general.architecture` values cellm runs. Mistral models usually convert as
// "llama"; a file that says "mistral" runs the same way.
constexpr ArchitectureInfo kArchitectures[] = {
    {"llama", Architecture::kLlama, RopeStyle::kNormal},
    {"mistral", Architecture::kMistral, RopeStyle::kNormal},
    {"qwen2", Architecture::kQwen2, RopeStyle::kNeox},
    {"qwen3", Architecture::kQwen3, RopeStyle::kNeox},
    {"phi3", Architecture::kPhi3, RopeStyle::kNeox},
    {"gemma2", Architecture::kGemma2, RopeStyle::kNeox},
    {"gemma3", Architecture::kGemma3, RopeStyle::kNeox},
};

// Gemma 2's and Gemma 3's fixed parts, as llama.cpp sets them: one global layer in every 2 / 6
// (unless the file says otherwise), Gemma 2's soft caps, Gemma 3's windowed layers' rope base,
// the layer counts of the
// 27B models (whose attention scale is 1 / sqrt(hidden / heads), not 1 / sqrt(head size)).
constexpr int32_t kGemma2WindowPattern = 2;
constexpr float kGemma2DefaultAttentionSoftcap = 50.0f;
constexpr float kGemma2DefaultFinalSoftcap = 30.0f;
constexpr int32_t kGemma3DefaultWindowPattern = 6;
constexpr float kGemma3SlidingRopeBase = 10000.0f;
constexpr int32_t kGemma2_27bLayers = 46;
constexpr int32_t kGemma3_27bLayers = 62;

std::string supported_names() {
  std::string names;
  for (const ArchitectureInfo& info : kArchitectures) {
    if (!names.empty()) names += ", ";
    names += info.gguf_name;
  }
  return names;
}

// A model has at most this many layers: far above any real one (a few hundred), it bounds what
// the per-layer tables cost before the tensors are looked at.
constexpr int32_t kMaxLayers = 1 << 16;

// Reads `<arch>.<suffix>` as a positive int32, or returns `fallback` when absent. A fallback
// derived from the file (a token count, an embedding's rows) is range-checked like a value.
StatusOr<int32_t> read_count(const GgufFile& file, const std::string& key,
                             std::optional<int64_t> fallback) {
  if (!file.has(key)) {
    if (!fallback) return not_found("model metadata key '" + key + "' is missing");
    if (*fallback < 1 || *fallback > (1 << 30)) {
      return data_loss(fmt::format(
          "model metadata key '{}' is missing and its default {} is invalid", key, *fallback));
    }
    return static_cast<int32_t>(*fallback);
  }
  CELLM_ASSIGN_OR_RETURN(uint32_t value, file.get_u32(key));
  if (value == 0 || value > (1u << 30)) {
    return data_loss(fmt::format("model metadata key '{}' has an invalid value {}", key, value));
  }
  return static_cast<int32_t>(value);
}

// Reads a float that must be finite and > 0, or returns `fallback` when absent.
StatusOr<float> read_positive_float(const GgufFile& file, const std::string& key, float fallback) {
  if (!file.has(key)) return fallback;
  CELLM_ASSIGN_OR_RETURN(float value, file.get_f32(key));
  if (!std::isfinite(value) || !(value > 0.0f)) {
    return data_loss(
        fmt::format("model metadata key '{}' is {}, not a finite number > 0", key, value));
  }
  return value;
}

// The parts gemma2 and gemma3 share beyond the common keys. The window applies to every layer but
// each `sliding_window_pattern`-th (layers p-1, 2p-1, ... are global; `default_pattern` when the
// key is absent). The attention scale is `attention.scale` when present, else llama.cpp's rule:
// 1 / sqrt(hidden / heads) for a 27B (`layers_27b` layers), 1 / sqrt(head size) otherwise.
Status read_gemma(const GgufFile& file, const std::string& p, int32_t default_pattern,
                  int32_t layers_27b, ModelConfig* config) {
  if (!file.has(p + "attention.sliding_window")) {
    return not_found("model metadata key '" + p + "attention.sliding_window' is missing");
  }
  CELLM_ASSIGN_OR_RETURN(int32_t pattern,
                         read_count(file, p + "attention.sliding_window_pattern", default_pattern));
  for (int32_t l = 0; l < config->num_layers; ++l) {
    if ((l + 1) % pattern == 0) config->layer_windows[static_cast<size_t>(l)] = 0;
  }
  config->has_post_norms = true;
  config->ffn_activation = FfnActivation::kGeluTanh;
  config->embedding_scale = std::sqrt(static_cast<float>(config->hidden_size));
  const float default_scale =
      config->num_layers == layers_27b
          ? 1.0f / std::sqrt(static_cast<float>(config->hidden_size / config->num_heads))
          : 1.0f / std::sqrt(static_cast<float>(config->head_dim));
  CELLM_ASSIGN_OR_RETURN(config->attention_scale,
                         read_positive_float(file, p + "attention.scale", default_scale));
  return ok_status();
}

// gemma2's: one global layer in two, scores and final logits soft-capped
// (`attn_logit_softcapping`, `final_logit_softcapping`; absent: llama.cpp's 50 and 30).
Status read_gemma2(const GgufFile& file, const std::string& p, ModelConfig* config) {
  CELLM_RETURN_IF_ERROR(read_gemma(file, p, kGemma2WindowPattern, kGemma2_27bLayers, config));
  CELLM_ASSIGN_OR_RETURN(
      config->attn_logit_softcap,
      read_positive_float(file, p + "attn_logit_softcapping", kGemma2DefaultAttentionSoftcap));
  CELLM_ASSIGN_OR_RETURN(
      config->final_logit_softcap,
      read_positive_float(file, p + "final_logit_softcapping", kGemma2DefaultFinalSoftcap));
  return ok_status();
}

// gemma3's: one global layer in six; windowed layers rotate with base 10000 unscaled
// (`rope.freq_base_swa` overrides), global ones with the file's rope; q/k norms required.
Status read_gemma3(const GgufFile& file, const std::string& p, ModelConfig* config) {
  CELLM_RETURN_IF_ERROR(
      read_gemma(file, p, kGemma3DefaultWindowPattern, kGemma3_27bLayers, config));
  RopeConfig sliding = config->rope;
  CELLM_ASSIGN_OR_RETURN(sliding.freq_base, read_positive_float(file, p + "rope.freq_base_swa",
                                                                kGemma3SlidingRopeBase));
  sliding.freq_scale = 1.0f;
  config->sliding_rope = sliding;
  if (!config->has_qk_norm) {
    return not_found("gemma3 model has no tensor 'blk.0.attn_q_norm.weight'");
  }
  return ok_status();
}

// The table's row of `architecture`, or null (a value outside the enum).
const ArchitectureInfo* info_of(Architecture architecture) {
  for (const ArchitectureInfo& info : kArchitectures) {
    if (info.architecture == architecture) return &info;
  }
  return nullptr;
}

}  // namespace

std::string_view architecture_name(Architecture architecture) {
  const ArchitectureInfo* info = info_of(architecture);
  return info != nullptr ? info->gguf_name : "unknown";
}

RopeStyle rope_style_of(Architecture architecture) {
  const ArchitectureInfo* info = info_of(architecture);
  CELLM_CHECK(info != nullptr) << "every Architecture has a row in kArchitectures";
  return info->rope_style;
}

StatusOr<ModelConfig> ModelConfig::from_gguf(const GgufFile& file) {
  CELLM_ASSIGN_OR_RETURN(std::string arch, file.get_string("general.architecture"));
  const ArchitectureInfo* info = nullptr;
  for (const ArchitectureInfo& candidate : kArchitectures) {
    if (candidate.gguf_name == arch) info = &candidate;
  }
  if (info == nullptr) {
    return unimplemented("model metadata key 'general.architecture': architecture " +
                         gguf_quote(arch) + " is not supported (cellm runs: " + supported_names() +
                         ")");
  }

  ModelConfig config;
  config.architecture = info->architecture;
  const std::string p = arch + ".";
  CELLM_ASSIGN_OR_RETURN(config.num_layers, read_count(file, p + "block_count", std::nullopt));
  if (config.num_layers > kMaxLayers) {
    return data_loss(fmt::format("model metadata key '{}block_count' is {}, more than {} layers", p,
                                 config.num_layers, kMaxLayers));
  }
  CELLM_ASSIGN_OR_RETURN(config.hidden_size,
                         read_count(file, p + "embedding_length", std::nullopt));
  CELLM_ASSIGN_OR_RETURN(config.ffn_size,
                         read_count(file, p + "feed_forward_length", std::nullopt));
  CELLM_ASSIGN_OR_RETURN(config.num_heads,
                         read_count(file, p + "attention.head_count", std::nullopt));
  CELLM_ASSIGN_OR_RETURN(config.num_kv_heads,
                         read_count(file, p + "attention.head_count_kv", config.num_heads));
  if (config.num_heads % config.num_kv_heads != 0) {
    return data_loss(
        fmt::format("model metadata key '{}attention.head_count' ({}) is not a multiple of "
                    "'{}attention.head_count_kv' ({})",
                    p, config.num_heads, p, config.num_kv_heads));
  }
  std::optional<int64_t> default_head_dim;
  if (config.hidden_size % config.num_heads == 0) {
    default_head_dim = config.hidden_size / config.num_heads;
  } else if (!file.has(p + "attention.key_length")) {
    return data_loss(fmt::format(
        "model metadata key '{}attention.key_length' is missing and '{}embedding_length' ({}) is "
        "not a multiple of '{}attention.head_count' ({})",
        p, p, config.hidden_size, p, config.num_heads));
  }
  CELLM_ASSIGN_OR_RETURN(config.head_dim,
                         read_count(file, p + "attention.key_length", default_head_dim));
  CELLM_ASSIGN_OR_RETURN(config.value_head_dim,
                         read_count(file, p + "attention.value_length", config.head_dim));
  // Heads times head size is a projection's width: it must fit the int32 widths of the config.
  for (const auto& [suffix, size] : {std::pair<const char*, int32_t>{"key_length", config.head_dim},
                                     {"value_length", config.value_head_dim}}) {
    if (int64_t{config.num_heads} * size > INT32_MAX) {
      return data_loss(
          fmt::format("model metadata key '{}attention.{}' ({}) times {} heads is too wide", p,
                      suffix, size, config.num_heads));
    }
  }
  CELLM_ASSIGN_OR_RETURN(config.context_length, read_count(file, p + "context_length", 2048));
  CELLM_ASSIGN_OR_RETURN(config.rms_norm_eps,
                         read_positive_float(file, p + "attention.layer_norm_rms_epsilon", 1e-5f));

  // Vocabulary: the explicit key, else the tokenizer's token count, else the embedding rows.
  std::optional<int64_t> default_vocab;
  if (file.has("tokenizer.ggml.tokens")) {
    const GgufValue::Array* tokens = file.find("tokenizer.ggml.tokens")->as_array();
    if (tokens != nullptr) default_vocab = static_cast<int64_t>(tokens->elements.size());
  }
  if (!default_vocab) {
    if (const GgufTensorInfo* embd = file.find_tensor("token_embd.weight"); embd != nullptr) {
      default_vocab = static_cast<int64_t>(std::min<uint64_t>(embd->dim(1), INT64_MAX));
    }
  }
  CELLM_ASSIGN_OR_RETURN(config.vocab_size, read_count(file, p + "vocab_size", default_vocab));

  // Rotary embedding.
  config.rope.style = info->rope_style;
  CELLM_ASSIGN_OR_RETURN(config.rope.num_rotary_dims,
                         read_count(file, p + "rope.dimension_count", config.head_dim));
  if (config.rope.num_rotary_dims % 2 != 0 || config.rope.num_rotary_dims > config.head_dim) {
    return data_loss(fmt::format(
        "model metadata key '{}rope.dimension_count' is {}: it must be even and at most the head "
        "size {}",
        p, config.rope.num_rotary_dims, config.head_dim));
  }
  CELLM_ASSIGN_OR_RETURN(config.rope.freq_base,
                         read_positive_float(file, p + "rope.freq_base", 10000.0f));
  std::string scaling_type = "none";
  if (file.has(p + "rope.scaling.type")) {
    CELLM_ASSIGN_OR_RETURN(scaling_type, file.get_string(p + "rope.scaling.type"));
  }
  if (scaling_type == "linear") {
    CELLM_ASSIGN_OR_RETURN(float factor,
                           read_positive_float(file, p + "rope.scaling.factor", 1.0f));
    config.rope.freq_scale = 1.0f / factor;
    if (!std::isfinite(config.rope.freq_scale)) {
      return data_loss(
          fmt::format("model metadata key '{}rope.scaling.factor' ({}) is too small", p, factor));
    }
  } else if (scaling_type != "none") {
    return unimplemented(fmt::format(
        "model metadata key '{}rope.scaling.type': rope scaling type {} is not supported (none, "
        "linear)",
        p, gguf_quote(scaling_type)));
  }
  config.rope.has_freq_factors = file.find_tensor("rope_freqs.weight") != nullptr;
  CELLM_ASSIGN_OR_RETURN(config.rope.attn_factor,
                         read_positive_float(file, p + "rope.scaling.attn_factor", 1.0f));
  const bool has_short = file.find_tensor("rope_factors_short.weight") != nullptr;
  const bool has_long = file.find_tensor("rope_factors_long.weight") != nullptr;
  if (has_short || has_long) {
    if (config.architecture != Architecture::kPhi3) {
      return unimplemented(fmt::format(
          "tensor 'rope_factors_{}.weight': LongRoPE factors are supported on phi3 models only",
          has_short ? "short" : "long"));
    }
    if (!has_short || !has_long) {
      return not_found(
          fmt::format("tensor 'rope_factors_{}.weight' is missing (LongRoPE needs "
                      "both the short and the long factors)",
                      has_short ? "long" : "short"));
    }
    if (config.rope.has_freq_factors) {
      return data_loss(
          "tensors 'rope_freqs.weight' and 'rope_factors_short.weight' are both present: a model "
          "has one kind of rope factors");
    }
    config.rope.has_freq_factors = true;
    CELLM_ASSIGN_OR_RETURN(
        config.rope.long_factors_above_context,
        read_count(file, p + "rope.scaling.original_context_length", config.context_length));
  }

  int32_t window = 0;
  if (file.has(p + "attention.sliding_window")) {
    CELLM_ASSIGN_OR_RETURN(uint32_t value, file.get_u32(p + "attention.sliding_window"));
    if (value > (1u << 30)) {
      return data_loss(fmt::format(
          "model metadata key '{}attention.sliding_window' has an invalid value {}", p, value));
    }
    window = static_cast<int32_t>(value);
  }
  config.layer_windows.assign(static_cast<size_t>(config.num_layers), window);

  config.has_qkv_bias = file.find_tensor("blk.0.attn_q.bias") != nullptr;
  config.has_qk_norm = file.find_tensor("blk.0.attn_q_norm.weight") != nullptr;
  config.tied_embeddings = file.find_tensor("output.weight") == nullptr;
  if (config.architecture == Architecture::kQwen3 && !config.has_qk_norm) {
    return not_found("qwen3 model has no tensor 'blk.0.attn_q_norm.weight'");
  }
  if (config.architecture == Architecture::kGemma2) {
    CELLM_RETURN_IF_ERROR(read_gemma2(file, p, &config));
  }
  if (config.architecture == Architecture::kGemma3) {
    CELLM_RETURN_IF_ERROR(read_gemma3(file, p, &config));
  }
  return config;
}

std::string ModelConfig::summary() const {
  std::string rope_factors;
  if (rope.long_factors_above_context > 0) {
    rope_factors = fmt::format(", LongRoPE factors (long above {} positions, attention factor {})",
                               rope.long_factors_above_context, rope.attn_factor);
  } else if (rope.has_freq_factors) {
    rope_factors = ", llama3 rope factors";
  }
  std::string gemma;  // gemma2's and gemma3's parts
  if (has_post_norms) gemma += ", post norms";
  if (ffn_activation == FfnActivation::kGeluTanh) gemma += ", GELU (tanh)";
  if (sliding_rope.has_value()) {
    gemma += fmt::format(", windowed layers' rope base {}", sliding_rope->freq_base);
  }
  if (attn_logit_softcap > 0.0f) gemma += fmt::format(", scores capped at {}", attn_logit_softcap);
  if (final_logit_softcap > 0.0f)
    gemma += fmt::format(", logits capped at {}", final_logit_softcap);
  return fmt::format(
      "{}: {} layers, hidden {}, ffn {}, heads {}/{} (kv), head dim {}, vocab {}, rope {} ({} "
      "dims, base {}){}{}{}{}{}",
      architecture_name(architecture), num_layers, hidden_size, ffn_size, num_heads, num_kv_heads,
      head_dim, vocab_size, rope.style == RopeStyle::kNeox ? "neox" : "normal",
      rope.num_rotary_dims, rope.freq_base, rope_factors, has_qkv_bias ? ", qkv bias" : "",
      has_qk_norm ? ", q/k norm" : "", tied_embeddings ? ", tied embeddings" : "", gemma);
}

}  // namespace cellm
