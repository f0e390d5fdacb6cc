#include "program/exporter.h"

#include <fmt/format.h>

#include <charconv>
#include <cstdio>
#include <filesystem>

#include "core/logging.h"
#include "gguf/gguf_writer.h"
#include "model/model_config.h"
#include "program/export_plan.h"
#include "program/program.h"
#include "tokenizer/tokenizer.h"

namespace cellm {
namespace {

constexpr std::pair<ExportQuant, std::string_view> kQuantNames[] = {
    {ExportQuant::kKeep, "keep"}, {ExportQuant::kF32, "f32"},   {ExportQuant::kF16, "f16"},
    {ExportQuant::kBF16, "bf16"}, {ExportQuant::kQ8_0, "q8_0"}, {ExportQuant::kQ4_0, "q4_0"},
};

// The flag-level rules of DESIGN §3, checked before any input is read; errors name the flags.
Status check_options(const ExportOptions& o) {
  if (o.output.empty()) return invalid_argument("--output is required");
  if (o.input.empty())
    return invalid_argument("no input: pass --gguf, --checkpoint-dir or --prequantized");
  if (o.min_prefill_chunk < 1) {
    return invalid_argument(
        fmt::format("--min-prefill-chunk ({}) must be at least 1 (or auto)", o.min_prefill_chunk));
  }
  if (o.max_step_tokens < o.min_prefill_chunk) {
    return invalid_argument(
        fmt::format("--max-step-tokens (W = {}) must be at least --min-prefill-chunk (m = {})",
                    o.max_step_tokens, o.min_prefill_chunk));
  }
  if (o.max_cells < o.max_step_tokens) {
    return invalid_argument(
        fmt::format("--max-cells ({}) must be at least --max-step-tokens (W = {})", o.max_cells,
                    o.max_step_tokens));
  }
  if (o.max_seq_len < 0) return invalid_argument("--max-seq-len must be positive");
  if (o.max_seq_len > 0 && o.max_step_tokens >= o.max_seq_len) {
    return invalid_argument(
        fmt::format("--max-step-tokens (W = {}) must be below --max-seq-len ({})",
                    o.max_step_tokens, o.max_seq_len));
  }
  if (o.decode_widths.empty() || o.decode_widths.front() != 1) {
    return invalid_argument("--decode-widths must start at 1");
  }
  for (size_t i = 1; i < o.decode_widths.size(); ++i) {
    if (o.decode_widths[i] <= o.decode_widths[i - 1]) {
      return invalid_argument("--decode-widths must be strictly ascending");
    }
  }
  if (o.decode_widths.back() > o.max_step_tokens) {
    return invalid_argument(
        fmt::format("--decode-widths: {} is wider than --max-step-tokens (W = {})",
                    o.decode_widths.back(), o.max_step_tokens));
  }
  return ok_status();
}

// The plan's model and tokenizer as the written file will present them: a probe GGUF holds the
// planned metadata and a one-element tensor per planned name (ModelConfig reads names, not data).
struct ProbeResult {
  ModelConfig config;
  int32_t num_tokens = 0;
};

StatusOr<ProbeResult> probe(const ExportPlan& plan, const std::string& where) {
  GgufWriter writer;
  for (const auto& [key, value] : plan.metadata) {
    CELLM_RETURN_IF_ERROR(writer.add_metadata(key, value).with_context(where));
  }
  static const float kZero = 0.0f;
  const std::span<const uint8_t> one(reinterpret_cast<const uint8_t*>(&kZero), sizeof(kZero));
  for (const PlannedTensor& t : plan.tensors) {
    CELLM_RETURN_IF_ERROR(
        writer.add_tensor(t.name, TensorType::kF32, {1}, one).with_context(where));
  }
  CELLM_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, writer.write_bytes());
  CELLM_ASSIGN_OR_RETURN(GgufFile file, GgufFile::parse(bytes));
  StatusOr<ModelConfig> config = ModelConfig::from_gguf(file);
  if (!config.ok()) return config.status().with_context(where);
  StatusOr<Tokenizer> tokenizer = Tokenizer::from_gguf(file);
  if (!tokenizer.ok()) return tokenizer.status().with_context(where + ": tokenizer");
  return ProbeResult{std::move(config).value(), tokenizer->vocab_size()};
}

StatusOr<ProgramSpec> make_spec(const ExportOptions& o, const ModelConfig& config,
                                std::vector<std::string>* notes) {
  ProgramSpec spec = ProgramSpec::defaults_for(config);
  spec.max_step_tokens = o.max_step_tokens;
  spec.min_prefill_chunk = o.min_prefill_chunk;
  spec.kv_max_cells = o.max_cells;
  spec.decode_widths = o.decode_widths;
  spec.kv_dtype = o.kv_dtype;
  spec.max_context_len = o.max_seq_len > 0 ? o.max_seq_len : config.context_length;
  if (o.max_seq_len == 0 && spec.max_step_tokens >= spec.max_context_len) {
    return invalid_argument(fmt::format(
        "--max-step-tokens (W = {}) must be below the model's context length ({}); pass a "
        "smaller --max-step-tokens or a larger --max-seq-len",
        spec.max_step_tokens, spec.max_context_len));
  }
  if (o.max_seq_len > config.context_length) {
    notes->push_back(fmt::format("--max-seq-len {} is past the model's trained context length {}",
                                 o.max_seq_len, config.context_length));
    CELLM_LOG(kWarn) << notes->back();
  }
  return spec;
}

}  // namespace

std::string_view export_quant_name(ExportQuant quant) {
  for (const auto& [value, name] : kQuantNames) {
    if (value == quant) return name;
  }
  return "unknown";
}

StatusOr<ExportQuant> parse_export_quant(std::string_view name) {
  for (const auto& [value, known] : kQuantNames) {
    if (known == name) return value;
  }
  return invalid_argument("--quant '" + std::string(name) +
                          "' is not one of keep, f32, f16, bf16, q8_0, q4_0");
}

StatusOr<std::vector<int32_t>> parse_decode_widths(std::string_view text) {
  std::vector<int32_t> widths;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string_view item = text.substr(start, comma - start);
    int32_t value = 0;
    const auto [end, error] = std::from_chars(item.data(), item.data() + item.size(), value);
    if (item.empty() || error != std::errc() || end != item.data() + item.size() || value < 1) {
      return invalid_argument("--decode-widths '" + std::string(text) +
                              "' is not a comma-separated list of positive widths");
    }
    widths.push_back(value);
    start = comma + 1;
  }
  return widths;
}

StatusOr<int32_t> parse_min_prefill_chunk(std::string_view text) {
  if (text == "auto") return kAutoMinPrefillChunk;
  int32_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) {
    return invalid_argument("--min-prefill-chunk '" + std::string(text) +
                            "': expected a positive count or auto");
  }
  return value;
}

StatusOr<ExportReport> export_program(const ExportOptions& given) {
  // The slicing plan the defaults stand for: the recommended widths below W, the automatic m.
  ExportOptions options = given;
  if (options.decode_widths.empty()) {
    options.decode_widths = recommended_decode_widths(options.max_step_tokens);
  }
  if (options.min_prefill_chunk == kAutoMinPrefillChunk) {
    options.min_prefill_chunk =
        auto_min_prefill_chunk(options.decode_widths, options.max_step_tokens);
  }
  CELLM_RETURN_IF_ERROR(check_options(options));
  const bool from_gguf = options.source == ExportSource::kGguf;
  CELLM_ASSIGN_OR_RETURN(ExportPlan plan,
                         from_gguf ? plan_from_gguf(options) : plan_from_checkpoint(options));
  CELLM_ASSIGN_OR_RETURN(ProbeResult probed, probe(plan, options.input));
  ExportReport report;
  report.notes = plan.notes;
  CELLM_ASSIGN_OR_RETURN(report.spec, make_spec(options, probed.config, &report.notes));
  report.spec.source = plan.source;
  CELLM_RETURN_IF_ERROR(report.spec.validate(probed.config));
  int64_t embedding_rows = probed.config.vocab_size;
  for (const PlannedTensor& t : plan.tensors) {
    if (t.name == "token_embd.weight" && t.dims.size() == 2) {
      embedding_rows = static_cast<int64_t>(t.dims[1]);
    }
  }
  if (probed.num_tokens != probed.config.vocab_size || probed.num_tokens != embedding_rows) {
    return invalid_argument(fmt::format(
        "{}: the tokenizer has {} tokens but the model's vocabulary (token embedding rows) is {}{}",
        options.input, probed.num_tokens, embedding_rows,
        options.tokenizer_path.empty() ? "" : " (--tokenizer " + options.tokenizer_path + ")"));
  }

  GgufWriter writer;
  for (const auto& [key, value] : plan.metadata) {
    CELLM_RETURN_IF_ERROR(writer.add_metadata(key, value));
  }
  for (auto& [key, value] : report.spec.to_metadata()) {
    CELLM_RETURN_IF_ERROR(writer.add_metadata(std::move(key), std::move(value)));
  }
  ExportProgress progress;
  progress.num_tensors = plan.tensors.size();
  for (PlannedTensor& t : plan.tensors) {
    CELLM_ASSIGN_OR_RETURN(const uint64_t row_bytes, row_size_bytes(t.type, t.dims[0]));
    uint64_t size_bytes = row_bytes;
    for (size_t i = 1; i < t.dims.size(); ++i) size_bytes *= t.dims[i];
    progress.total_bytes += size_bytes;
    GgufWriter::FillTensor fill = [&options, &progress, name = t.name, size_bytes,
                                   inner = std::move(t.fill)](std::span<uint8_t> out) {
      CELLM_RETURN_IF_ERROR(inner(out));
      ++progress.num_tensors_done;
      progress.bytes_done += size_bytes;
      progress.tensor = name;
      if (options.on_progress) options.on_progress(progress);
      return ok_status();
    };
    CELLM_RETURN_IF_ERROR(writer.add_tensor(t.name, t.type, t.dims, std::move(fill)));
  }

  // Write beside the output, check it loads as a program, then move it into place.
  const std::string partial = options.output + ".partial";
  if (Status written = writer.write_file(partial); !written.ok()) {
    return written.with_context("writing " + options.output);
  }
  if (StatusOr<Program> loaded = Program::load(partial); !loaded.ok()) {
    std::remove(partial.c_str());
    return loaded.status().with_context("the written program does not load");
  }
  std::error_code error;
  std::filesystem::rename(partial, options.output, error);
  if (error) {
    std::remove(partial.c_str());
    return io_error("cannot rename '" + partial + "' to '" + options.output +
                    "': " + error.message());
  }
  report.output = options.output;
  report.num_tensors = plan.tensors.size();
  report.file_size_bytes = writer.file_size_bytes();
  return report;
}

}  // namespace cellm
