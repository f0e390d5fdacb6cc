#include "program/program_spec.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "gguf/gguf_text.h"

namespace cellm {
namespace {

constexpr std::string_view kPrefix = "cellm.";

StatusOr<int32_t> read_positive(const GgufFile& file, const std::string& key) {
  if (!file.has(key)) return not_found("program metadata key '" + key + "' is missing");
  CELLM_ASSIGN_OR_RETURN(uint32_t value, file.get_u32(key));
  if (value == 0 || value > (1u << 30)) {
    return data_loss(fmt::format("program metadata key '{}' has an invalid value {}", key, value));
  }
  return static_cast<int32_t>(value);
}

StatusOr<std::vector<int32_t>> read_list(const GgufFile& file, const std::string& key) {
  if (!file.has(key)) return not_found("program metadata key '" + key + "' is missing");
  CELLM_ASSIGN_OR_RETURN(std::vector<uint32_t> values, file.get_u32_array(key));
  std::vector<int32_t> out;
  out.reserve(values.size());
  for (uint32_t v : values) {
    if (v > (1u << 30)) {
      return data_loss(fmt::format("program metadata key '{}' holds an invalid value {}", key, v));
    }
    out.push_back(static_cast<int32_t>(v));
  }
  return out;
}

StatusOr<std::string> read_string(const GgufFile& file, const std::string& key) {
  if (!file.has(key)) return not_found("program metadata key '" + key + "' is missing");
  return file.get_string(key);
}

GgufValue u32_array(const std::vector<int32_t>& values) {
  std::vector<GgufValue> elements;
  elements.reserve(values.size());
  for (int32_t v : values) elements.push_back(GgufValue::u32(static_cast<uint32_t>(v)));
  return GgufValue::array(GgufValueType::kUint32, std::move(elements));
}

}  // namespace

std::string_view logits_to_keep_mode_name(LogitsToKeepMode mode) {
  switch (mode) {
    case LogitsToKeepMode::kSelected:
      return "selected";
    case LogitsToKeepMode::kFull:
      return "full";
    case LogitsToKeepMode::kLast:
      return "last";
  }
  return "unknown";
}

std::string_view kv_dtype_name(KvDtype dtype) {
  switch (dtype) {
    case KvDtype::kF32:
      return "f32";
    case KvDtype::kF16:
      return "f16";
    case KvDtype::kBF16:
      return "bf16";
  }
  return "unknown";
}

StatusOr<KvDtype> parse_kv_dtype(std::string_view name) {
  for (KvDtype dtype : {KvDtype::kF32, KvDtype::kF16, KvDtype::kBF16}) {
    if (kv_dtype_name(dtype) == name) return dtype;
  }
  return invalid_argument("unknown cache dtype " + gguf_quote(name) + " (use f32, f16 or bf16)");
}

std::vector<int32_t> recommended_decode_widths(int32_t max_step_tokens) {
  std::vector<int32_t> widths;
  for (const int32_t width : kRecommendedDecodeWidths) {
    if (width < max_step_tokens || width == 1) widths.push_back(width);
  }
  return widths;
}

int32_t auto_min_prefill_chunk(std::span<const int32_t> decode_widths, int32_t max_step_tokens) {
  const int32_t widest = decode_widths.empty() ? 1 : decode_widths.back();
  const int32_t m = std::max(widest + 1, ProgramSpec::kDefaultMinPrefillChunk);
  return std::max(1, std::min(m, max_step_tokens));
}

ProgramSpec ProgramSpec::defaults_for(const ModelConfig& config) {
  ProgramSpec spec;
  spec.max_context_len = std::max(config.context_length, kDefaultMaxStepTokens + 1);
  spec.kv_heads.assign(static_cast<size_t>(config.num_layers), config.num_kv_heads);
  spec.kv_head_dims.assign(static_cast<size_t>(config.num_layers), config.head_dim);
  spec.kv_windows = config.layer_windows;
  spec.vocab_size = config.vocab_size;
  spec.source = "gguf (plain model: cellm defaults)";
  return spec;
}

StatusOr<ProgramSpec> ProgramSpec::from_gguf(const GgufFile& file, const ModelConfig& config,
                                             bool* used_defaults) {
  bool any = false;
  for (const auto& [key, value] : file.metadata()) {
    if (key.starts_with(kPrefix)) any = true;
  }
  *used_defaults = !any;
  if (!any) return defaults_for(config);

  ProgramSpec spec;
  const std::string p(kPrefix);
  CELLM_ASSIGN_OR_RETURN(int32_t version, read_positive(file, p + "format_version"));
  if (version != static_cast<int32_t>(kFormatVersion)) {
    return unimplemented(
        fmt::format("program metadata key 'cellm.format_version': program format version {} is "
                    "not supported (cellm reads {})",
                    version, kFormatVersion));
  }
  CELLM_ASSIGN_OR_RETURN(spec.max_context_len, read_positive(file, p + "max_context_len"));
  CELLM_ASSIGN_OR_RETURN(spec.max_step_tokens, read_positive(file, p + "max_step_tokens"));
  CELLM_ASSIGN_OR_RETURN(spec.min_prefill_chunk, read_positive(file, p + "min_prefill_chunk"));
  CELLM_ASSIGN_OR_RETURN(spec.decode_widths, read_list(file, p + "decode_widths"));
  CELLM_ASSIGN_OR_RETURN(std::string mode, read_string(file, p + "logits_to_keep_mode"));
  bool known_mode = false;
  for (LogitsToKeepMode candidate :
       {LogitsToKeepMode::kSelected, LogitsToKeepMode::kFull, LogitsToKeepMode::kLast}) {
    if (logits_to_keep_mode_name(candidate) == mode) {
      spec.logits_to_keep_mode = candidate;
      known_mode = true;
    }
  }
  if (!known_mode) {
    return data_loss("program metadata key 'cellm.logits_to_keep_mode' has unknown value " +
                     gguf_quote(mode) + " (selected, full or last)");
  }
  CELLM_ASSIGN_OR_RETURN(spec.kv_layout, read_string(file, p + "kv.layout"));
  CELLM_ASSIGN_OR_RETURN(spec.kv_max_cells, read_positive(file, p + "kv.max_cells"));
  CELLM_ASSIGN_OR_RETURN(std::string dtype, read_string(file, p + "kv.dtype"));
  StatusOr<KvDtype> parsed = parse_kv_dtype(dtype);
  if (!parsed.ok()) return parsed.status().with_context("program metadata key 'cellm.kv.dtype'");
  spec.kv_dtype = *parsed;
  CELLM_ASSIGN_OR_RETURN(spec.kv_heads, read_list(file, p + "kv.heads"));
  CELLM_ASSIGN_OR_RETURN(spec.kv_head_dims, read_list(file, p + "kv.head_dims"));
  CELLM_ASSIGN_OR_RETURN(spec.kv_windows, read_list(file, p + "kv.windows"));
  CELLM_ASSIGN_OR_RETURN(spec.vocab_size, read_positive(file, p + "vocab_size"));
  CELLM_ASSIGN_OR_RETURN(spec.source, read_string(file, p + "source"));
  return spec;
}

Status ProgramSpec::validate(const ModelConfig& config) const {
  const int32_t w = max_step_tokens;
  const int32_t m = min_prefill_chunk;
  if (m < 1) return invalid_argument("cellm.min_prefill_chunk must be at least 1");
  if (w < m) {
    return invalid_argument(fmt::format(
        "cellm.max_step_tokens (W = {}) must be at least cellm.min_prefill_chunk (m = {})", w, m));
  }
  if (kv_max_cells < w) {
    return invalid_argument(
        fmt::format("cellm.kv.max_cells ({}) must be at least cellm.max_step_tokens (W = {})",
                    kv_max_cells, w));
  }
  if (w >= max_context_len) {
    return invalid_argument(
        fmt::format("cellm.max_step_tokens (W = {}) must be below cellm.max_context_len ({})", w,
                    max_context_len));
  }
  if (decode_widths.empty() || decode_widths.front() != 1) {
    return invalid_argument("cellm.decode_widths must start at 1");
  }
  for (size_t i = 1; i < decode_widths.size(); ++i) {
    if (decode_widths[i] <= decode_widths[i - 1]) {
      return invalid_argument("cellm.decode_widths must be strictly ascending");
    }
  }
  if (decode_widths.back() > w) {
    return invalid_argument(
        fmt::format("cellm.decode_widths: {} is wider than W = {}", decode_widths.back(), w));
  }
  if (kv_layout != "cell") {
    return unimplemented("cellm.kv.layout " + gguf_quote(kv_layout) +
                         " is not supported (only 'cell')");
  }
  const auto layers = static_cast<size_t>(config.num_layers);
  if (kv_heads.size() != layers || kv_head_dims.size() != layers || kv_windows.size() != layers) {
    return invalid_argument(
        fmt::format("cellm.kv.heads/head_dims/windows must have one entry per layer ({})", layers));
  }
  for (size_t i = 0; i < layers; ++i) {
    if (kv_heads[i] != config.num_kv_heads || kv_head_dims[i] != config.head_dim) {
      return invalid_argument(fmt::format(
          "cellm.kv.heads/head_dims of layer {} ({} x {}) differ from the model ({} x {})", i,
          kv_heads[i], kv_head_dims[i], config.num_kv_heads, config.head_dim));
    }
  }
  for (size_t i = 0; i < layers && i < config.layer_windows.size(); ++i) {
    if (kv_windows[i] != config.layer_windows[i]) {
      return invalid_argument(
          fmt::format("cellm.kv.windows of layer {} ({}) differs from the model's attention "
                      "window ({})",
                      i, kv_windows[i], config.layer_windows[i]));
    }
  }
  if (vocab_size != config.vocab_size) {
    return invalid_argument(
        fmt::format("cellm.vocab_size ({}) differs from the model's LM head ({})", vocab_size,
                    config.vocab_size));
  }
  return ok_status();
}

std::vector<std::pair<std::string, GgufValue>> ProgramSpec::to_metadata() const {
  const std::string p(kPrefix);
  return {
      {p + "format_version", GgufValue::u32(format_version)},
      {p + "max_context_len", GgufValue::u32(static_cast<uint32_t>(max_context_len))},
      {p + "max_step_tokens", GgufValue::u32(static_cast<uint32_t>(max_step_tokens))},
      {p + "min_prefill_chunk", GgufValue::u32(static_cast<uint32_t>(min_prefill_chunk))},
      {p + "decode_widths", u32_array(decode_widths)},
      {p + "logits_to_keep_mode",
       GgufValue::string(std::string(logits_to_keep_mode_name(logits_to_keep_mode)))},
      {p + "kv.layout", GgufValue::string(kv_layout)},
      {p + "kv.max_cells", GgufValue::u32(static_cast<uint32_t>(kv_max_cells))},
      {p + "kv.dtype", GgufValue::string(std::string(kv_dtype_name(kv_dtype)))},
      {p + "kv.heads", u32_array(kv_heads)},
      {p + "kv.head_dims", u32_array(kv_head_dims)},
      {p + "kv.windows", u32_array(kv_windows)},
      {p + "vocab_size", GgufValue::u32(static_cast<uint32_t>(vocab_size))},
      {p + "source", GgufValue::string(source)},
  };
}

std::string ProgramSpec::summary() const {
  return fmt::format(
      "W {} (max_step_tokens), m {} (min_prefill_chunk), decode widths {}, logits {}, context {}, "
      "cache {} x {} cells of {}, vocab {}, source '{}'",
      max_step_tokens, min_prefill_chunk, decode_widths,
      logits_to_keep_mode_name(logits_to_keep_mode), max_context_len, kv_layout, kv_max_cells,
      kv_dtype_name(kv_dtype), vocab_size, source);
}

}  // namespace cellm
