// Writes a seed corpus for model_load_fuzz: for each GGUF model named on the command line, the
// model itself, a copy with its vocabulary cut to its first 300 tokens (the tokenizer arrays, the
// embedding's and the LM head's rows; a few KiB for llama-2-tiny-random, so the fuzzer runs fast),
// and a program exported from each (W 64, the recommended decode widths). Says which seeds load.
//   model_fuzz_seeds OUT_DIR MODEL.gguf...
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

#include "core/logging.h"
#include "gguf/gguf_file.h"
#include "program/exporter.h"
#include "program/program_mutants.h"
#include "program/program_test_support.h"

namespace {

constexpr size_t kCutVocab = 300;

bool write(const std::string& path, std::span<const uint8_t> bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  return static_cast<bool>(out);
}

std::string stem(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  if (name.ends_with(".gguf")) name.resize(name.size() - 5);
  return name;
}

// Whether `path` loads (said on stdout), then a program exported from it beside it.
void check_and_export(const std::string& path, const std::string& out_dir) {
  cellm::StatusOr<cellm::GgufFile> file = cellm::GgufFile::open(path);
  const cellm::program_testing::LoadOutcome outcome =
      file.ok() ? cellm::program_testing::load_and_check(std::move(file).value())
                : cellm::program_testing::LoadOutcome{};
  std::printf("%s: %s%s\n", path.c_str(), outcome.loaded ? "loads" : "refused: ",
              outcome.loaded ? "" : outcome.refusal.c_str());
  if (!outcome.loaded) return;
  cellm::ExportOptions options;
  options.input = path;
  options.output = out_dir + "/" + stem(path) + ".program.gguf";
  options.max_step_tokens = 64;
  cellm::StatusOr<cellm::ExportReport> report = cellm::export_program(options);
  std::printf("%s: %s\n", options.output.c_str(),
              report.ok() ? "exported" : report.status().to_string().c_str());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: model_fuzz_seeds OUT_DIR MODEL.gguf...\n");
    return 2;
  }
  cellm::set_log_level(cellm::LogLevel::kWarn);
  const std::string out_dir = argv[1];
  int failures = 0;
  for (int i = 2; i < argc; ++i) {
    const std::string input = argv[i];
    cellm::StatusOr<cellm::GgufFile> file = cellm::GgufFile::open(input);
    if (!file.ok()) {
      std::fprintf(stderr, "%s\n", file.status().to_string().c_str());
      ++failures;
      continue;
    }
    const std::string whole = out_dir + "/" + stem(input) + ".gguf";
    std::ifstream in(input, std::ios::binary);
    const std::vector<uint8_t> bytes{std::istreambuf_iterator<char>(in), {}};
    cellm::StatusOr<std::vector<uint8_t>> cut = cellm::program_testing::write_editable(
        cellm::program_testing::cut_vocabulary(*file, kCutVocab));
    const std::string small = out_dir + "/" + stem(input) + "-vocab300.gguf";
    if (!write(whole, bytes) || !cut.ok() || !write(small, *cut)) {
      std::fprintf(stderr, "%s: cannot write its seeds\n", input.c_str());
      ++failures;
      continue;
    }
    check_and_export(whole, out_dir);
    check_and_export(small, out_dir);
  }
  return failures == 0 ? 0 : 1;
}
