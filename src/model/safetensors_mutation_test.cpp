// 12,000 seeded mutants of small safetensors files through SafetensorsFile::parse: every one is
// either refused with a DataLoss/Unimplemented Status or parsed into tensors whose promises hold
// when recomputed here from the raw bytes (spans inside the data section, sizes equal to shape x
// dtype, no two non-empty tensors overlapping, names unique and findable). Never a crash; fast
// under ASan.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "model/safetensors_file.h"
#include "model/safetensors_test_util.h"

namespace cellm {
namespace {

namespace st = safetensors_testing;

// Empty when the parsed file keeps its promises over `bytes`; otherwise what broke.
std::string check_parsed(const SafetensorsFile& file, std::span<const uint8_t> bytes) {
  uint64_t header_bytes = 0;
  std::memcpy(&header_bytes, bytes.data(), 8);
  const uint8_t* data_begin = bytes.data() + 8 + header_bytes;
  const uint8_t* data_end = bytes.data() + bytes.size();
  std::set<std::string> names;
  std::vector<std::pair<const uint8_t*, const uint8_t*>> spans;
  for (const SafetensorsTensor& t : file.tensors()) {
    if (!names.insert(t.name).second) return "duplicate name " + t.name;
    if (file.find(t.name) != &t) return "find() misses " + t.name;
    uint64_t product = 1;
    for (uint64_t d : t.shape) product *= d;
    if (product != t.num_elements) return "element count of " + t.name;
    if (t.data.size() != product * safetensors_dtype_bytes(t.dtype)) return "size of " + t.name;
    if (t.data.empty()) continue;
    if (t.data.data() < data_begin || t.data.data() + t.data.size() > data_end) {
      return "span of " + t.name + " leaves the data section";
    }
    spans.emplace_back(t.data.data(), t.data.data() + t.data.size());
  }
  std::sort(spans.begin(), spans.end());
  for (size_t i = 1; i < spans.size(); ++i) {
    if (spans[i].first < spans[i - 1].second) return "overlapping spans";
  }
  return "";
}

std::vector<std::vector<uint8_t>> base_files() {
  return {
      st::build(
          {{"model.embed_tokens.weight", "F32", {4, 2}, st::f32_bytes({1, 2, 3, 4, 5, 6, 7, 8})},
           {"model.norm.weight", "BF16", {2}, st::bf16_bytes({1, 1})},
           {"lm_head.weight", "F16", {1, 2}, st::f16_bytes({0.5f, 0.25f})}},
          {{"format", "pt"}}),
      st::build({{"q.qweight", "I32", {2, 2}, st::raw_bytes(std::vector<int32_t>{1, 2, 3, 4})},
                 {"q.scales", "F16", {1, 2}, st::f16_bytes({1, 2})},
                 {"e", "U8", {0}, {}},
                 {"s", "I64", {}, st::raw_bytes(std::vector<int64_t>{7})}}),
      st::build({{"x", "F64", {3}, st::raw_bytes(std::vector<double>{1, 2, 3})}}),
  };
}

std::vector<uint8_t> mutate(const std::vector<uint8_t>& base, std::mt19937& rng) {
  std::vector<uint8_t> bytes = base;
  const auto pick = [&](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); };
  uint64_t header_bytes = 0;
  std::memcpy(&header_bytes, bytes.data(), 8);
  const size_t header_end = 8 + static_cast<size_t>(header_bytes);
  static const std::string kAlphabet = "0123456789{}[]\",:-.eE \\abcFIU";
  const int num_edits = 1 + static_cast<int>(pick(3));
  for (int edit = 0; edit < num_edits && !bytes.empty(); ++edit) {
    switch (pick(7)) {
      case 0:  // flip a byte anywhere
        bytes[pick(bytes.size())] ^= static_cast<uint8_t>(1u << pick(8));
        break;
      case 1:  // truncate
        bytes.resize(pick(bytes.size() + 1));
        break;
      case 2: {  // a new header length, near the real one or anywhere
        uint64_t length =
            pick(2) ? header_bytes + pick(17) - 8 : (uint64_t{1} << pick(64)) + pick(5);
        if (bytes.size() >= 8) std::memcpy(bytes.data(), &length, 8);
        break;
      }
      case 3:  // replace a header character with a JSON-ish one
        if (header_end > 8 && header_end <= bytes.size()) {
          bytes[8 + pick(header_end - 8)] = static_cast<uint8_t>(kAlphabet[pick(kAlphabet.size())]);
        }
        break;
      case 4:  // change a digit of the header (shapes, offsets)
        for (int tries = 0; tries < 20 && header_end <= bytes.size() && header_end > 8; ++tries) {
          const size_t at = 8 + pick(header_end - 8);
          if (bytes[at] >= '0' && bytes[at] <= '9') {
            bytes[at] = static_cast<uint8_t>('0' + pick(10));
            break;
          }
        }
        break;
      case 5:  // grow or shrink the data section
        if (pick(2)) {
          bytes.insert(bytes.end(), pick(9), 0);
        } else if (bytes.size() > header_end) {
          bytes.resize(bytes.size() - 1 - pick(std::min<size_t>(8, bytes.size() - header_end)));
        }
        break;
      default:  // delete a header character
        if (header_end > 8 && header_end <= bytes.size()) {
          const auto at = bytes.begin() + static_cast<std::ptrdiff_t>(8 + pick(header_end - 8));
          std::rotate(at, at + 1, bytes.end());
          bytes.pop_back();
        }
        break;
    }
  }
  return bytes;
}

TEST(SafetensorsMutationTest, EveryMutantIsRefusedOrKeepsItsPromises) {
  std::mt19937 rng(20240613);
  const std::vector<std::vector<uint8_t>> bases = base_files();
  for (const auto& base : bases) {
    StatusOr<SafetensorsFile> file = SafetensorsFile::parse(base);
    ASSERT_TRUE(file.ok()) << file.status().to_string();
    ASSERT_EQ(check_parsed(*file, base), "");
  }
  constexpr int kMutantsPerBase = 4000;
  int num_parsed = 0;
  int num_refused = 0;
  for (const auto& base : bases) {
    for (int i = 0; i < kMutantsPerBase; ++i) {
      const std::vector<uint8_t> bytes = mutate(base, rng);
      StatusOr<SafetensorsFile> file = SafetensorsFile::parse(bytes, "mutant");
      if (!file.ok()) {
        ++num_refused;
        const StatusCode code = file.status().code();
        ASSERT_TRUE(code == StatusCode::kDataLoss || code == StatusCode::kUnimplemented)
            << file.status().to_string();
        ASSERT_EQ(file.status().message().rfind("mutant: safetensors: ", 0), 0u)
            << file.status().message();
        ASSERT_EQ(file.status().message().find('\n'), std::string::npos);
        continue;
      }
      ++num_parsed;
      const std::string broken = check_parsed(*file, bytes);
      ASSERT_EQ(broken, "") << "mutant " << i;
    }
  }
  EXPECT_EQ(num_parsed + num_refused, 3 * kMutantsPerBase);
  EXPECT_GT(num_refused, 3 * kMutantsPerBase / 2);
  EXPECT_GT(num_parsed, 100);  // the mutator also produces files that still parse
  std::printf("%d mutants parsed, %d refused\n", num_parsed, num_refused);
}

}  // namespace
}  // namespace cellm
