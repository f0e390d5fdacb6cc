// hf_config_readers: the pieces of HfConfig::parse (hf_config.cpp) that read one part of a
// config.json — Reader, which reads typed keys of one JSON object and names the file and the key
// in every error, and the readers of the rope keys (rope_scaling / rope_parameters: linear,
// llama3, phi3's LongRoPE and partial rotary factor, gemma3's two ropes) and of the sliding
// windows (Qwen2's and Mistral's keys, Gemma's layer patterns). They fill fields of an HfConfig
// whose architecture and sizes are already read; they know nothing of GGUF. Internal to
// src/model: hf_config.cpp is the only caller. Thread-safety: pure functions over their arguments.
#pragma once

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "model/hf_config.h"
#include "model/hf_json.h"

namespace cellm::hf_config_internal {

using Json = nlohmann::json;

// Reads typed keys of one JSON object; every error names the file and the key.
class Reader {
 public:
  Reader(const Json& object, std::string_view where, std::string prefix = "")
      : object_(object), where_(where), prefix_(std::move(prefix)) {}

  bool has(const char* key) const { return object_.contains(key) && !object_.at(key).is_null(); }
  const Json& at(const char* key) const { return object_.at(key); }

  std::string_view where() const { return where_; }

  Status error(const char* key, std::string_view what) const {
    return data_loss(fmt::format("{}: key '{}{}' {}", where_, prefix_, key, what));
  }

  StatusOr<int32_t> positive(const char* key, std::optional<int32_t> fallback) const {
    if (!has(key)) {
      if (fallback) return *fallback;
      return not_found(fmt::format("{}: key '{}{}' is missing", where_, prefix_, key));
    }
    const Json& value = object_.at(key);
    if (!value.is_number_integer() || value.get<int64_t>() <= 0 ||
        value.get<int64_t>() > (int64_t{1} << 30)) {
      return error(key, "is not a positive integer: " + json_for_message(value));
    }
    return static_cast<int32_t>(value.get<int64_t>());
  }

  StatusOr<int32_t> token_id(const char* key, int32_t vocab_size) const {
    const Json& value = object_.at(key);
    if (!value.is_number_integer() || value.get<int64_t>() < 0 ||
        value.get<int64_t>() >= vocab_size) {
      return error(key, "is not a token id below vocab_size: " + json_for_message(value));
    }
    return static_cast<int32_t>(value.get<int64_t>());
  }

  StatusOr<float> number(const char* key, float fallback) const {
    if (!has(key)) return fallback;
    const Json& value = object_.at(key);
    if (!value.is_number()) return error(key, "is not a number: " + json_for_message(value));
    const std::optional<float> x = positive_float(value);
    if (!x) return error(key, "must be a number > 0 that fits a float: " + json_for_message(value));
    return *x;
  }

  // A list of `size` numbers, each finite and > 0 as a float.
  StatusOr<std::vector<float>> positive_list(const char* key, size_t size) const {
    if (!has(key)) return not_found(fmt::format("{}: key '{}{}' is missing", where_, prefix_, key));
    const Json& value = object_.at(key);
    if (!value.is_array() || value.size() != size) {
      return error(key, fmt::format("is not a list of {} numbers (one per rotary pair)", size));
    }
    std::vector<float> out;
    for (const Json& x : value) {
      const std::optional<float> f = positive_float(x);
      if (!f || !std::isnormal(*f)) {  // each divides a frequency: no denormals
        return error(key, "holds a value that is not a number > 0 that fits a float: " +
                              json_for_message(x));
      }
      out.push_back(*f);
    }
    return out;
  }

  // A JSON number as the float it becomes, when that is > 0 and finite (1e39 would be inf,
  // 1e-50 zero); nullopt otherwise.
  static std::optional<float> positive_float(const Json& value) {
    if (!value.is_number()) return std::nullopt;
    const double x = value.get<double>();
    if (!(x > 0.0) || x > std::numeric_limits<float>::max() || !(static_cast<float>(x) > 0.0f)) {
      return std::nullopt;
    }
    return static_cast<float>(x);
  }

  StatusOr<bool> boolean(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    if (!object_.at(key).is_boolean()) return error(key, "is not true or false");
    return object_.at(key).get<bool>();
  }

 private:
  const Json& object_;
  std::string_view where_;
  std::string prefix_;
};

// phi3's partial_rotary_factor (top level, or in transformers 5's rope_parameters): the rotary
// dims are int(head_dim · factor), as transformers rounds them.
Status read_partial_rotary(const Reader& r, HfConfig* c);

// `scaling` (the object at key `prefix` of `where`) into config->rope_scaling: default, linear,
// llama3, and for phi3 longrope (or su); Unimplemented for any other type.
Status read_rope_scaling(const Json& scaling, std::string_view where, std::string prefix,
                         HfConfig* config);

// Every layer's window is 0 (full attention) or `window`; GGUF has one key, so only "all" or
// "none" convert. Found without a per-layer list: a config can claim 2^30 layers.
Status read_windows(const Reader& r, std::string_view where, HfConfig* c);

// gemma2's and gemma3's windows: `layer_types` (transformers 5) or `sliding_window_pattern`
// (default 2 / 6) say which layers are global; the pattern must be regular (layer l global iff
// (l + 1) % p == 0), as GGUF keeps only p. All-windowed layers give p = num_layers + 1.
Status read_gemma_windows(const Reader& r, int32_t default_pattern, HfConfig* c);

// gemma3's rope: rope_theta + rope_scaling for the global layers and rope_local_base_freq for the
// windowed ones, or transformers 5's rope_parameters with one entry per layer type.
Status read_gemma3_rope(const Reader& r, std::string_view where, HfConfig* c);

}  // namespace cellm::hf_config_internal
