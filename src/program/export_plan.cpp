#include "program/export_plan.h"

#include <fmt/format.h>

#include <map>

#include "core/logging.h"
#include "gguf/dequantize.h"
#include "gguf/quantize.h"

namespace cellm {

TensorType choose_output_type(ExportQuant quant, TensorType source_type, bool is_matrix,
                              int64_t row_elements, const std::string& name,
                              std::vector<std::string>* notes) {
  if (!is_matrix) return TensorType::kF32;
  const bool plain_source = source_type == TensorType::kF32 || source_type == TensorType::kF16 ||
                            source_type == TensorType::kBF16;
  switch (quant) {
    case ExportQuant::kKeep:
      return source_type;
    case ExportQuant::kF32:
      return TensorType::kF32;
    case ExportQuant::kF16:
      return TensorType::kF16;
    case ExportQuant::kBF16:
      return TensorType::kBF16;
    case ExportQuant::kQ8_0:
    case ExportQuant::kQ4_0: {
      const TensorType wanted = quant == ExportQuant::kQ8_0 ? TensorType::kQ8_0 : TensorType::kQ4_0;
      if (row_elements % 32 == 0) return wanted;
      const TensorType kept = plain_source ? source_type : TensorType::kF32;
      std::string note = fmt::format(
          "tensor '{}': rows of {} elements are not a multiple of 32, so it stays {} "
          "instead of {}",
          name, row_elements, tensor_type_name(kept), tensor_type_name(wanted));
      CELLM_LOG(kWarn) << note;
      notes->push_back(std::move(note));
      return kept;
    }
  }
  return source_type;
}

Status convert_rows(const std::string& name, TensorType src_type, std::span<const uint8_t> src,
                    TensorType dst_type, std::span<uint8_t> dst, int64_t num_cols) {
  const auto context = [&](const Status& status) {
    return status.with_context("tensor '" + name + "'");
  };
  StatusOr<uint64_t> src_row_bytes = row_size_bytes(src_type, static_cast<uint64_t>(num_cols));
  StatusOr<uint64_t> dst_row_bytes = row_size_bytes(dst_type, static_cast<uint64_t>(num_cols));
  if (!src_row_bytes.ok()) return context(src_row_bytes.status());
  if (!dst_row_bytes.ok()) return context(dst_row_bytes.status());
  if (*src_row_bytes == 0 || src.size() % *src_row_bytes != 0 ||
      src.size() / *src_row_bytes * *dst_row_bytes != dst.size()) {
    return internal_error("tensor '" + name + "': converted sizes do not agree");
  }
  std::vector<float> row(static_cast<size_t>(num_cols));  // [num_cols], f32
  const size_t num_rows = src.size() / *src_row_bytes;
  for (size_t r = 0; r < num_rows; ++r) {
    Status status = dequantize_row(src_type, src.subspan(r * *src_row_bytes, *src_row_bytes), row);
    if (status.ok()) {
      status = quantize_row(dst_type, row, dst.subspan(r * *dst_row_bytes, *dst_row_bytes));
    }
    if (!status.ok()) return context(status.with_context("row " + std::to_string(r)));
  }
  return ok_status();
}

int32_t gguf_file_type(const std::vector<PlannedTensor>& tensors) {
  std::map<TensorType, uint64_t> elements;  // type -> matrix elements
  for (const PlannedTensor& t : tensors) {
    if (t.dims.size() < 2) continue;
    elements[t.type] += t.dims[0] * t.dims[1];
  }
  TensorType dominant = TensorType::kF32;
  uint64_t most = 0;
  for (const auto& [type, count] : elements) {
    if (count > most) {
      most = count;
      dominant = type;
    }
  }
  switch (dominant) {  // llama.cpp's llama_ftype values
    case TensorType::kF32:
      return 0;
    case TensorType::kF16:
      return 1;
    case TensorType::kQ4_0:
      return 2;
    case TensorType::kQ8_0:
      return 7;
    case TensorType::kBF16:
      return 32;
    default:
      return -1;
  }
}

StatusOr<GgufKeys> tokenizer_keys_from_file(const std::string& path) {
  StatusOr<GgufFile> file = GgufFile::open(path);
  if (!file.ok()) return file.status().with_context("--tokenizer");
  GgufKeys keys = tokenizer_keys_from_gguf(*file);
  if (keys.empty()) {
    return not_found("--tokenizer " + path + ": the file has no tokenizer.* keys");
  }
  return keys;
}

}  // namespace cellm
