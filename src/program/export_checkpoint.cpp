// plan_from_checkpoint (export_plan.h): a Hugging Face checkpoint (plain or GPTQ-prequantized)
// mapped to GGUF tensors by model/hf_checkpoint.h, with llama.cpp-style model keys and the
// tokenizer from tokenizer.json or --tokenizer.
#include <fmt/format.h>

#include <filesystem>
#include <memory>

#include "gguf/quantize.h"
#include "model/hf_checkpoint.h"
#include "program/export_plan.h"

namespace cellm {
namespace {

// Writes GGUF tensor `t` as `type`, one row at a time.
Status fill_tensor(const CheckpointTensor& t, TensorType type, std::span<uint8_t> out) {
  CELLM_ASSIGN_OR_RETURN(const uint64_t row_bytes,
                         row_size_bytes(type, static_cast<uint64_t>(t.num_cols)));
  if (row_bytes * static_cast<uint64_t>(t.num_rows) != out.size()) {
    return internal_error("tensor '" + t.gguf_name + "': planned size does not agree");
  }
  if (t.gptq && type == t.source_type) {
    for (int64_t r = 0; r < t.num_rows; ++r) {
      t.gptq->repack_row(t.source_row(r),
                         out.subspan(static_cast<size_t>(r) * row_bytes, row_bytes));
    }
    return ok_status();
  }
  std::vector<float> row(static_cast<size_t>(t.num_cols));  // [num_cols], f32
  for (int64_t r = 0; r < t.num_rows; ++r) {
    HfCheckpoint::read_row_f32(t, r, row);
    const Status status =
        quantize_row(type, row, out.subspan(static_cast<size_t>(r) * row_bytes, row_bytes));
    if (!status.ok()) {
      return status.with_context(
          fmt::format("tensor '{}' (from '{}') row {}", t.gguf_name, t.hf_name, r));
    }
  }
  return ok_status();
}

std::string recipe(const HfCheckpoint& checkpoint, const ExportOptions& options) {
  const std::string dir_name =
      std::filesystem::path(options.input).lexically_normal().parent_path().filename().string();
  const std::string name = std::filesystem::path(options.input).filename().string();
  const std::string shown = name.empty() ? dir_name : name;
  const HfConfig& c = checkpoint.config();
  std::string dtype = "f32";
  for (const CheckpointTensor& t : checkpoint.tensors()) {
    if (t.is_matrix && !t.gptq) dtype = std::string(tensor_type_name(t.source_type));
  }
  std::string text;
  if (const auto& gptq = checkpoint.gptq_config(); gptq) {
    text = fmt::format("prequantized {} ({}, gptq 4-bit group {}, {} zeros{})", shown, c.model_type,
                       gptq->group_size, gptq->sym ? "symmetric" : "asymmetric",
                       gptq->zeros_stored_minus_one ? " stored minus one (v1)" : " (v2)");
  } else {
    text = fmt::format("checkpoint {} ({}, {})", shown, c.model_type, dtype);
  }
  text += fmt::format(", quant {}, tokenizer from {}", export_quant_name(options.quant),
                      options.tokenizer_path.empty()
                          ? std::string("tokenizer.json")
                          : std::filesystem::path(options.tokenizer_path).filename().string());
  return text;
}

}  // namespace

StatusOr<ExportPlan> plan_from_checkpoint(const ExportOptions& options) {
  const bool prequantized = options.source == ExportSource::kPrequantized;
  CELLM_ASSIGN_OR_RETURN(HfCheckpoint opened, HfCheckpoint::open(options.input, prequantized));
  auto checkpoint = std::make_shared<const HfCheckpoint>(std::move(opened));

  ExportPlan plan;
  plan.metadata = checkpoint->config().gguf_metadata();
  plan.metadata.emplace_back("general.quantization_version", GgufValue::u32(2));
  GgufKeys tokenizer_keys;
  if (!options.tokenizer_path.empty()) {
    CELLM_ASSIGN_OR_RETURN(tokenizer_keys, tokenizer_keys_from_file(options.tokenizer_path));
  } else if (has_hf_tokenizer(options.input)) {
    CELLM_ASSIGN_OR_RETURN(tokenizer_keys,
                           tokenizer_keys_from_hf(options.input, checkpoint->config()));
  } else {
    return not_found(
        fmt::format("checkpoint '{}' has no tokenizer.json; pass --tokenizer FILE "
                    "(a GGUF file whose vocabulary to use)",
                    options.input));
  }

  const std::vector<CheckpointTensor>& tensors = checkpoint->tensors();
  for (size_t i = 0; i < tensors.size(); ++i) {
    const CheckpointTensor& t = tensors[i];
    TensorType type = t.source_type;
    const bool dequantize_gptq = options.quant == ExportQuant::kF32 ||
                                 options.quant == ExportQuant::kF16 ||
                                 options.quant == ExportQuant::kBF16;
    if (!t.gptq || dequantize_gptq) {
      type = choose_output_type(options.quant, t.source_type, t.is_matrix, t.num_cols, t.gguf_name,
                                &plan.notes);
    }
    const CheckpointTensor* tensor = &t;  // lives in *checkpoint, which the plan keeps alive
    plan.tensors.push_back({t.gguf_name, type, t.dims(), [tensor, type](std::span<uint8_t> out) {
                              return fill_tensor(*tensor, type, out);
                            }});
  }
  if (const int32_t file_type = gguf_file_type(plan.tensors); file_type >= 0) {
    plan.metadata.emplace_back("general.file_type",
                               GgufValue::u32(static_cast<uint32_t>(file_type)));
  }
  plan.metadata.insert(plan.metadata.end(), tokenizer_keys.begin(), tokenizer_keys.end());
  plan.source = recipe(*checkpoint, options);
  plan.inputs = checkpoint;
  return plan;
}

}  // namespace cellm
