// `cellm export (--gguf FILE | --checkpoint-dir DIR | --prequantized DIR) --output FILE ...`:
// writes a program (DESIGN §3). A thin CLI over src/program/exporter.h: flags in, one summary on
// stdout, a progress bar on stderr when it is a terminal, one error line and exit status 1 on
// failure (2 for flags the exporter refuses before reading anything).
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "commands.h"
#include "program/exporter.h"

namespace cellm::app {
namespace {

struct ExportFlags {
  std::string gguf;
  std::string checkpoint_dir;
  std::string prequantized;
  std::string output;
  std::string tokenizer;
  std::string quant = "keep";
  int32_t max_seq_len = 0;
  int32_t max_step_tokens = ProgramSpec::kDefaultMaxStepTokens;
  int32_t max_cells = ProgramSpec::kDefaultMaxCells;
  std::string min_prefill_chunk = "auto";
  std::string decode_widths;  // empty: the recommended widths below W
  std::string kv_dtype = "f32";
};

// "\r[#####.....] 45%  12/27 tensors  412.0/1065.4 MB" on stderr, redrawn in place.
void draw_progress(const ExportProgress& p) {
  constexpr int kWidth = 30;
  const double fraction =
      p.total_bytes == 0 ? 1.0
                         : static_cast<double>(p.bytes_done) / static_cast<double>(p.total_bytes);
  const int filled = static_cast<int>(fraction * kWidth);
  fmt::print(stderr, "\r[{}{}] {:3.0f}%  {}/{} tensors  {:.1f}/{:.1f} MB", std::string(filled, '#'),
             std::string(kWidth - filled, '.'), fraction * 100.0, p.num_tensors_done, p.num_tensors,
             static_cast<double>(p.bytes_done) / 1e6, static_cast<double>(p.total_bytes) / 1e6);
  if (p.num_tensors_done == p.num_tensors) fmt::print(stderr, "\n");
  std::fflush(stderr);
}

int run_export(const ExportFlags& flags) {
  ExportOptions options;
  if (!flags.gguf.empty()) {
    options.source = ExportSource::kGguf;
    options.input = flags.gguf;
  } else if (!flags.checkpoint_dir.empty()) {
    options.source = ExportSource::kCheckpoint;
    options.input = flags.checkpoint_dir;
  } else {
    options.source = ExportSource::kPrequantized;
    options.input = flags.prequantized;
  }
  options.output = flags.output;
  options.tokenizer_path = flags.tokenizer;
  options.max_seq_len = flags.max_seq_len;
  options.max_step_tokens = flags.max_step_tokens;
  options.max_cells = flags.max_cells;
  const auto fail = [](const Status& status, int code) {
    std::cerr << "cellm export: " << status.message() << "\n";
    return code;
  };
  StatusOr<ExportQuant> quant = parse_export_quant(flags.quant);
  if (!quant.ok()) return fail(quant.status(), 2);
  options.quant = *quant;
  if (!flags.decode_widths.empty()) {
    StatusOr<std::vector<int32_t>> widths = parse_decode_widths(flags.decode_widths);
    if (!widths.ok()) return fail(widths.status(), 2);
    options.decode_widths = *widths;
  }
  StatusOr<int32_t> min_prefill_chunk = parse_min_prefill_chunk(flags.min_prefill_chunk);
  if (!min_prefill_chunk.ok()) return fail(min_prefill_chunk.status(), 2);
  options.min_prefill_chunk = *min_prefill_chunk;
  StatusOr<KvDtype> kv_dtype = parse_kv_dtype(flags.kv_dtype);
  if (!kv_dtype.ok()) return fail(kv_dtype.status().with_context("--kv-dtype"), 2);
  options.kv_dtype = *kv_dtype;
  if (isatty(STDERR_FILENO)) options.on_progress = draw_progress;

  StatusOr<ExportReport> report = export_program(options);
  if (!report.ok()) return fail(report.status(), 1);
  fmt::print("wrote {}: {} tensors, {} bytes\nprogram: {}\n", report->output, report->num_tensors,
             report->file_size_bytes, report->spec.summary());
  return 0;
}

}  // namespace

void add_export_command(CLI::App& app, CommandResult& result) {
  auto flags = std::make_shared<ExportFlags>();
  CLI::App* command =
      app.add_subcommand("export", "Write a program (GGUF + cellm.* metadata) from a model");
  CLI::Option_group* input = command->add_option_group("input", "exactly one model to export");
  input->add_option("--gguf", flags->gguf, "A GGUF model");
  input->add_option("--checkpoint-dir", flags->checkpoint_dir,
                    "A Hugging Face checkpoint directory (config.json, *.safetensors)");
  input->add_option("--prequantized", flags->prequantized,
                    "A GPTQ 4-bit Hugging Face checkpoint directory");
  input->require_option(1);
  command->add_option("--output", flags->output, "The program file to write")->required();
  command->add_option("--tokenizer", flags->tokenizer,
                      "A GGUF file whose tokenizer to use (when the checkpoint has none, or to "
                      "override it)");
  command->add_option("--quant", flags->quant, "keep, f32, f16, bf16, q8_0 or q4_0")
      ->capture_default_str();
  command->add_option("--max-seq-len", flags->max_seq_len,
                      "Positions one session may hold (default: the model's context length)");
  command->add_option("--max-step-tokens", flags->max_step_tokens, "W: the widest forward")
      ->capture_default_str();
  command->add_option("--max-cells", flags->max_cells, "Cells of the shared KV pool")
      ->capture_default_str();
  command
      ->add_option("--min-prefill-chunk", flags->min_prefill_chunk,
                   "m: the narrowest prefill; narrower slices run as decodes. auto: one past the "
                   "widest decode width, at least 5 and at most W (257 with the default widths)")
      ->capture_default_str();
  command->add_option("--decode-widths", flags->decode_widths,
                      "Static decode widths, ascending from 1: each is one CUDA graph "
                      "(default: 1,2,4,8,16,24,32,48,64,96,128,192,256, those below W)");
  command->add_option("--kv-dtype", flags->kv_dtype, "Cache cells: f32, f16 or bf16")
      ->capture_default_str();
  command->callback([flags, &result] { result.exit_code = run_export(*flags); });
}

}  // namespace cellm::app
