// libFuzzer target for the GGUF reader: parses arbitrary bytes with GgufFile::parse. A parsed
// file must keep every promise gguf_testing::check_parsed_file recomputes from the bytes, and
// every getter, summary and tensor span must be safe to use; a refusal must be a one-line
// "gguf: " message. Anything else aborts, and ASan/UBSan catch the rest.
//   cmake --preset fuzz && cmake --build build/fuzz --target gguf_reader_fuzz gguf_fuzz_seeds
//   build/fuzz/fuzz/gguf_fuzz_seeds corpus && build/fuzz/fuzz/gguf_reader_fuzz corpus
//   -max_total_time=60
#include <cstdio>
#include <cstdlib>

#include "gguf/gguf_file.h"
#include "gguf/gguf_test_support.h"

namespace {

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "gguf_reader_fuzz: %s\n", what.c_str());
  std::abort();
}

void use_every_accessor(const cellm::GgufFile& file) {
  for (const auto& [key, value] : file.metadata()) {
    (void)file.get_u32(key);
    (void)file.get_u64(key);
    (void)file.get_i32(key);
    (void)file.get_f32(key);
    (void)file.get_bool(key);
    (void)file.get_string(key);
    (void)file.get_string_array(key);
    (void)file.get_f32_array(key);
    (void)file.get_i32_array(key);
    (void)file.get_u32_array(key);
    (void)value.summary();
  }
  volatile uint8_t sink = 0;
  for (const cellm::GgufTensorInfo& info : file.tensors()) {
    const std::span<const uint8_t> data = file.tensor_data(info);
    if (!data.empty()) sink = sink ^ data.front() ^ data.back();
    (void)info.shape_string();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> bytes(data, size);
  cellm::StatusOr<cellm::GgufFile> file = cellm::GgufFile::parse(bytes);
  if (!file.ok()) {
    const cellm::Status status = file.status();
    const std::string& message = status.message();
    if (message.rfind("gguf: ", 0) != 0 || message.find('\n') != std::string::npos) {
      fail("bad refusal message: " + status.to_string());
    }
    return 0;
  }
  if (std::string problem = cellm::gguf_testing::check_parsed_file(*file, bytes);
      !problem.empty()) {
    fail("parsed file breaks a promise: " + problem);
  }
  use_every_accessor(*file);
  return 0;
}
