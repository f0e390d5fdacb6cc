// ExportPlan: what export_program will write — metadata and one entry per tensor with its output
// type, dims and a fill that produces its bytes — built from one input without reading tensor
// data. Internal to src/program (exporter.cpp runs a plan; export_gguf.cpp and
// export_checkpoint.cpp build one). The plan owns whatever the fills read (the mapped input).
// Thread-safety: built and run on one thread.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "gguf/tensor_type.h"
#include "program/exporter.h"
#include "program/hf_tokenizer.h"

namespace cellm {

struct PlannedTensor {
  std::string name;
  TensorType type = TensorType::kF32;
  std::vector<uint64_t> dims;  // innermost first
  GgufWriter::FillTensor fill;
};

struct ExportPlan {
  GgufKeys metadata;  // model and tokenizer keys, no cellm.* keys
  std::vector<PlannedTensor> tensors;
  std::string source;                  // cellm.source: the input and the recipe
  std::vector<std::string> notes;      // fallbacks, said in the log too
  std::shared_ptr<const void> inputs;  // keeps what the fills read alive
};

// The output type of a tensor: vectors f32; matrices per `quant`, falling back to their source
// type (f32 for a quantized source) when a row is not a multiple of 32 elements for q8_0/q4_0
// (a note is added naming the tensor).
TensorType choose_output_type(ExportQuant quant, TensorType source_type, bool is_matrix,
                              int64_t row_elements, const std::string& name,
                              std::vector<std::string>* notes);

// Converts rows of `num_cols` elements from `src_type` to `dst_type` (dequantize, then quantize
// row by row); errors name `name`. dst must be exactly the converted size.
Status convert_rows(const std::string& name, TensorType src_type, std::span<const uint8_t> src,
                    TensorType dst_type, std::span<uint8_t> dst, int64_t num_cols);

// general.file_type (llama.cpp's llama_ftype) of the plan's matrices, or -1 when none fits.
int32_t gguf_file_type(const std::vector<PlannedTensor>& tensors);

// `--tokenizer FILE`'s tokenizer.* keys.
StatusOr<GgufKeys> tokenizer_keys_from_file(const std::string& path);

StatusOr<ExportPlan> plan_from_gguf(const ExportOptions& options);
StatusOr<ExportPlan> plan_from_checkpoint(const ExportOptions& options);  // also prequantized

}  // namespace cellm
