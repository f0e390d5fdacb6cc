#include "model/hf_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <tuple>

#include "model/hf_config_readers.h"
#include "model/hf_json.h"

namespace cellm {
namespace {

using Json = nlohmann::json;

struct HfArchitecture {
  std::string_view model_type;
  std::string_view class_name;
  Architecture architecture;
};

constexpr HfArchitecture kArchitectures[] = {
    {"llama", "LlamaForCausalLM", Architecture::kLlama},
    {"mistral", "MistralForCausalLM", Architecture::kMistral},
    {"qwen2", "Qwen2ForCausalLM", Architecture::kQwen2},
    {"qwen3", "Qwen3ForCausalLM", Architecture::kQwen3},
    {"phi3", "Phi3ForCausalLM", Architecture::kPhi3},
    {"gemma2", "Gemma2ForCausalLM", Architecture::kGemma2},
    {"gemma3_text", "Gemma3ForCausalLM", Architecture::kGemma3},
};

using hf_config_internal::read_gemma3_rope;
using hf_config_internal::read_gemma_windows;
using hf_config_internal::read_partial_rotary;
using hf_config_internal::read_rope_scaling;
using hf_config_internal::read_windows;
using hf_config_internal::Reader;

StatusOr<HfConfig> parse_object(const Json& json, std::string_view where) {
  if (!json.is_object()) return data_loss(std::string(where) + ": not a JSON object");
  const Reader r(json, where);
  HfConfig c;
  const HfArchitecture* arch = nullptr;
  std::string found = "(none)";
  if (r.has("model_type") && r.at("model_type").is_string()) {
    found = r.at("model_type").get<std::string>();
    for (const HfArchitecture& a : kArchitectures) {
      if (a.model_type == found) arch = &a;
    }
  } else if (r.has("architectures") && r.at("architectures").is_array() &&
             !r.at("architectures").empty() && r.at("architectures")[0].is_string()) {
    found = r.at("architectures")[0].get<std::string>();
    for (const HfArchitecture& a : kArchitectures) {
      if (a.class_name == found) arch = &a;
    }
  } else {
    return not_found(std::string(where) + ": key 'model_type' is missing");
  }
  if (arch == nullptr) {
    return unimplemented(
        fmt::format("{}: architecture '{}' is not supported (cellm exports llama, "
                    "mistral, qwen2, qwen3, phi3, gemma2, gemma3_text, and gemma3's text model)",
                    where, text_for_message(found)));
  }
  c.model_type = arch->model_type;
  c.architecture = arch->architecture;
  const bool qwen3 = c.architecture == Architecture::kQwen3;
  const bool phi3 = c.architecture == Architecture::kPhi3;
  const bool gemma2 = c.architecture == Architecture::kGemma2;
  const bool gemma3 = c.architecture == Architecture::kGemma3;
  const bool gemma = gemma2 || gemma3;
  // Gemma2Config's and Gemma3TextConfig's defaults (published Gemma configs leave most keys out).
  const auto required = [gemma](int32_t gemma_default) {
    return gemma ? std::optional<int32_t>(gemma_default) : std::nullopt;
  };
  CELLM_ASSIGN_OR_RETURN(c.hidden_size, r.positive("hidden_size", required(2304)));
  CELLM_ASSIGN_OR_RETURN(c.intermediate_size, r.positive("intermediate_size", required(9216)));
  CELLM_ASSIGN_OR_RETURN(c.num_layers, r.positive("num_hidden_layers", required(26)));
  CELLM_ASSIGN_OR_RETURN(c.num_heads, r.positive("num_attention_heads", required(8)));
  CELLM_ASSIGN_OR_RETURN(c.vocab_size,
                         r.positive("vocab_size", required(gemma2 ? 256000 : 262208)));
  CELLM_ASSIGN_OR_RETURN(c.num_kv_heads,
                         r.positive("num_key_value_heads", gemma ? 4 : c.num_heads));
  if (c.num_heads % c.num_kv_heads != 0) {
    return r.error("num_key_value_heads", fmt::format("({}) does not divide num_attention_heads "
                                                      "({})",
                                                      c.num_kv_heads, c.num_heads));
  }
  std::optional<int32_t> default_head_dim;
  if (qwen3) {
    default_head_dim = 128;
  } else if (gemma) {
    default_head_dim = 256;
  } else if (c.hidden_size % c.num_heads == 0) {
    default_head_dim = c.hidden_size / c.num_heads;
  }
  CELLM_ASSIGN_OR_RETURN(c.head_dim, r.positive("head_dim", default_head_dim));
  if (c.head_dim % 2 != 0) return r.error("head_dim", "must be even");
  c.num_rotary_dims = c.head_dim;
  if (phi3) {
    CELLM_RETURN_IF_ERROR(read_partial_rotary(r, &c));
    if (r.has("rope_parameters") && r.at("rope_parameters").is_object()) {
      CELLM_RETURN_IF_ERROR(
          read_partial_rotary(Reader(r.at("rope_parameters"), where, "rope_parameters."), &c));
    }
  }
  CELLM_ASSIGN_OR_RETURN(c.max_position_embeddings,
                         r.positive("max_position_embeddings", qwen3    ? 32768
                                                               : phi3   ? 4096
                                                               : gemma3 ? 131072
                                                               : gemma2 ? 8192
                                                                        : 2048));
  CELLM_ASSIGN_OR_RETURN(c.rms_norm_eps, r.number("rms_norm_eps", 1e-6f));
  CELLM_ASSIGN_OR_RETURN(c.tie_word_embeddings, r.boolean("tie_word_embeddings", gemma));
  CELLM_ASSIGN_OR_RETURN(c.rope_theta, r.number("rope_theta", gemma3 ? 1e6f : 10000.0f));
  // llama3's original context: rope_scaling's own key (transformers), else the top-level one
  // (what llama.cpp's converter reads), else 8192.
  CELLM_ASSIGN_OR_RETURN(c.rope_scaling.original_context_length,
                         r.positive("original_max_position_embeddings", phi3 ? 4096 : 8192));
  if (gemma3) {
    CELLM_RETURN_IF_ERROR(read_gemma3_rope(r, where, &c));
    if (!c.rope_scaling.type.empty() && c.rope_scaling.type != "linear") {
      return unimplemented(
          fmt::format("{}: rope scaling '{}' on a gemma3 model is not supported (linear only)",
                      where, text_for_message(c.rope_scaling.type)));
    }
    for (const char* key : {"attn_logit_softcapping", "final_logit_softcapping"}) {
      if (r.has(key)) {
        return unimplemented(fmt::format(
            "{}: key '{}' (logit soft-capping) on a gemma3 model is not supported", where, key));
      }
    }
  } else {
    if (r.has("rope_scaling")) {
      CELLM_RETURN_IF_ERROR(read_rope_scaling(r.at("rope_scaling"), where, "rope_scaling", &c));
    }
    if (r.has("rope_parameters")) {
      const Json& params = r.at("rope_parameters");
      CELLM_RETURN_IF_ERROR(read_rope_scaling(params, where, "rope_parameters", &c));
      CELLM_ASSIGN_OR_RETURN(
          c.rope_theta,
          Reader(params, where, "rope_parameters.").number("rope_theta", c.rope_theta));
    }
    if (gemma2 && !c.rope_scaling.type.empty()) {
      return unimplemented(fmt::format("{}: rope scaling '{}' on a gemma2 model is not supported",
                                       where, text_for_message(c.rope_scaling.type)));
    }
    if (!gemma) CELLM_RETURN_IF_ERROR(read_windows(r, where, &c));
  }
  if (gemma) {
    CELLM_RETURN_IF_ERROR(read_gemma_windows(r, gemma2 ? 2 : 6, &c));
    CELLM_ASSIGN_OR_RETURN(c.query_pre_attn_scalar, r.number("query_pre_attn_scalar", 256.0f));
    c.activation = FfnActivation::kGeluTanh;
  }
  if (gemma2) {
    // Gemma2Config's caps (50, 30) where a key is absent; GGUF has no way to say "none".
    for (auto [key, cap, fallback] :
         {std::tuple{"attn_logit_softcapping", &c.attn_logit_softcap, 50.0f},
          std::tuple{"final_logit_softcapping", &c.final_logit_softcap, 30.0f}}) {
      if (json.contains(key) && json.at(key).is_null()) {
        return unimplemented(fmt::format(
            "{}: key '{}' = null (a gemma2 model without soft-capping) is not supported", where,
            key));
      }
      CELLM_ASSIGN_OR_RETURN(*cap, r.number(key, fallback));
    }
  }
  const bool qwen2 = c.architecture == Architecture::kQwen2;
  CELLM_ASSIGN_OR_RETURN(bool attention_bias, r.boolean("attention_bias", false));
  if (attention_bias && !qwen2) {
    return unimplemented(
        fmt::format("{}: key 'attention_bias' = true (a bias on o_proj) is not "
                    "supported",
                    where));
  }
  CELLM_ASSIGN_OR_RETURN(bool mlp_bias, r.boolean("mlp_bias", false));
  if (mlp_bias)
    return unimplemented(fmt::format("{}: key 'mlp_bias' = true is not supported", where));
  // gemma3 names its activation hidden_activation (hidden_act is Gemma 1's, which it ignores).
  const char* activation_key = gemma ? "hidden_activation" : "hidden_act";
  const char* activation = gemma ? "gelu_pytorch_tanh" : "silu";
  if (r.has(activation_key) && r.at(activation_key) != activation) {
    return unimplemented(fmt::format("{}: key '{}' = {} is not supported ({} only)", where,
                                     activation_key, json_for_message(r.at(activation_key)),
                                     activation));
  }
  if (r.has("bos_token_id")) {
    CELLM_ASSIGN_OR_RETURN(int32_t bos, r.token_id("bos_token_id", c.vocab_size));
    c.bos_token_id = bos;
  }
  if (r.has("eos_token_id")) {
    const Json& eos = r.at("eos_token_id");
    for (const Json& id : eos.is_array() ? eos : Json::array({eos})) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= c.vocab_size) {
        return r.error("eos_token_id", "is not a token id: " + json_for_message(eos));
      }
      c.eos_token_ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
    }
  }
  if (r.has("_name_or_path") && r.at("_name_or_path").is_string()) {
    c.name = r.at("_name_or_path").get<std::string>();
  }
  return c;
}

// Gemma3ForConditionalGeneration (model_type gemma3: Gemma 3 4B, 12B, 27B): its text model's
// config is `text_config`, with the top level's token ids and name where it lacks its own.
bool is_gemma3_multimodal(const Json& json) {
  if (!json.is_object()) return false;
  const auto type = json.find("model_type");
  if (type != json.end() && type->is_string()) return *type == "gemma3";
  const auto classes = json.find("architectures");
  return classes != json.end() && classes->is_array() && !classes->empty() &&
         (*classes)[0] == "Gemma3ForConditionalGeneration";
}

StatusOr<HfConfig> parse_gemma3_multimodal(const Json& json, std::string_view where) {
  const auto text = json.find("text_config");
  if (text == json.end() || !text->is_object()) {
    return not_found(fmt::format(
        "{}: key 'text_config' is missing or not an object (a gemma3 multimodal config)", where));
  }
  Json merged = *text;
  merged["model_type"] = "gemma3_text";
  merged.erase("architectures");
  for (const char* key : {"bos_token_id", "eos_token_id", "_name_or_path"}) {
    if (!merged.contains(key) && json.contains(key)) merged[key] = json.at(key);
  }
  CELLM_ASSIGN_OR_RETURN(HfConfig c, parse_object(merged, where));
  c.text_of_multimodal = true;
  return c;
}

}  // namespace

StatusOr<HfConfig> HfConfig::parse(std::string_view json_text, std::string_view where) {
  CELLM_ASSIGN_OR_RETURN(const Json json, parse_hf_json(json_text, where));
  try {
    if (is_gemma3_multimodal(json)) return parse_gemma3_multimodal(json, where);
    return parse_object(json, where);
  } catch (const Json::exception& e) {  // a bug here, but still no exception leaves the parser
    return internal_error(fmt::format("{}: {}", where, e.what()));
  }
}

StatusOr<HfConfig> HfConfig::from_dir(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / "config.json").string();
  CELLM_ASSIGN_OR_RETURN(std::string text, read_file_to_string(path));
  CELLM_ASSIGN_OR_RETURN(HfConfig config, parse(text, path));
  if (config.name.empty()) {
    config.name = std::filesystem::path(dir).lexically_normal().filename().string();
    if (config.name.empty()) {
      config.name = std::filesystem::path(dir).parent_path().filename().string();
    }
  }
  return config;
}

bool HfConfig::uses_llama_layout() const {
  return architecture == Architecture::kLlama || architecture == Architecture::kMistral;
}

std::string_view HfConfig::gguf_architecture() const {
  if (uses_llama_layout()) return "llama";
  return architecture_name(architecture);
}

std::vector<std::pair<std::string, GgufValue>> HfConfig::gguf_metadata() const {
  const std::string a(gguf_architecture());
  const auto u32 = [](int32_t v) { return GgufValue::u32(static_cast<uint32_t>(v)); };
  std::vector<std::pair<std::string, GgufValue>> keys = {
      {"general.architecture", GgufValue::string(a)},
      {"general.type", GgufValue::string("model")},
      {"general.name", GgufValue::string(name)},
      {a + ".block_count", u32(num_layers)},
      {a + ".context_length", u32(max_position_embeddings)},
      {a + ".embedding_length", u32(hidden_size)},
      {a + ".feed_forward_length", u32(intermediate_size)},
      {a + ".attention.head_count", u32(num_heads)},
      {a + ".attention.head_count_kv", u32(num_kv_heads)},
      {a + ".rope.freq_base", GgufValue::f32(rope_theta)},
      {a + ".attention.layer_norm_rms_epsilon", GgufValue::f32(rms_norm_eps)},
      {a + ".attention.key_length", u32(head_dim)},
      {a + ".attention.value_length", u32(head_dim)},
      {a + ".rope.dimension_count", u32(num_rotary_dims)},
      {a + ".vocab_size", u32(vocab_size)},
  };
  if (rope_scaling.type == "linear") {
    keys.emplace_back(a + ".rope.scaling.type", GgufValue::string("linear"));
    keys.emplace_back(a + ".rope.scaling.factor", GgufValue::f32(rope_scaling.factor));
  }
  if (rope_scaling.type == "longrope") {
    keys.emplace_back(a + ".rope.scaling.attn_factor",
                      GgufValue::f32(rope_scaling.attention_factor));
    keys.emplace_back(a + ".rope.scaling.original_context_length",
                      u32(rope_scaling.original_context_length));
  }
  if (sliding_window > 0) keys.emplace_back(a + ".attention.sliding_window", u32(sliding_window));
  if (architecture == Architecture::kGemma2 || architecture == Architecture::kGemma3) {
    // llama.cpp assumes a pattern of 2 / 6 (and gemma3's base 10000): the keys say so for any
    // other model.
    keys.emplace_back(a + ".attention.sliding_window_pattern", u32(sliding_window_pattern));
    keys.emplace_back(a + ".attention.scale",
                      GgufValue::f32(1.0f / std::sqrt(query_pre_attn_scalar)));
  }
  if (architecture == Architecture::kGemma3) {
    keys.emplace_back(a + ".rope.freq_base_swa", GgufValue::f32(rope_local_base_freq));
  }
  if (attn_logit_softcap > 0.0f) {
    keys.emplace_back(a + ".attn_logit_softcapping", GgufValue::f32(attn_logit_softcap));
  }
  if (final_logit_softcap > 0.0f) {
    keys.emplace_back(a + ".final_logit_softcapping", GgufValue::f32(final_logit_softcap));
  }
  return keys;
}

std::vector<float> HfConfig::llama3_rope_factors() const {
  // transformers' llama3 rule: a pair whose wavelength is below original / high_freq_factor keeps
  // its frequency (1), one above original / low_freq_factor is divided by `factor`, the ones
  // between blend smoothly. The frequency is base^(-2i/d) rounded to f32, the rest f64 rounded
  // once to f32: this gives llama.cpp's converter's factors bit for bit (arch/tiny-llama3.gguf).
  const HfRopeScaling& s = rope_scaling;
  const double context = s.original_context_length;
  const double low_wavelength = context / s.low_freq_factor;
  const double high_wavelength = context / s.high_freq_factor;
  std::vector<float> factors;  // [head_dim / 2]
  for (int32_t i = 0; i < head_dim; i += 2) {
    const double exponent = static_cast<double>(i) / head_dim;
    const auto freq = static_cast<float>(1.0 / std::pow(static_cast<double>(rope_theta), exponent));
    const double wavelength = 2.0 * M_PI / static_cast<double>(freq);
    double factor = 0.0;
    if (wavelength < high_wavelength) {
      factor = 1.0;
    } else if (wavelength > low_wavelength) {
      factor = s.factor;
    } else {
      const double smooth =
          (context / wavelength - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
      factor = 1.0 / ((1.0 - smooth) / s.factor + smooth);
    }
    factors.push_back(static_cast<float>(factor));
  }
  return factors;
}

}  // namespace cellm
