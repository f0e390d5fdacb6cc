#include "program/program_test_support.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <tuple>
#include <vector>

#include "gguf/gguf_text.h"
#include "tokenizer/tokenizer.h"

namespace cellm::program_testing {
namespace {

constexpr std::string_view kArchitectureNames[] = {"llama", "mistral", "qwen2", "qwen3",
                                                   "phi3",  "gemma2",  "gemma3"};
constexpr std::string_view kArchitectureKeys[] = {
    "block_count",
    "embedding_length",
    "feed_forward_length",
    "attention.head_count",
    "attention.head_count_kv",
    "attention.key_length",
    "attention.value_length",
    "context_length",
    "attention.layer_norm_rms_epsilon",
    "vocab_size",
    "rope.dimension_count",
    "rope.freq_base",
    "rope.scaling.type",
    "rope.scaling.factor",
    "rope.scaling.attn_factor",
    "rope.scaling.original_context_length",
    "attention.sliding_window",
    "attention.sliding_window_pattern",
    "attention.scale",
    "rope.freq_base_swa",
};
constexpr std::string_view kProgramKeys[] = {
    "format_version",    "max_context_len", "max_step_tokens",
    "min_prefill_chunk", "decode_widths",   "logits_to_keep_mode",
    "kv.layout",         "kv.max_cells",    "kv.dtype",
    "kv.heads",          "kv.head_dims",    "kv.windows",
    "vocab_size",        "source",
};
constexpr std::string_view kGlobalTensors[] = {
    "token_embd.weight", "output_norm.weight",        "output.weight",
    "rope_freqs.weight", "rope_factors_short.weight", "rope_factors_long.weight"};
constexpr std::string_view kLayerTensors[] = {
    "attn_norm.weight",
    "attn_q.weight",
    "attn_k.weight",
    "attn_v.weight",
    "attn_output.weight",
    "attn_q.bias",
    "attn_k.bias",
    "attn_v.bias",
    "attn_q_norm.weight",
    "attn_k_norm.weight",
    "ffn_norm.weight",
    "ffn_gate.weight",
    "ffn_up.weight",
    "ffn_down.weight",
    "attn_qkv.weight",
    "attn_qkv.bias",
    "post_attention_norm.weight",
    "post_ffw_norm.weight",
};

bool is_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '.';
}

// "blk.<digits>.<layer tensor>".
bool is_layer_tensor(std::string_view word) {
  if (!word.starts_with("blk.")) return false;
  size_t i = 4;
  while (i < word.size() && std::isdigit(static_cast<unsigned char>(word[i])) != 0) ++i;
  if (i == 4 || i >= word.size() || word[i] != '.') return false;
  const std::string_view suffix = word.substr(i + 1);
  return std::find(std::begin(kLayerTensors), std::end(kLayerTensors), suffix) !=
         std::end(kLayerTensors);
}

std::optional<std::string> string_key(const GgufFile& file, std::string_view key) {
  const GgufValue* value = file.find(key);
  if (value == nullptr || value->as_string() == nullptr) return std::nullopt;
  return *value->as_string();
}

// The integer at `key`; nullopt when absent; a problem when present and not a non-negative
// integer (an accepted file's loaders would have refused it).
struct UintKey {
  bool present = false;
  uint64_t value = 0;
  std::string problem;
};
UintKey uint_key(const GgufFile& file, const std::string& key) {
  const GgufValue* value = file.find(key);
  if (value == nullptr) return {};
  const std::optional<uint64_t> v = value->as_u64();
  if (!v) return {true, 0, "accepted '" + key + "' = " + value->summary()};
  return {true, *v, ""};
}

// `actual` must be the key's value, or `fallback` when the key is absent, and in [1, 2^30].
std::string expect_count(const GgufFile& file, const std::string& key, int64_t actual,
                         std::optional<int64_t> fallback) {
  const UintKey k = uint_key(file, key);
  if (!k.problem.empty()) return k.problem;
  if (!k.present && !fallback) return "accepted a file without '" + key + "'";
  const int64_t expected =
      k.present ? static_cast<int64_t>(std::min<uint64_t>(k.value, 1ull << 40)) : *fallback;
  if (actual != expected) return fmt::format("'{}' is {}, expected {}", key, actual, expected);
  if (actual < 1 || actual > (int64_t{1} << 30)) {
    return fmt::format("'{}' = {} accepted outside [1, 2^30]", key, actual);
  }
  return "";
}

// `actual` must be the key's float value (f32 or f64), or `fallback` when absent; finite, > 0.
std::string expect_positive_float(const GgufFile& file, const std::string& key, float actual,
                                  float fallback) {
  float expected = fallback;
  if (const GgufValue* value = file.find(key); value != nullptr) {
    const std::optional<double> v = value->as_f64();
    if (!v) return "accepted '" + key + "' = " + value->summary();
    expected = static_cast<float>(*v);
  }
  if (!(actual == expected)) return fmt::format("'{}' is {}, expected {}", key, actual, expected);
  if (!std::isfinite(actual) || !(actual > 0.0f)) {
    return fmt::format("'{}' = {} accepted (not finite and > 0)", key, actual);
  }
  return "";
}

bool fits_int32(int64_t a, int64_t b) { return a * b <= INT32_MAX; }

}  // namespace

std::span<const std::string_view> config_key_suffixes() { return kArchitectureKeys; }

KnownNames known_names(const GgufFile& file) {
  KnownNames names;
  std::vector<std::string> architectures(std::begin(kArchitectureNames),
                                         std::end(kArchitectureNames));
  if (std::optional<std::string> arch = string_key(file, "general.architecture")) {
    architectures.push_back(*arch);
  }
  for (const std::string& arch : architectures) {
    for (std::string_view key : kArchitectureKeys) names.keys.insert(arch + "." + std::string(key));
  }
  for (std::string_view key : kProgramKeys) names.keys.insert("cellm." + std::string(key));
  names.keys.insert("general.architecture");
  for (const auto& [key, value] : file.metadata()) names.keys.insert(key);
  for (std::string_view name : kGlobalTensors) names.tensors.insert(std::string(name));
  for (const GgufTensorInfo& info : file.tensors()) names.tensors.insert(info.name);
  return names;
}

std::string check_refusal(const Status& status, std::string_view where, const KnownNames* names) {
  if (status.ok()) return "refusal with an OK status";
  const std::string& message = status.message();
  if (message.size() > 600) return fmt::format("refusal of {} bytes", message.size());
  for (const char c : message) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      return "refusal with a control byte (not one printable line): " + status.to_string();
    }
  }
  const std::string prefix = std::string(where) + ": ";
  if (!message.starts_with(prefix) || message.starts_with(prefix + prefix)) {
    return "refusal does not start with '" + prefix + "' once: " + status.to_string();
  }
  if (names == nullptr) return "";
  for (size_t i = 0; i < message.size();) {
    if (!is_name_char(message[i])) {
      ++i;
      continue;
    }
    size_t end = i;
    while (end < message.size() && is_name_char(message[end])) ++end;
    std::string word = message.substr(i, end - i);
    while (!word.empty() && word.back() == '.') word.pop_back();
    if (names->keys.contains(word) || names->tensors.contains(word) || is_layer_tensor(word)) {
      return "";
    }
    i = end;
  }
  return "refusal names no key or tensor: " + status.to_string();
}

std::string check_config(const GgufFile& file, const ModelConfig& c) {
  const std::optional<std::string> arch = string_key(file, "general.architecture");
  if (!arch || *arch != architecture_name(c.architecture)) {
    return "architecture " + std::string(architecture_name(c.architecture)) +
           " accepted for general.architecture " + (arch ? *arch : "(none)");
  }
  const std::string p = *arch + ".";
  const bool gemma2 = c.architecture == Architecture::kGemma2;
  const bool gemma3 = c.architecture == Architecture::kGemma3;
  const bool gemma = gemma2 || gemma3;
  const bool neox = c.architecture == Architecture::kQwen2 ||
                    c.architecture == Architecture::kQwen3 ||
                    c.architecture == Architecture::kPhi3 || gemma;
  if (c.rope.style != (neox ? RopeStyle::kNeox : RopeStyle::kNormal)) return "wrong rope style";
  std::string problem;
  auto expect = [&](const std::string& suffix, int64_t actual, std::optional<int64_t> fallback) {
    if (problem.empty()) problem = expect_count(file, p + suffix, actual, fallback);
  };
  expect("block_count", c.num_layers, std::nullopt);
  expect("embedding_length", c.hidden_size, std::nullopt);
  expect("feed_forward_length", c.ffn_size, std::nullopt);
  expect("attention.head_count", c.num_heads, std::nullopt);
  expect("attention.head_count_kv", c.num_kv_heads, c.num_heads);
  if (!problem.empty()) return problem;
  if (c.num_heads % c.num_kv_heads != 0) return "kv heads do not divide heads";
  std::optional<int64_t> default_head_dim;
  if (c.hidden_size % c.num_heads == 0) default_head_dim = c.hidden_size / c.num_heads;
  expect("attention.key_length", c.head_dim, default_head_dim);
  expect("attention.value_length", c.value_head_dim, c.head_dim);
  expect("context_length", c.context_length, 2048);
  std::optional<int64_t> default_vocab;
  if (const GgufValue* tokens = file.find("tokenizer.ggml.tokens");
      tokens != nullptr && tokens->as_array() != nullptr) {
    default_vocab = static_cast<int64_t>(tokens->as_array()->elements.size());
  } else if (const GgufTensorInfo* embd = file.find_tensor("token_embd.weight")) {
    default_vocab = static_cast<int64_t>(std::min<uint64_t>(embd->dim(1), 1ull << 40));
  }
  expect("vocab_size", c.vocab_size, default_vocab);
  expect("rope.dimension_count", c.rope.num_rotary_dims, c.head_dim);
  if (!problem.empty()) return problem;
  for (const auto& [a, b] : {std::pair<int64_t, int64_t>{c.num_heads, c.head_dim},
                             {c.num_kv_heads, c.head_dim},
                             {c.num_heads, c.value_head_dim},
                             {c.num_kv_heads, c.value_head_dim}}) {
    if (!fits_int32(a, b)) return fmt::format("{} x {} heads accepted: overflows int32", a, b);
  }
  if (c.rope.num_rotary_dims % 2 != 0 || c.rope.num_rotary_dims > c.head_dim) {
    return fmt::format("{} rotary dims accepted for head size {}", c.rope.num_rotary_dims,
                       c.head_dim);
  }
  problem =
      expect_positive_float(file, p + "attention.layer_norm_rms_epsilon", c.rms_norm_eps, 1e-5f);
  if (problem.empty()) {
    problem = expect_positive_float(file, p + "rope.freq_base", c.rope.freq_base, 10000.0f);
  }
  if (!problem.empty()) return problem;
  const std::optional<std::string> scaling = string_key(file, p + "rope.scaling.type");
  if (file.has(p + "rope.scaling.type") && !scaling) return "accepted a non-string scaling type";
  if (scaling && *scaling == "linear") {
    float factor = 1.0f;
    if (const GgufValue* value = file.find(p + "rope.scaling.factor"); value != nullptr) {
      if (!value->as_f64()) return "accepted a non-float scaling factor";
      factor = static_cast<float>(*value->as_f64());
    }
    if (!(c.rope.freq_scale == 1.0f / factor)) return "freq_scale is not 1 / factor";
  } else if (scaling && *scaling != "none") {
    return "accepted rope scaling type " + gguf_quote(*scaling);
  } else if (c.rope.freq_scale != 1.0f) {
    return "freq_scale without linear scaling";
  }
  if (!std::isfinite(c.rope.freq_scale) || !(c.rope.freq_scale > 0.0f)) {
    return fmt::format("rope freq_scale {} accepted", c.rope.freq_scale);
  }
  const UintKey window = uint_key(file, p + "attention.sliding_window");
  if (!window.problem.empty()) return window.problem;
  if (c.layer_windows.size() != static_cast<size_t>(c.num_layers)) return "windows per layer";
  // gemma2 / gemma3: every `sliding_window_pattern`-th layer (default 2 / 6) is global.
  uint64_t pattern = 0;
  if (gemma) {
    const UintKey key = uint_key(file, p + "attention.sliding_window_pattern");
    if (!key.problem.empty()) return key.problem;
    pattern = file.has(p + "attention.sliding_window_pattern") ? key.value : gemma2 ? 2 : 6;
    if (pattern == 0) return "sliding_window_pattern 0 accepted";
    if (!file.has(p + "attention.sliding_window")) return "gemma without a window accepted";
  }
  for (size_t l = 0; l < c.layer_windows.size(); ++l) {
    const int32_t w = c.layer_windows[l];
    const uint64_t expected = gemma && (l + 1) % pattern == 0 ? 0 : window.value;
    if (w < 0 || static_cast<uint64_t>(w) != expected) {
      return fmt::format("layer {} window {} accepted for sliding_window {}", l, w, window.value);
    }
  }
  if (gemma3 != c.sliding_rope.has_value() || gemma != c.has_post_norms ||
      gemma != (c.ffn_activation == FfnActivation::kGeluTanh) ||
      gemma != (c.embedding_scale != 1.0f) || gemma != (c.attention_scale > 0.0f)) {
    return "gemma's parts on another architecture, or missing on gemma";
  }
  if (gemma && !std::isfinite(c.attention_scale)) return "gemma attention scale not finite";
  // gemma2's soft caps: the file's (finite and > 0), llama.cpp's 50 / 30 where a key is absent.
  for (const auto& [suffix, cap, fallback] :
       {std::tuple{"attn_logit_softcapping", c.attn_logit_softcap, 50.0f},
        std::tuple{"final_logit_softcapping", c.final_logit_softcap, 30.0f}}) {
    if (gemma2) {
      if (std::string broken = expect_positive_float(file, p + suffix, cap, fallback);
          !broken.empty()) {
        return broken;
      }
    } else if (cap != 0.0f) {
      return fmt::format("{} {} on another architecture", suffix, cap);
    }
  }
  if (gemma3 && (!std::isfinite(c.attention_scale) || !std::isfinite(c.sliding_rope->freq_base) ||
                 !(c.sliding_rope->freq_base > 0.0f))) {
    return "gemma3 attention scale or windowed rope base not finite and > 0";
  }
  if (c.has_qkv_bias != (file.find_tensor("blk.0.attn_q.bias") != nullptr) ||
      c.has_qk_norm != (file.find_tensor("blk.0.attn_q_norm.weight") != nullptr) ||
      c.tied_embeddings != (file.find_tensor("output.weight") == nullptr) ||
      c.rope.has_freq_factors != (file.find_tensor("rope_freqs.weight") != nullptr ||
                                  (c.architecture == Architecture::kPhi3 &&
                                   file.find_tensor("rope_factors_short.weight") != nullptr &&
                                   file.find_tensor("rope_factors_long.weight") != nullptr))) {
    return "an optional part disagrees with the tensors";
  }
  if ((c.architecture == Architecture::kQwen3 || gemma3) && !c.has_qk_norm) {
    return "qwen3 / gemma3 without q/k norm";
  }
  if (!std::isfinite(c.rope.attn_factor) || !(c.rope.attn_factor > 0.0f)) {
    return fmt::format("rope attn_factor {} accepted", c.rope.attn_factor);
  }
  return "";
}

std::string check_spec(const GgufFile& file, const ModelConfig& c, const ProgramSpec& s,
                       bool used_defaults) {
  bool any_program_key = false;
  for (const auto& [key, value] : file.metadata()) any_program_key |= key.starts_with("cellm.");
  if (used_defaults == any_program_key) return "used_defaults disagrees with the cellm.* keys";
  const auto layers = static_cast<size_t>(c.num_layers);
  if (used_defaults) {
    if (s.max_step_tokens != 512 || s.min_prefill_chunk != 5 || s.decode_widths != std::vector{1} ||
        s.kv_max_cells != 65536 || s.kv_dtype != KvDtype::kF32 ||
        s.logits_to_keep_mode != LogitsToKeepMode::kSelected ||
        s.max_context_len != std::max(c.context_length, 513)) {
      return "a plain model's spec is not the documented defaults: " + s.summary();
    }
  } else {
    for (const std::string_view key : {"max_context_len", "max_step_tokens", "min_prefill_chunk",
                                       "kv.max_cells", "vocab_size", "format_version"}) {
      const UintKey k = uint_key(file, "cellm." + std::string(key));
      const int64_t actual = key == "max_context_len"     ? s.max_context_len
                             : key == "max_step_tokens"   ? s.max_step_tokens
                             : key == "min_prefill_chunk" ? s.min_prefill_chunk
                             : key == "kv.max_cells"      ? s.kv_max_cells
                             : key == "vocab_size"        ? s.vocab_size
                                                          : static_cast<int64_t>(s.format_version);
      if (!k.problem.empty()) return k.problem;
      if (!k.present || k.value != static_cast<uint64_t>(actual)) {
        return fmt::format("cellm.{} is {} but the file says {}", key, actual, k.value);
      }
    }
    const GgufValue* widths = file.find("cellm.decode_widths");
    const GgufValue::Array* array = widths == nullptr ? nullptr : widths->as_array();
    if (array == nullptr || array->elements.size() != s.decode_widths.size()) {
      return "decode widths are not the file's";
    }
    for (size_t i = 0; i < s.decode_widths.size(); ++i) {
      const std::optional<uint64_t> width = array->elements[i].as_u64();
      if (!width || *width != static_cast<uint64_t>(s.decode_widths[i])) {
        return "decode widths are not the file's";
      }
    }
    if (string_key(file, "cellm.logits_to_keep_mode") !=
            std::string(logits_to_keep_mode_name(s.logits_to_keep_mode)) ||
        string_key(file, "cellm.kv.dtype") != std::string(kv_dtype_name(s.kv_dtype)) ||
        string_key(file, "cellm.kv.layout") != s.kv_layout ||
        string_key(file, "cellm.source") != s.source) {
      return "a string key of the spec is not the file's";
    }
  }
  if (s.format_version != 1) return "format version";
  const int32_t w = s.max_step_tokens;
  if (!(1 <= s.min_prefill_chunk && s.min_prefill_chunk <= w && w < s.max_context_len &&
        s.kv_max_cells >= w)) {
    return "accepted limits breaking 1 <= m <= W < context, cells >= W: " + s.summary();
  }
  if (s.decode_widths.empty() || s.decode_widths.front() != 1) return "widths do not start at 1";
  for (size_t i = 0; i < s.decode_widths.size(); ++i) {
    if (s.decode_widths[i] < 1 || s.decode_widths[i] > w ||
        (i > 0 && s.decode_widths[i] <= s.decode_widths[i - 1])) {
      return fmt::format("accepted decode widths {} with W = {}", s.summary(), w);
    }
  }
  if (s.kv_layout != "cell") return "accepted cache layout " + gguf_quote(s.kv_layout);
  if (s.kv_heads != std::vector<int32_t>(layers, c.num_kv_heads) ||
      s.kv_head_dims != std::vector<int32_t>(layers, c.head_dim) ||
      s.kv_windows != c.layer_windows) {
    return "accepted cache geometry unlike the model's";
  }
  if (s.vocab_size != c.vocab_size) return "accepted a vocabulary unlike the LM head's";
  return "";
}

std::string check_program(const Program& program) {
  const GgufFile& file = program.file();
  std::string problem = check_config(file, program.config());
  if (problem.empty()) problem = check_weights(file, program.config(), program.weights());
  if (problem.empty()) {
    problem = check_spec(file, program.config(), program.spec(), program.uses_default_spec());
  }
  if (problem.empty() && program.tokenizer().vocab_size() != program.config().vocab_size) {
    problem = "tokenizer size differs from the LM head";
  }
  return problem;
}

LoadOutcome load_and_check(GgufFile file) {
  const KnownNames names = known_names(file);
  const std::string where = file.path().empty() ? std::string("GGUF bytes") : file.path();
  LoadOutcome outcome;
  // The first stage's refusal, if any: the program must refuse with the same message.
  Status stage = ok_status();
  StatusOr<ModelConfig> config = ModelConfig::from_gguf(file);
  if (!config.ok()) {
    stage = config.status();
  } else {
    outcome.problem = check_config(file, *config);
    StatusOr<ModelWeights> weights = ModelWeights::from_gguf(file, *config);
    if (!weights.ok()) {
      stage = weights.status();
    } else {
      if (outcome.problem.empty()) outcome.problem = check_weights(file, *config, *weights);
      bool used_defaults = false;
      StatusOr<ProgramSpec> spec = ProgramSpec::from_gguf(file, *config, &used_defaults);
      stage = spec.ok() ? spec->validate(*config) : spec.status();
      if (stage.ok() && outcome.problem.empty()) {
        outcome.problem = check_spec(file, *config, *spec, used_defaults);
      }
    }
  }
  StatusOr<Program> program = Program::from_file(std::move(file));
  outcome.loaded = program.ok();
  if (!outcome.problem.empty()) return outcome;
  if (program.ok()) {
    if (!stage.ok())
      outcome.problem = "the program loaded what a stage refused: " + stage.message();
    if (outcome.problem.empty()) outcome.problem = check_program(*program);
    return outcome;
  }
  outcome.refusal = program.status().message();
  outcome.problem = check_refusal(program.status(), where, stage.ok() ? nullptr : &names);
  const std::string stage_in_file =
      stage.message().starts_with(where + ": ") ? stage.message() : where + ": " + stage.message();
  if (outcome.problem.empty() && !stage.ok() && program.status().message() != stage_in_file) {
    outcome.problem = "the program's refusal is not its stage's: " + stage.message();
  }
  return outcome;
}

}  // namespace cellm::program_testing
