// libFuzzer target for what reads the meaning of a GGUF file: bytes that parse as GGUF go through
// ModelConfig, ModelWeights and ProgramSpec stage by stage, then Program::from_file
// (program_testing::load_and_check). Each accepted result must keep every promise the test support
// recomputes from the file (heads, widths, rope constants, tensor shapes and types, W, m, decode
// widths, cache geometry), and each refusal must be one printable line naming the file and a key
// or tensor; anything else aborts, and ASan/UBSan and -malloc_limit_mb catch the rest. Bytes the
// GGUF reader refuses are gguf_reader_fuzz's business and are skipped here.
//   cmake --preset fuzz && cmake --build build/fuzz --target model_load_fuzz model_fuzz_seeds
//   build/fuzz/fuzz/model_fuzz_seeds corpus MODEL.gguf... && build/fuzz/fuzz/model_load_fuzz
//   corpus -max_total_time=60 -malloc_limit_mb=512
#include <cstdio>
#include <cstdlib>

#include "core/logging.h"
#include "gguf/gguf_file.h"
#include "program/program_test_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // A plain model's defaults are said once per load at info level.
  cellm::set_log_level(cellm::LogLevel::kWarn);
  cellm::StatusOr<cellm::GgufFile> file = cellm::GgufFile::parse(std::span(data, size));
  if (!file.ok()) return 0;
  const cellm::program_testing::LoadOutcome outcome =
      cellm::program_testing::load_and_check(std::move(file).value());
  if (!outcome.problem.empty()) {
    std::fprintf(stderr, "model_load_fuzz: %s\n", outcome.problem.c_str());
    std::abort();
  }
  return 0;
}
