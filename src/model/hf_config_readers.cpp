#include "model/hf_config_readers.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace cellm::hf_config_internal {
namespace {

// phi3's LongRoPE: both factor lists and the attention factor (transformers'
// _compute_longrope_parameters).
Status read_long_rope(const Reader& r, HfConfig* config) {
  HfRopeScaling& out = config->rope_scaling;
  const auto num_pairs = static_cast<size_t>(config->num_rotary_dims / 2);
  CELLM_ASSIGN_OR_RETURN(out.short_factors, r.positive_list("short_factor", num_pairs));
  CELLM_ASSIGN_OR_RETURN(out.long_factors, r.positive_list("long_factor", num_pairs));
  CELLM_ASSIGN_OR_RETURN(out.original_context_length, r.positive("original_max_position_embeddings",
                                                                 out.original_context_length));
  const double stretch =
      static_cast<double>(config->max_position_embeddings) / out.original_context_length;
  CELLM_ASSIGN_OR_RETURN(const float factor, r.number("factor", static_cast<float>(stretch)));
  const double attention =
      factor <= 1.0f
          ? 1.0
          : std::sqrt(1.0 + std::log(static_cast<double>(factor)) /
                                std::log(static_cast<double>(out.original_context_length)));
  // An original context of 1 position divides by ln 1 = 0 (transformers fails there too).
  if (!r.has("attention_factor") &&
      !(std::isfinite(attention) && attention > 0.0 && attention < 3.4e38)) {
    return r.error("original_max_position_embeddings",
                   fmt::format("({}) gives no finite attention factor for the factor {}",
                               out.original_context_length, factor));
  }
  CELLM_ASSIGN_OR_RETURN(out.attention_factor,
                         r.number("attention_factor", static_cast<float>(attention)));
  out.factor = factor;
  return ok_status();
}

}  // namespace

Status read_partial_rotary(const Reader& r, HfConfig* c) {
  if (!r.has("partial_rotary_factor")) return ok_status();
  const Json& value = r.at("partial_rotary_factor");
  const double factor = value.is_number() ? value.get<double>() : 0.0;
  if (!(factor > 0.0 && factor <= 1.0)) {
    return r.error("partial_rotary_factor", "is not a number in (0, 1]");
  }
  c->num_rotary_dims = static_cast<int32_t>(c->head_dim * factor);
  if (c->num_rotary_dims == 0 || c->num_rotary_dims % 2 != 0) {
    return r.error("partial_rotary_factor",
                   fmt::format("gives {} rotary dims of a {}-dim head: they must be even and > 0",
                               c->num_rotary_dims, c->head_dim));
  }
  return ok_status();
}

Status read_rope_scaling(const Json& scaling, std::string_view where, std::string prefix,
                         HfConfig* config) {
  if (!scaling.is_object()) {
    return data_loss(fmt::format("{}: key '{}' is not an object", where, prefix));
  }
  const Reader r(scaling, where, prefix + ".");
  std::string type = "default";
  for (const char* key : {"rope_type", "type"}) {
    if (r.has(key)) {
      if (!r.at(key).is_string()) return r.error(key, "is not a string");
      type = r.at(key).get<std::string>();
      break;
    }
  }
  HfRopeScaling& out = config->rope_scaling;
  if (type == "default") return ok_status();
  const bool phi3 = config->architecture == Architecture::kPhi3;
  if (phi3 && type == "su") type = "longrope";  // its name before transformers 4.42
  if (type != "linear" && type != "llama3" && !(phi3 && type == "longrope")) {
    return unimplemented(
        fmt::format("{}: key '{}.rope_type' = '{}' is not supported (cellm "
                    "converts default, linear, llama3{})",
                    where, prefix, text_for_message(type), phi3 ? " and longrope" : ""));
  }
  out.type = type;
  if (type == "longrope") return read_long_rope(r, config);
  CELLM_ASSIGN_OR_RETURN(out.factor, r.number("factor", type == "llama3" ? 8.0f : 1.0f));
  if (!(out.factor >= 1.0f)) {  // transformers' validation: a factor stretches the context
    return r.error("factor", "must be at least 1");
  }
  if (type == "llama3") {
    CELLM_ASSIGN_OR_RETURN(out.low_freq_factor, r.number("low_freq_factor", 1.0f));
    CELLM_ASSIGN_OR_RETURN(out.high_freq_factor, r.number("high_freq_factor", 4.0f));
    CELLM_ASSIGN_OR_RETURN(
        out.original_context_length,
        r.positive("original_max_position_embeddings", out.original_context_length));
    if (!(out.high_freq_factor > out.low_freq_factor)) {
      return r.error("high_freq_factor", "must be above low_freq_factor");
    }
  }
  return ok_status();
}

Status read_windows(const Reader& r, std::string_view where, HfConfig* c) {
  int32_t window = 0;
  if (r.has("sliding_window")) {
    CELLM_ASSIGN_OR_RETURN(window, r.positive("sliding_window", 0));
  }
  if (c->architecture == Architecture::kLlama) return ok_status();
  int32_t first = 0;  // layers [first, num_layers) have the window
  if (c->architecture != Architecture::kMistral && c->architecture != Architecture::kPhi3) {
    CELLM_ASSIGN_OR_RETURN(bool use, r.boolean("use_sliding_window", false));
    first = c->num_layers;
    if (r.has("max_window_layers")) {
      const Json& value = r.at("max_window_layers");
      if (!value.is_number_integer() || value.get<int64_t>() < 0) {
        return r.error("max_window_layers", "is not a layer count");
      }
      first = static_cast<int32_t>(std::min<int64_t>(value.get<int64_t>(), c->num_layers));
    }
    if (!use) first = c->num_layers;
  }
  bool any_full = first > 0;
  bool any_sliding = first < c->num_layers;
  if (r.has("layer_types")) {
    const Json& types = r.at("layer_types");
    if (!types.is_array() || types.size() != static_cast<size_t>(c->num_layers)) {
      return r.error("layer_types", "is not a list with one entry per layer");
    }
    any_full = any_sliding = false;
    for (const Json& type : types) (type == "sliding_attention" ? any_sliding : any_full) = true;
  }
  if (window > 0 && any_full && any_sliding) {
    return unimplemented(
        fmt::format("{}: a sliding window on some layers only is not supported", where));
  }
  c->sliding_window = any_sliding ? window : 0;
  return ok_status();
}

Status read_gemma_windows(const Reader& r, int32_t default_pattern, HfConfig* c) {
  CELLM_ASSIGN_OR_RETURN(c->sliding_window, r.positive("sliding_window", 4096));
  CELLM_ASSIGN_OR_RETURN(c->sliding_window_pattern,
                         r.positive("sliding_window_pattern", default_pattern));
  if (!r.has("layer_types")) return ok_status();
  const Json& types = r.at("layer_types");
  if (!types.is_array() || types.size() != static_cast<size_t>(c->num_layers)) {
    return r.error("layer_types", "is not a list with one entry per layer");
  }
  int32_t pattern = c->num_layers + 1;
  for (size_t l = 0; l < types.size(); ++l) {
    if (types[l] != "sliding_attention" && types[l] != "full_attention") {
      return r.error("layer_types",
                     "holds a type other than sliding_attention and full_attention: " +
                         json_for_message(types[l]));
    }
    if (types[l] == "full_attention") {
      pattern = static_cast<int32_t>(l) + 1;
      break;
    }
  }
  for (size_t l = 0; l < types.size(); ++l) {
    const bool full = (static_cast<int32_t>(l) + 1) % pattern == 0;
    if ((types[l] == "full_attention") != full) {
      return unimplemented(fmt::format(
          "{}: key 'layer_types' is not one global layer every {} (GGUF keeps one pattern)",
          r.where(), pattern));
    }
  }
  c->sliding_window_pattern = pattern;
  return ok_status();
}

Status read_gemma3_rope(const Reader& r, std::string_view where, HfConfig* c) {
  CELLM_ASSIGN_OR_RETURN(c->rope_local_base_freq, r.number("rope_local_base_freq", 10000.0f));
  if (r.has("rope_scaling")) {
    CELLM_RETURN_IF_ERROR(read_rope_scaling(r.at("rope_scaling"), where, "rope_scaling", c));
  }
  if (!r.has("rope_parameters")) return ok_status();
  const Json& params = r.at("rope_parameters");
  if (!params.is_object() || !params.contains("full_attention")) {
    CELLM_RETURN_IF_ERROR(read_rope_scaling(params, where, "rope_parameters", c));
    CELLM_ASSIGN_OR_RETURN(
        c->rope_theta,
        Reader(params, where, "rope_parameters.").number("rope_theta", c->rope_theta));
    return ok_status();
  }
  const Json& full = params.at("full_attention");
  CELLM_RETURN_IF_ERROR(read_rope_scaling(full, where, "rope_parameters.full_attention", c));
  CELLM_ASSIGN_OR_RETURN(
      c->rope_theta,
      Reader(full, where, "rope_parameters.full_attention.").number("rope_theta", c->rope_theta));
  if (params.contains("sliding_attention")) {
    const Json& sliding = params.at("sliding_attention");
    HfConfig probe;  // the windowed layers' scaling must be none
    probe.architecture = c->architecture;
    CELLM_RETURN_IF_ERROR(
        read_rope_scaling(sliding, where, "rope_parameters.sliding_attention", &probe));
    if (!probe.rope_scaling.type.empty()) {
      return unimplemented(
          fmt::format("{}: key 'rope_parameters.sliding_attention' scales the windowed layers' "
                      "rope: not supported",
                      where));
    }
    CELLM_ASSIGN_OR_RETURN(c->rope_local_base_freq,
                           Reader(sliding, where, "rope_parameters.sliding_attention.")
                               .number("rope_theta", c->rope_local_base_freq));
  }
  return ok_status();
}

}  // namespace cellm::hf_config_internal
