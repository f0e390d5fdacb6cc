// Mutation test of the GGUF reader: the shipped models (and small valid copies of them) mutated
// more than 10,000 times with a fixed seed — bit flips, random bytes, length/count/type/dim/offset
// fields overwritten with boundary values, truncation (mostly inside the header), spliced,
// duplicated and deleted regions. Every mutant must either parse with every promise checked
// independently (gguf_testing::check_parsed_file) or fail with a one-line "gguf: " message; a
// crash or a sanitizer report fails the test (CI runs it under ASan/UBSan).
// Cost control: mutations are mostly in place on one buffer per seed and undone after the parse,
// truncation parses a prefix, and only the small copies are rebuilt for size-changing mutations.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>

#include "gguf/gguf_file.h"
#include "gguf/gguf_test_support.h"
#include "test_models.h"

namespace cellm {
namespace {

// A length, count, type, dim or offset field of a seed's header.
struct Field {
  uint64_t offset;
  uint32_t width;  // 4 or 8 bytes
};

struct Seed {
  std::string name;
  std::vector<uint8_t> bytes;  // a whole shipped file, or a small valid copy of one
  uint64_t header_end = 0;     // metadata and tensor infos end here
  std::vector<Field> fields;
  bool small = false;  // cheap to copy: size-changing mutations allowed
};

void append_u64(std::vector<uint8_t>* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<uint8_t>(v >> (8 * i)));
}

// Where `name` (as a GGUF string: u64 length, bytes) next occurs at or after `from`.
std::optional<uint64_t> find_string(const std::vector<uint8_t>& bytes, uint64_t from,
                                    std::string_view name) {
  std::vector<uint8_t> needle;
  append_u64(&needle, name.size());
  needle.insert(needle.end(), name.begin(), name.end());
  const auto it = std::search(bytes.begin() + static_cast<ptrdiff_t>(from), bytes.end(),
                              std::boyer_moore_horspool_searcher(needle.begin(), needle.end()));
  if (it == bytes.end()) return std::nullopt;
  return static_cast<uint64_t>(it - bytes.begin());
}

// The fields of a valid file, found by searching for each key and tensor name in file order.
std::vector<Field> locate_fields(const GgufFile& file, const std::vector<uint8_t>& bytes) {
  std::vector<Field> fields = {{4, 4}, {8, 8}, {16, 8}};  // version, tensor count, key count
  uint64_t at = 24;
  for (const auto& [key, value] : file.metadata()) {
    const std::optional<uint64_t> p = find_string(bytes, at, key);
    if (!p) continue;
    const uint64_t type_at = *p + 8 + key.size();
    fields.push_back({*p, 8});
    fields.push_back({type_at, 4});
    if (value.type() == GgufValueType::kString) fields.push_back({type_at + 4, 8});
    if (const GgufValue::Array* array = value.as_array()) {
      fields.push_back({type_at + 4, 4});  // element type
      fields.push_back({type_at + 8, 8});  // count
      if (array->element_type == GgufValueType::kString && !array->elements.empty()) {
        fields.push_back({type_at + 16, 8});  // the first element's length
      }
    }
    at = type_at;
  }
  for (const GgufTensorInfo& info : file.tensors()) {
    const std::optional<uint64_t> p = find_string(bytes, at, info.name);
    if (!p) continue;
    uint64_t q = *p + 8 + info.name.size();
    fields.push_back({*p, 8});
    fields.push_back({q, 4});  // dim count
    q += 4;
    for (size_t d = 0; d < info.dims.size(); ++d, q += 8) fields.push_back({q, 8});
    fields.push_back({q, 4});      // type
    fields.push_back({q + 4, 8});  // data offset
    at = q;
  }
  return fields;
}

Seed make_seed(std::string name, std::vector<uint8_t> bytes, bool small) {
  StatusOr<GgufFile> file = GgufFile::parse(bytes);
  CELLM_CHECK(file.ok()) << name << ": " << file.status().to_string();
  Seed seed;
  seed.name = std::move(name);
  seed.fields = locate_fields(*file, bytes);
  const bool no_data = file->tensors().empty();
  // The header ends where the data section's padding starts; for a file without tensors, at
  // the end of the file.
  uint64_t header_end = file->data_offset_bytes();
  if (!no_data) {
    header_end = 0;
    for (const Field& field : seed.fields)
      header_end = std::max(header_end, field.offset + field.width);
  }
  seed.header_end = header_end;
  seed.bytes = std::move(bytes);
  seed.small = small;
  return seed;
}

std::vector<uint8_t> read_model(const std::string& relative) {
  StatusOr<FileMapping> mapping = FileMapping::open(testing::test_model_path(relative));
  CELLM_CHECK(mapping.ok()) << mapping.status().to_string();
  return {mapping->bytes().begin(), mapping->bytes().end()};
}

class Mutator {
 public:
  explicit Mutator(uint64_t seed) : rng_(seed) {}

  uint64_t below(uint64_t n) { return n == 0 ? 0 : rng_() % n; }
  bool chance(int percent) { return below(100) < static_cast<uint64_t>(percent); }

  // A position, mostly inside the header.
  uint64_t position(const Seed& seed) {
    return chance(85) ? below(seed.header_end) : below(seed.bytes.size());
  }

  uint64_t boundary_value(const Seed& seed, const Field& field, uint64_t original) {
    const uint64_t size = seed.bytes.size();
    const uint64_t left = size - std::min(size, field.offset + field.width);
    const uint64_t values[] = {0,
                               1,
                               2,
                               3,
                               4,
                               5,
                               8,
                               12,
                               13,
                               31,
                               32,
                               33,
                               64,
                               255,
                               256,
                               0x7FFF,
                               0xFFFF,
                               0x7FFFFFFF,
                               0x80000000,
                               0xFFFFFFFF,
                               uint64_t{1} << 32,
                               uint64_t{1} << 40,
                               uint64_t{1} << 60,
                               uint64_t{INT64_MAX},
                               uint64_t{1} << 63,
                               UINT64_MAX,
                               size,
                               size - 1,
                               size + 1,
                               seed.header_end,
                               left,
                               left + 1,
                               left - 1,
                               original + 1,
                               original - 1,
                               original * 2,
                               original + below(64)};
    return values[below(std::size(values))];
  }

 private:
  std::mt19937_64 rng_;
};

struct Outcome {
  uint64_t mutants = 0;
  uint64_t parsed = 0;
  uint64_t refused = 0;
  int failures = 0;
};

// Parses one mutant and checks the rule: valid with every promise kept, or a clean refusal.
void check_mutant(std::span<const uint8_t> bytes, const std::string& seed, uint64_t index,
                  const char* kind, Outcome* outcome) {
  ++outcome->mutants;
  StatusOr<GgufFile> file = GgufFile::parse(bytes);
  std::string problem;
  if (file.ok()) {
    ++outcome->parsed;
    problem = gguf_testing::check_parsed_file(*file, bytes);
  } else {
    ++outcome->refused;
    const Status status = file.status();
    const std::string& message = status.message();
    if (message.rfind("gguf: ", 0) != 0 || message.find('\n') != std::string::npos ||
        message.size() > 1000) {
      problem = "bad refusal message: " + status.to_string();
    }
  }
  if (!problem.empty() && ++outcome->failures <= 10) {
    ADD_FAILURE() << seed << " mutant #" << index << " (" << kind << ", " << bytes.size()
                  << " bytes): " << problem;
  }
}

void write_le(std::vector<uint8_t>& bytes, const Field& field, uint64_t value) {
  for (uint32_t i = 0; i < field.width && field.offset + i < bytes.size(); ++i) {
    bytes[field.offset + i] = static_cast<uint8_t>(value >> (8 * i));
  }
}

uint64_t read_le(const std::vector<uint8_t>& bytes, const Field& field) {
  uint64_t value = 0;
  for (uint32_t i = 0; i < field.width && field.offset + i < bytes.size(); ++i) {
    value |= uint64_t{bytes[field.offset + i]} << (8 * i);
  }
  return value;
}

// Runs `count` mutants of `seed`. In-place edits are undone after each parse.
void mutate_seed(Seed& seed, int count, Mutator& m, Outcome* outcome) {
  std::vector<uint8_t>& bytes = seed.bytes;
  const std::vector<uint8_t> original_header(
      bytes.begin(), bytes.begin() + static_cast<ptrdiff_t>(seed.header_end));
  std::vector<uint8_t> rebuilt;
  for (int i = 0; i < count; ++i) {
    const int kind = static_cast<int>(m.below(seed.small ? 9 : 7));
    uint64_t length = bytes.size();
    // Bytes changed in place outside the header, restored one by one: (offset, old byte).
    std::vector<std::pair<uint64_t, uint8_t>> outside;
    auto set_byte = [&](uint64_t at, uint8_t value) {
      if (at >= seed.header_end) outside.emplace_back(at, bytes[at]);
      bytes[at] = value;
    };
    auto overwrite_field = [&](bool boundary) {
      if (seed.fields.empty()) return;
      const Field& field = seed.fields[m.below(seed.fields.size())];
      const uint64_t original = read_le(bytes, field);
      write_le(bytes, field,
               boundary ? m.boundary_value(seed, field, original)
                        : original ^ (uint64_t{1} << m.below(8 * field.width)));
    };
    const char* name = "";
    switch (kind) {
      case 0: {
        name = "bit flips";
        for (uint64_t n = 1 + m.below(4); n > 0; --n) {
          const uint64_t at = m.position(seed);
          set_byte(at, static_cast<uint8_t>(bytes[at] ^ (1u << m.below(8))));
        }
        break;
      }
      case 1: {
        name = "random bytes";
        const uint64_t at = m.position(seed);
        for (uint64_t n = 1 + m.below(8); n > 0 && at + n - 1 < bytes.size(); --n) {
          set_byte(at + n - 1, static_cast<uint8_t>(m.below(256)));
        }
        break;
      }
      case 2:
        name = "field := boundary value";
        overwrite_field(true);
        break;
      case 3:
        name = "field bit flip";
        overwrite_field(false);
        break;
      case 4: {
        name = "truncation";
        length = m.chance(80) ? m.below(seed.header_end + 1) : m.below(bytes.size());
        break;
      }
      case 5: {
        name = "field := boundary value, then truncation";
        overwrite_field(true);
        length = m.below(bytes.size());
        break;
      }
      case 6: {
        name = "splice inside the header";
        const uint64_t n = 1 + m.below(32);
        if (seed.header_end > n) {
          const uint64_t from = m.below(seed.header_end - n);
          const uint64_t to = m.below(seed.header_end - n);
          std::memmove(bytes.data() + to, bytes.data() + from, n);
        }
        overwrite_field(true);
        break;
      }
      case 7:
      case 8: {
        name = kind == 7 ? "duplicated region" : "deleted region";
        const uint64_t n = 1 + m.below(48);
        const uint64_t from = m.below(seed.header_end > n ? seed.header_end - n : 1);
        rebuilt.assign(bytes.begin(), bytes.end());
        if (kind == 7) {
          const uint64_t to = m.below(seed.header_end);
          std::vector<uint8_t> copy(
              rebuilt.begin() + static_cast<ptrdiff_t>(from),
              rebuilt.begin() + static_cast<ptrdiff_t>(std::min(from + n, rebuilt.size())));
          rebuilt.insert(rebuilt.begin() + static_cast<ptrdiff_t>(to), copy.begin(), copy.end());
        } else {
          rebuilt.erase(
              rebuilt.begin() + static_cast<ptrdiff_t>(from),
              rebuilt.begin() + static_cast<ptrdiff_t>(std::min(from + n, rebuilt.size())));
        }
        check_mutant(rebuilt, seed.name, static_cast<uint64_t>(i), name, outcome);
        continue;
      }
    }
    check_mutant(std::span<const uint8_t>(bytes.data(), length), seed.name,
                 static_cast<uint64_t>(i), name, outcome);
    std::copy(original_header.begin(), original_header.end(), bytes.begin());
    for (auto it = outside.rbegin(); it != outside.rend(); ++it) bytes[it->first] = it->second;
  }
}

TEST(GgufMutationTest, TenThousandMutantsOfTheShippedModelsParseOrFailCleanly) {
  const auto start = std::chrono::steady_clock::now();
  struct Plan {
    const char* file;
    int real_mutants;   // of the shipped bytes (headers of up to 4 MB are costly to parse)
    int small_mutants;  // of a small valid copy
  };
  const Plan plans[] = {
      {"stories260K.gguf", 1000, 400},
      {"arch/tiny-llama3.gguf", 1000, 400},
      {"arch/tiny-qwen2.gguf", 1000, 400},
      {"arch/tiny-qwen3.gguf", 1000, 400},
      {"arch/tiny-mistral.gguf", 1000, 400},
      {"llama-2-tiny-random.gguf", 20, 400},
      {"vocab/ggml-vocab-baichuan.gguf", 20, 400},
      {"vocab/ggml-vocab-bert-bge.gguf", 20, 400},
      {"vocab/ggml-vocab-deepseek-coder.gguf", 20, 400},
      {"vocab/ggml-vocab-deepseek-llm.gguf", 10, 400},
      {"vocab/ggml-vocab-falcon.gguf", 20, 400},
      {"vocab/ggml-vocab-gpt-2.gguf", 20, 400},
      {"vocab/ggml-vocab-gpt-neox.gguf", 20, 400},
      {"vocab/ggml-vocab-llama-spm.gguf", 20, 400},
      {"vocab/ggml-vocab-mpt.gguf", 20, 400},
      {"vocab/ggml-vocab-phi-3.gguf", 20, 400},
      {"vocab/ggml-vocab-refact.gguf", 20, 400},
      {"vocab/ggml-vocab-starcoder.gguf", 20, 400},
  };
  Mutator mutator(0x6767756623);  // fixed: every run sees the same mutants
  Outcome outcome;
  for (const Plan& plan : plans) {
    std::vector<uint8_t> bytes = read_model(plan.file);
    StatusOr<GgufFile> file = GgufFile::parse(bytes);
    ASSERT_TRUE(file.ok()) << plan.file << ": " << file.status().to_string();
    StatusOr<std::vector<uint8_t>> small = gguf_testing::shrink_gguf(*file, 8);
    ASSERT_TRUE(small.ok()) << plan.file << ": " << small.status().to_string();
    Seed small_seed = make_seed(std::string(plan.file) + " (small copy)", std::move(*small), true);
    mutate_seed(small_seed, plan.small_mutants, mutator, &outcome);
    Seed real_seed = make_seed(plan.file, std::move(bytes), false);
    mutate_seed(real_seed, plan.real_mutants, mutator, &outcome);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("gguf mutants: %llu (%llu parsed and checked, %llu refused) in %.2f s\n",
              static_cast<unsigned long long>(outcome.mutants),
              static_cast<unsigned long long>(outcome.parsed),
              static_cast<unsigned long long>(outcome.refused), seconds);
  EXPECT_GE(outcome.mutants, 10000u);
  EXPECT_EQ(outcome.failures, 0);
  // Both outcomes must be common, or the mutations are too gentle or too destructive to test
  // anything.
  EXPECT_GE(outcome.parsed, outcome.mutants / 20);
  EXPECT_GE(outcome.refused, outcome.mutants / 2);
}

}  // namespace
}  // namespace cellm
