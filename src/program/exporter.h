// export_program: writes a program (DESIGN §3) from a GGUF model, a Hugging Face checkpoint or a
// GPTQ-prequantized checkpoint — what `cellm export` runs (apps/cellm/cmd_export.cpp is a thin
// CLI over it; tests call it directly).
//
// Steps: check the options (each bad value is an InvalidArgument naming its flag); plan the
// output (model keys, tokenizer keys, one entry per tensor with its output type; nothing read
// yet); validate the plan before writing a byte — ModelConfig and Tokenizer are built from a
// probe GGUF holding the planned metadata, the ProgramSpec is validated against the config, the
// tokenizer's size against the LM head; then stream the tensors through GgufWriter, one tensor in
// memory at a time, into `<output>.partial` (the writer itself goes through `.partial.tmp`);
// load that with Program::load, and only then rename it to `output`. A failure at any step
// leaves no file behind and `output` as it was.
// Quantization (`quant`): norms, biases and rope factors stay f32; matrices (the token embedding
// included) become the requested type; a matrix whose rows are not a multiple of 32 elements
// cannot be q8_0/q4_0 and keeps its source type (f32/f16/bf16) — said in the log and in
// ExportReport::notes (stories260K's ffn of 172 is one). GPTQ layers keep their repacked type.
// Thread-safety: one call at a time per output path; the progress callback runs on the caller's
// thread.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "program/program_spec.h"

namespace cellm {

enum class ExportSource { kGguf, kCheckpoint, kPrequantized };
enum class ExportQuant { kKeep, kF32, kF16, kBF16, kQ8_0, kQ4_0 };

std::string_view export_quant_name(ExportQuant quant);
// "keep", "f32", "f16", "bf16", "q8_0", "q4_0"; InvalidArgument naming --quant otherwise.
StatusOr<ExportQuant> parse_export_quant(std::string_view name);
// "1", "1,2,4,8": InvalidArgument naming --decode-widths for anything else (order is checked
// by export_program).
StatusOr<std::vector<int32_t>> parse_decode_widths(std::string_view text);

// ExportOptions::min_prefill_chunk's "choose for me": auto_min_prefill_chunk (program_spec.h).
inline constexpr int32_t kAutoMinPrefillChunk = 0;
// "auto" -> kAutoMinPrefillChunk, "17" -> 17: InvalidArgument naming --min-prefill-chunk for
// anything else (the range is checked by export_program).
StatusOr<int32_t> parse_min_prefill_chunk(std::string_view text);

struct ExportProgress {
  size_t num_tensors_done = 0;
  size_t num_tensors = 0;
  uint64_t bytes_done = 0;  // output tensor bytes written so far
  uint64_t total_bytes = 0;
  std::string_view tensor;  // the tensor just written
};

struct ExportOptions {
  ExportSource source = ExportSource::kGguf;
  std::string input;           // --gguf FILE, --checkpoint-dir DIR or --prequantized DIR
  std::string output;          // --output FILE (required)
  std::string tokenizer_path;  // --tokenizer FILE: a GGUF whose tokenizer.* keys to use
  ExportQuant quant = ExportQuant::kKeep;
  int32_t max_seq_len = 0;  // --max-seq-len; 0 = the model's context length
  int32_t max_step_tokens = ProgramSpec::kDefaultMaxStepTokens;  // W
  // m; kAutoMinPrefillChunk: one past the widest decode width, at least 5, at most W
  // (auto_min_prefill_chunk) — 257 with the default widths and W 512.
  int32_t min_prefill_chunk = kAutoMinPrefillChunk;
  int32_t max_cells = ProgramSpec::kDefaultMaxCells;
  // Static decode widths; empty: kRecommendedDecodeWidths below W (recommended_decode_widths),
  // 1, 2, 4 ... 256 with W 512.
  std::vector<int32_t> decode_widths;
  KvDtype kv_dtype = KvDtype::kF32;
  std::function<void(const ExportProgress&)> on_progress;  // optional, after each tensor
};

struct ExportReport {
  std::string output;
  ProgramSpec spec;
  size_t num_tensors = 0;
  uint64_t file_size_bytes = 0;
  std::vector<std::string> notes;  // fallbacks and defaults worth telling the user
};

StatusOr<ExportReport> export_program(const ExportOptions& options);

}  // namespace cellm
