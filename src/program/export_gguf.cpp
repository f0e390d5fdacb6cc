// plan_from_gguf (export_plan.h): a GGUF model's tensors copied or converted, its metadata kept
// (tokenizer.* replaced by --tokenizer's when given; cellm.* dropped, the exporter adds its own).
#include <fmt/format.h>

#include <cstring>
#include <filesystem>
#include <memory>

#include "gguf/dequantize.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "program/export_plan.h"

namespace cellm {

StatusOr<ExportPlan> plan_from_gguf(const ExportOptions& options) {
  StatusOr<GgufFile> opened = GgufFile::open(options.input);
  if (!opened.ok()) return opened.status().with_context("--gguf");
  auto file = std::make_shared<GgufFile>(std::move(opened).value());
  // The input must be a model cellm runs before anything is written.
  StatusOr<ModelConfig> config = ModelConfig::from_gguf(*file);
  if (!config.ok()) return config.status().with_context("--gguf " + options.input);
  StatusOr<ModelWeights> weights = ModelWeights::from_gguf(*file, *config);
  if (!weights.ok()) return weights.status().with_context("--gguf " + options.input);

  ExportPlan plan;
  GgufKeys tokenizer_keys;
  const bool override_tokenizer = !options.tokenizer_path.empty();
  if (override_tokenizer) {
    CELLM_ASSIGN_OR_RETURN(tokenizer_keys, tokenizer_keys_from_file(options.tokenizer_path));
  }
  const bool requantize = options.quant != ExportQuant::kKeep;
  for (const auto& [key, value] : file->metadata()) {
    if (key.starts_with("cellm.")) continue;
    if (override_tokenizer && key.starts_with("tokenizer.")) continue;
    if (requantize && key == "general.file_type") continue;
    plan.metadata.emplace_back(key, value);
  }
  plan.metadata.insert(plan.metadata.end(), tokenizer_keys.begin(), tokenizer_keys.end());

  for (const GgufTensorInfo& info : file->tensors()) {
    // Matrices follow --quant and vectors become f32 (what cellm computes with); tensors of
    // more dimensions are no part of the architectures cellm runs and are copied as they are.
    const bool is_matrix = info.dims.size() == 2;
    const TensorType type =
        info.dims.size() > 2
            ? info.type
            : choose_output_type(options.quant, info.type, is_matrix,
                                 static_cast<int64_t>(info.dims[0]), info.name, &plan.notes);
    const std::span<const uint8_t> bytes = file->tensor_data(info);
    PlannedTensor tensor{info.name, type, info.dims, nullptr};
    if (type == info.type) {
      tensor.fill = [bytes](std::span<uint8_t> out) {
        std::memcpy(out.data(), bytes.data(), bytes.size());
        return ok_status();
      };
    } else {
      if (!can_dequantize(info.type)) {
        return unimplemented(fmt::format(
            "--gguf {}: tensor '{}' has type {}, which cellm cannot "
            "convert to {}; use --quant keep",
            options.input, info.name, tensor_type_name(info.type), tensor_type_name(type)));
      }
      const TensorType src_type = info.type;
      const auto num_cols = static_cast<int64_t>(info.dims[0]);
      const std::string name = info.name;
      tensor.fill = [=](std::span<uint8_t> out) {
        return convert_rows(name, src_type, bytes, type, out, num_cols);
      };
    }
    plan.tensors.push_back(std::move(tensor));
  }
  if (requantize) {
    if (const int32_t file_type = gguf_file_type(plan.tensors); file_type >= 0) {
      plan.metadata.emplace_back("general.file_type",
                                 GgufValue::u32(static_cast<uint32_t>(file_type)));
    }
  }
  plan.source = fmt::format(
      "gguf {} (quant {}{}{})", std::filesystem::path(options.input).filename().string(),
      export_quant_name(options.quant), override_tokenizer ? ", tokenizer from " : "",
      override_tokenizer ? std::filesystem::path(options.tokenizer_path).filename().string() : "");
  plan.inputs = file;
  return plan;
}

}  // namespace cellm
