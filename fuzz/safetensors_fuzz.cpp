// libFuzzer target for the safetensors reader: parses arbitrary bytes with SafetensorsFile::parse.
// A parsed file must keep its promises, recomputed here from the bytes (every tensor's span inside
// the data section, its size equal to shape x dtype, no two non-empty tensors overlapping, names
// findable); a refusal must be a one-line "fuzz: safetensors: " message. Anything else aborts,
// and ASan/UBSan catch the rest. Seeds: any small *.safetensors file (the arch test models').
//   cmake --preset fuzz && cmake --build build/fuzz --target safetensors_fuzz
//   build/fuzz/fuzz/safetensors_fuzz corpus -max_total_time=60
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "model/safetensors_file.h"

namespace {

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "safetensors_fuzz: %s\n", what.c_str());
  std::abort();
}

void check_parsed(const cellm::SafetensorsFile& file, std::span<const uint8_t> bytes) {
  uint64_t header_bytes = 0;
  std::memcpy(&header_bytes, bytes.data(), 8);
  const uint8_t* data_begin = bytes.data() + 8 + header_bytes;
  const uint8_t* data_end = bytes.data() + bytes.size();
  std::vector<std::pair<const uint8_t*, const uint8_t*>> spans;
  volatile uint8_t sink = 0;
  for (const cellm::SafetensorsTensor& t : file.tensors()) {
    if (file.find(t.name) != &t) fail("find() misses " + t.name);
    uint64_t product = 1;
    for (uint64_t d : t.shape) product *= d;
    if (product != t.num_elements) fail("element count of " + t.name);
    if (t.data.size() != product * cellm::safetensors_dtype_bytes(t.dtype)) {
      fail("size of " + t.name);
    }
    (void)t.shape_string();
    if (t.data.empty()) continue;
    if (t.data.data() < data_begin || t.data.data() + t.data.size() > data_end) {
      fail("span of " + t.name + " leaves the data section");
    }
    sink = sink ^ t.data.front() ^ t.data.back();
    spans.emplace_back(t.data.data(), t.data.data() + t.data.size());
  }
  std::sort(spans.begin(), spans.end());
  for (size_t i = 1; i < spans.size(); ++i) {
    if (spans[i].first < spans[i - 1].second) fail("overlapping spans");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> bytes(data, size);
  cellm::StatusOr<cellm::SafetensorsFile> file = cellm::SafetensorsFile::parse(bytes, "fuzz");
  if (!file.ok()) {
    const std::string message = file.status().message();
    if (message.rfind("fuzz: safetensors: ", 0) != 0) fail("unprefixed error: " + message);
    if (message.find('\n') != std::string::npos) fail("multi-line error: " + message);
    return 0;
  }
  check_parsed(*file, bytes);
  return 0;
}
