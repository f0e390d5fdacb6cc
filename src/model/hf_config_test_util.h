// Test-only: what "sane" means for an HfConfig that HfConfig::parse accepted, checked against the
// JSON it came from (parsed here by nlohmann-json directly) without calling the parser's own
// helpers — its mutation test and its fuzz target share it. Not part of cellm_model.
// The promises: the architecture is one of the six and agrees with model_type (or
// architectures[0]); every count is the document's own integer in [1, 2^30] or the documented
// default; heads are a multiple of kv heads; head_dim is even, and times heads equals hidden_size
// when it was derived; floats are finite and > 0; rope scaling is none, linear or llama3 (named
// by the document) with high_freq_factor > low_freq_factor and finite factors between 1 and
// `factor`, or (phi3) longrope with a short and a long list of one positive float per rotary pair
// and a positive attention factor; rotary dims are even, in [2, head_dim], head_dim unless phi3
// asks for fewer; gemma3 (defaults of its own: head_dim 256, 131072 positions, tied embeddings,
// rope_theta 1e6, window 4096) has linear scaling only, a window, one global layer every
// `sliding_window_pattern` (layer_types agreeing), finite scalars and no soft-capping — a
// Gemma3ForConditionalGeneration document keeps them in its text_config; token ids
// are below vocab_size; the GGUF keys are unique and carry the same
// values. Thread-safety: pure functions.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <tuple>

#include "model/hf_config.h"

namespace cellm::hf_config_testing {

using Json = nlohmann::json;

// object[key] when `object` is an object holding `key` with a non-null value, else nullptr.
inline const Json* present(const Json& object, const char* key) {
  if (!object.is_object()) return nullptr;
  const auto it = object.find(key);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

// A JSON integer that fits int64, else nullopt (floats, 2^63 and above, other types).
inline std::optional<int64_t> as_int(const Json* value) {
  if (value == nullptr || !value->is_number_integer()) return std::nullopt;
  if (value->is_number_unsigned() && value->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
    return std::nullopt;
  }
  return value->get<int64_t>();
}

inline std::string architecture_of(const std::string& class_name) {
  if (class_name == "LlamaForCausalLM") return "llama";
  if (class_name == "MistralForCausalLM") return "mistral";
  if (class_name == "Qwen2ForCausalLM") return "qwen2";
  if (class_name == "Qwen3ForCausalLM") return "qwen3";
  if (class_name == "Phi3ForCausalLM") return "phi3";
  if (class_name == "Gemma2ForCausalLM") return "gemma2";
  if (class_name == "Gemma3ForCausalLM") return "gemma3_text";
  return "";
}

inline std::string check_parsed_config(const HfConfig& c, const Json& json);

// A Gemma3ForConditionalGeneration document (model_type "gemma3", or that class without a
// model_type): its promises are its text_config's, that config taking the top level's token ids
// and name where it has none.
inline bool is_gemma3_multimodal_document(const Json& json) {
  if (!json.is_object()) return false;
  if (const auto type = json.find("model_type"); type != json.end() && type->is_string()) {
    return *type == "gemma3";
  }
  const auto classes = json.find("architectures");
  return classes != json.end() && classes->is_array() && !classes->empty() &&
         (*classes)[0] == "Gemma3ForConditionalGeneration";
}

inline std::string check_parsed_multimodal_config(const HfConfig& c, const Json& json) {
  if (!c.text_of_multimodal) return "a multimodal document not marked text_of_multimodal";
  const auto text = json.find("text_config");
  if (text == json.end() || !text->is_object()) return "accepted without an object text_config";
  Json effective = *text;
  effective["model_type"] = "gemma3_text";
  effective.erase("architectures");
  for (const char* key : {"bos_token_id", "eos_token_id", "_name_or_path"}) {
    if (!effective.contains(key) && json.contains(key)) effective[key] = json.at(key);
  }
  if (c.architecture != Architecture::kGemma3) return "a multimodal document not gemma3";
  HfConfig text_only = c;
  text_only.text_of_multimodal = false;
  return check_parsed_config(text_only, effective);
}

// Empty when `c` keeps the promises above over `json`; otherwise the first broken one.
inline std::string check_parsed_config(const HfConfig& c, const Json& json) {
  constexpr int64_t kMaxCount = int64_t{1} << 30;
  if (!json.is_object()) return "accepted a document that is not an object";
  if (is_gemma3_multimodal_document(json)) return check_parsed_multimodal_config(c, json);
  if (c.text_of_multimodal) return "text_of_multimodal without a multimodal document";

  // Architecture.
  const Architecture expected_arch[] = {
      Architecture::kLlama, Architecture::kMistral, Architecture::kQwen2, Architecture::kQwen3,
      Architecture::kPhi3,  Architecture::kGemma2,  Architecture::kGemma3};
  const char* names[] = {"llama", "mistral", "qwen2", "qwen3", "phi3", "gemma2", "gemma3_text"};
  bool known = false;
  for (int i = 0; i < 7; ++i) {
    if (c.model_type == names[i]) {
      known = true;
      if (c.architecture != expected_arch[i]) return "architecture disagrees with model_type";
    }
  }
  if (!known) return "unknown model_type '" + c.model_type + "'";
  if (const Json* type = present(json, "model_type"); type != nullptr && type->is_string()) {
    if (type->get<std::string>() != c.model_type) return "model_type differs from the document";
  } else {
    const Json* classes = present(json, "architectures");
    if (classes == nullptr || !classes->is_array() || classes->empty() ||
        !(*classes)[0].is_string() ||
        architecture_of((*classes)[0].get<std::string>()) != c.model_type) {
      return "model_type not named by model_type or architectures[0]";
    }
  }
  const bool qwen3 = c.architecture == Architecture::kQwen3;
  const bool phi3 = c.architecture == Architecture::kPhi3;
  const bool gemma2 = c.architecture == Architecture::kGemma2;
  const bool gemma3 = c.architecture == Architecture::kGemma3;
  const bool gemma = gemma2 || gemma3;

  // Counts: the document's integer in [1, 2^30], or the default.
  const auto count = [&](const char* key, int32_t field,
                         std::optional<int64_t> fallback) -> std::string {
    const Json* value = present(json, key);
    const std::optional<int64_t> expected = value == nullptr ? fallback : as_int(value);
    if (!expected) return std::string(key) + " accepted without an integer";
    if (*expected < 1 || *expected > kMaxCount) return std::string(key) + " accepted out of range";
    if (field != *expected) return std::string(key) + " differs from the document";
    return "";
  };
  // Required, but gemma2 and gemma3 take Gemma2Config's / Gemma3TextConfig's defaults.
  for (const auto& [key, field, gemma_default] :
       {std::tuple{"hidden_size", c.hidden_size, 2304},
        std::tuple{"intermediate_size", c.intermediate_size, 9216},
        std::tuple{"num_hidden_layers", c.num_layers, 26},
        std::tuple{"num_attention_heads", c.num_heads, 8},
        std::tuple{"vocab_size", c.vocab_size, gemma2 ? 256000 : 262208}}) {
    const std::optional<int64_t> fallback =
        gemma ? std::optional<int64_t>(gemma_default) : std::nullopt;
    if (std::string broken = count(key, field, fallback); !broken.empty()) return broken;
  }
  if (std::string broken = count("num_key_value_heads", c.num_kv_heads, gemma ? 4 : c.num_heads);
      !broken.empty()) {
    return broken;
  }
  if (c.num_heads % c.num_kv_heads != 0) return "heads are not a multiple of kv heads";
  std::optional<int64_t> derived_head_dim;
  if (qwen3) {
    derived_head_dim = 128;
  } else if (gemma) {
    derived_head_dim = 256;
  } else if (c.hidden_size % c.num_heads == 0) {
    derived_head_dim = c.hidden_size / c.num_heads;
  }
  if (std::string broken = count("head_dim", c.head_dim, derived_head_dim); !broken.empty()) {
    return broken;
  }
  if (c.head_dim % 2 != 0) return "odd head_dim";
  if (present(json, "head_dim") == nullptr && !qwen3 && !gemma &&
      int64_t{c.head_dim} * c.num_heads != c.hidden_size) {
    return "derived head_dim * heads != hidden_size";
  }
  if (std::string broken = count("max_position_embeddings", c.max_position_embeddings,
                                 qwen3    ? 32768
                                 : phi3   ? 4096
                                 : gemma3 ? 131072
                                 : gemma2 ? 8192
                                          : 2048);
      !broken.empty()) {
    return broken;
  }

  // Floats.
  const auto positive_finite = [](float x) { return std::isfinite(x) && x > 0.0f; };
  if (!positive_finite(c.rms_norm_eps)) return "rms_norm_eps not finite and > 0";
  if (!positive_finite(c.rope_theta)) return "rope_theta not finite and > 0";
  if (const Json* eps = present(json, "rms_norm_eps");
      eps != nullptr &&
      (!eps->is_number() || static_cast<float>(eps->get<double>()) != c.rms_norm_eps)) {
    return "rms_norm_eps differs from the document";
  }
  const Json* theta = present(json, "rope_theta");
  if (const Json* params = present(json, "rope_parameters"); params != nullptr) {
    if (const Json* full = present(*params, "full_attention"); gemma3 && full != nullptr) {
      if (const Json* inner = present(*full, "rope_theta"); inner != nullptr) theta = inner;
    } else if (const Json* inner = present(*params, "rope_theta"); inner != nullptr) {
      theta = inner;
    }
  }
  if (theta == nullptr && gemma3 && c.rope_theta != 1e6f) return "gemma3 rope_theta default";
  if (theta != nullptr &&
      (!theta->is_number() || static_cast<float>(theta->get<double>()) != c.rope_theta)) {
    return "rope_theta differs from the document";
  }
  if (const Json* tie = present(json, "tie_word_embeddings"); tie != nullptr) {
    if (!tie->is_boolean() || tie->get<bool>() != c.tie_word_embeddings) {
      return "tie_word_embeddings differs from the document";
    }
  } else if (c.tie_word_embeddings != gemma) {
    return "tie_word_embeddings differs from its default without the key";
  }

  // Rope scaling.
  const HfRopeScaling& s = c.rope_scaling;
  if (!s.type.empty()) {
    if (s.type != "linear" && s.type != "llama3" && !(phi3 && s.type == "longrope")) {
      return "rope scaling type '" + s.type + "'";
    }
    if (gemma3 && s.type != "linear") return "gemma3 with rope scaling '" + s.type + "'";
    if (gemma2) return "gemma2 with rope scaling '" + s.type + "'";
    bool named = false;
    const Json* params = present(json, "rope_parameters");
    const Json* full = params != nullptr ? present(*params, "full_attention") : nullptr;
    for (const Json* scaling : {present(json, "rope_scaling"), params, full}) {
      if (scaling == nullptr) continue;
      for (const char* key : {"rope_type", "type"}) {
        const Json* type = present(*scaling, key);
        if (type != nullptr && type->is_string() &&
            (type->get<std::string>() == s.type ||
             (s.type == "longrope" && type->get<std::string>() == "su"))) {
          named = true;
        }
      }
    }
    if (!named) return "rope scaling '" + s.type + "' not named by the document";
  }
  if (!positive_finite(s.factor)) return "rope factor not finite and > 0";
  if (s.type == "llama3") {
    if (!positive_finite(s.low_freq_factor) || !positive_finite(s.high_freq_factor)) {
      return "llama3 frequency factors not finite and > 0";
    }
    if (!(s.high_freq_factor > s.low_freq_factor)) return "high_freq_factor <= low_freq_factor";
    if (s.original_context_length < 1 || s.original_context_length > kMaxCount) {
      return "original context length out of range";
    }
    if (c.head_dim <= (1 << 14)) {  // larger ones are sane too, only slow to check
      const std::vector<float> factors = c.llama3_rope_factors();
      if (factors.size() != static_cast<size_t>(c.head_dim / 2)) return "rope factor count";
      const double lo = std::min(1.0, static_cast<double>(s.factor)) * (1 - 1e-5);
      const double hi = std::max(1.0, static_cast<double>(s.factor)) * (1 + 1e-5);
      for (float f : factors) {
        if (!std::isfinite(f) || f < lo || f > hi) return "llama3 rope factor out of [1, factor]";
      }
    }
  }

  if (c.num_rotary_dims < 2 || c.num_rotary_dims > c.head_dim || c.num_rotary_dims % 2 != 0) {
    return "rotary dims out of [2, head_dim] or odd";
  }
  if (!phi3 && c.num_rotary_dims != c.head_dim) return "partial rotary dims outside phi3";
  if (s.type == "longrope") {
    for (const std::vector<float>* list : {&s.short_factors, &s.long_factors}) {
      if (list->size() != static_cast<size_t>(c.num_rotary_dims / 2)) return "longrope list size";
      for (float f : *list) {
        if (!std::isnormal(f) || f <= 0.0f) return "longrope factor not a positive normal float";
      }
    }
    if (!positive_finite(s.attention_factor)) return "longrope attention factor";
    if (s.original_context_length < 1 || s.original_context_length > kMaxCount) {
      return "original context length out of range";
    }
  } else if (!s.short_factors.empty() || !s.long_factors.empty()) {
    return "longrope lists without longrope";
  }

  // Windows.
  if (c.sliding_window < 0 || c.sliding_window > kMaxCount) return "sliding_window out of range";
  if (c.sliding_window > 0) {
    if (c.architecture == Architecture::kLlama) return "a sliding window on llama";
    const Json* window = present(json, "sliding_window");
    if (window == nullptr ? !(gemma && c.sliding_window == 4096)
                          : as_int(window) != c.sliding_window) {
      return "sliding_window differs from the document";
    }
  }
  if (gemma) {
    // Every pattern-th layer global: the layer_types list's, else the key's, else 2 / 6.
    if (c.sliding_window < 1) return "gemma without a window";
    if (c.sliding_window_pattern < 1 || c.sliding_window_pattern > kMaxCount) {
      return "gemma window pattern out of range";
    }
    if (const Json* types = present(json, "layer_types"); types != nullptr) {
      if (!types->is_array() || types->size() != static_cast<size_t>(c.num_layers)) {
        return "layer_types accepted without one entry per layer";
      }
      for (size_t l = 0; l < types->size(); ++l) {
        const bool full = (static_cast<int64_t>(l) + 1) % c.sliding_window_pattern == 0;
        if ((*types)[l] != (full ? "full_attention" : "sliding_attention")) {
          return "layer_types disagrees with the pattern";
        }
      }
    } else if (as_int(present(json, "sliding_window_pattern")).value_or(gemma2 ? 2 : 6) !=
               c.sliding_window_pattern) {
      return "sliding_window_pattern differs from the document";
    }
    if (!positive_finite(c.query_pre_attn_scalar)) return "query_pre_attn_scalar not > 0";
    if (!positive_finite(c.rope_local_base_freq)) return "rope_local_base_freq not > 0";
    if (gemma3 && (present(json, "attn_logit_softcapping") != nullptr ||
                   present(json, "final_logit_softcapping") != nullptr)) {
      return "gemma3 with soft-capping accepted";
    }
    if (c.activation != FfnActivation::kGeluTanh) return "gemma without GELU";
  } else if (c.activation != FfnActivation::kSilu || c.sliding_window_pattern != 0) {
    return "gemma's parts on another architecture";
  }
  // gemma2's caps: the document's number, 50 / 30 without the key (a null is refused).
  for (const auto& [key, cap, fallback] :
       {std::tuple{"attn_logit_softcapping", c.attn_logit_softcap, 50.0f},
        std::tuple{"final_logit_softcapping", c.final_logit_softcap, 30.0f}}) {
    float expected = 0.0f;
    if (gemma2) {
      if (json.contains(key) && json.at(key).is_null()) return std::string(key) + " null accepted";
      const Json* value = present(json, key);
      if (value != nullptr && !value->is_number()) return std::string(key) + " not a number";
      expected = value != nullptr ? static_cast<float>(value->get<double>()) : fallback;
      if (!positive_finite(expected)) return std::string(key) + " not > 0";
    }
    if (cap != expected) return std::string(key) + " differs from the document";
  }

  // Token ids.
  if (const Json* bos = present(json, "bos_token_id"); bos != nullptr) {
    if (!c.bos_token_id || as_int(bos) != *c.bos_token_id) return "bos differs from the document";
  } else if (c.bos_token_id) {
    return "bos set without the key";
  }
  if (c.bos_token_id && (*c.bos_token_id < 0 || *c.bos_token_id >= c.vocab_size)) {
    return "bos outside the vocabulary";
  }
  const Json* eos = present(json, "eos_token_id");
  const size_t num_eos = eos == nullptr ? 0 : eos->is_array() ? eos->size() : 1;
  if (c.eos_token_ids.size() != num_eos) return "eos count differs from the document";
  for (int32_t id : c.eos_token_ids) {
    if (id < 0 || id >= c.vocab_size) return "eos outside the vocabulary";
  }
  if (const Json* name = present(json, "_name_or_path"); name != nullptr && name->is_string()) {
    if (name->get<std::string>() != c.name) return "name differs from _name_or_path";
  }

  // GGUF keys.
  const std::string arch = c.uses_llama_layout() ? "llama" : gemma3 ? "gemma3" : c.model_type;
  const std::pair<std::string, int32_t> counts[] = {
      {"block_count", c.num_layers},
      {"context_length", c.max_position_embeddings},
      {"embedding_length", c.hidden_size},
      {"feed_forward_length", c.intermediate_size},
      {"attention.head_count", c.num_heads},
      {"attention.head_count_kv", c.num_kv_heads},
      {"attention.key_length", c.head_dim},
      {"attention.value_length", c.head_dim},
      {"rope.dimension_count", c.num_rotary_dims},
      {"vocab_size", c.vocab_size},
      {"attention.sliding_window", c.sliding_window},
      {"attention.sliding_window_pattern", c.sliding_window_pattern}};
  std::set<std::string> seen;
  for (const auto& [key, value] : c.gguf_metadata()) {
    if (!seen.insert(key).second) return "GGUF key " + key + " twice";
    if (key == "general.architecture") {
      if (value.as_string() == nullptr || *value.as_string() != arch) return "general.architecture";
      continue;
    }
    if (!key.starts_with("general.") && !key.starts_with(arch + ".")) return "GGUF key " + key;
    if (value.type() == GgufValueType::kUint32) {
      const std::optional<uint64_t> v = value.as_u64();
      if (!v || *v < 1 || *v > static_cast<uint64_t>(kMaxCount)) return "GGUF " + key + " range";
      for (const auto& [suffix, field] : counts) {
        if (key == arch + "." + suffix && *v != static_cast<uint64_t>(field)) {
          return "GGUF " + key + " differs from the config";
        }
      }
    } else if (value.type() == GgufValueType::kFloat32) {
      const std::optional<double> v = value.as_f64();
      if (!v || !std::isfinite(*v) || *v <= 0) return "GGUF " + key + " not finite and > 0";
    }
  }
  for (const char* required : {"block_count", "embedding_length", "attention.head_count"}) {
    if (!seen.count(arch + "." + required)) return std::string("GGUF key missing: ") + required;
  }
  return "";
}

}  // namespace cellm::hf_config_testing
