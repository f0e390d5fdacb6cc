// Writes a seed corpus for gguf_reader_fuzz: for each GGUF named on the command line, its header
// bytes (metadata and tensor infos, cut at 64 KiB) and a small valid copy (arrays cut to 8
// elements, one row per tensor; gguf_testing::shrink_gguf), plus one synthetic file with every
// value type, nested arrays, several tensor types and a 64-byte alignment.
//   gguf_fuzz_seeds OUT_DIR MODEL.gguf...
#include <cstdio>
#include <fstream>
#include <string>

#include "gguf/gguf_file.h"
#include "gguf/gguf_test_support.h"
#include "gguf/gguf_writer.h"

namespace {

bool write(const std::string& path, std::span<const uint8_t> bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  return static_cast<bool>(out);
}

std::string base_name(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Every value type, nested arrays, four tensor types (one empty), alignment 64.
cellm::StatusOr<std::vector<uint8_t>> every_feature_file() {
  using cellm::GgufValue;
  using cellm::GgufValueType;
  using cellm::TensorType;
  cellm::GgufWriter writer;
  CELLM_RETURN_IF_ERROR(writer.set_alignment(64));
  const std::pair<const char*, GgufValue> entries[] = {
      {"u8", GgufValue::u8(1)},
      {"i8", GgufValue::i8(-1)},
      {"u16", GgufValue::u16(2)},
      {"i16", GgufValue::i16(-2)},
      {"u32", GgufValue::u32(3)},
      {"i32", GgufValue::i32(-3)},
      {"u64", GgufValue::u64(4)},
      {"i64", GgufValue::i64(-4)},
      {"f32", GgufValue::f32(0.5f)},
      {"f64", GgufValue::f64(0.25)},
      {"bool", GgufValue::boolean(true)},
      {"string", GgufValue::string("text")},
      {"nested",
       GgufValue::array(
           GgufValueType::kArray,
           {GgufValue::array(GgufValueType::kString, {GgufValue::string("a")}),
            GgufValue::array(GgufValueType::kInt16, {GgufValue::i16(5), GgufValue::i16(6)})})},
  };
  for (const auto& [key, value] : entries) CELLM_RETURN_IF_ERROR(writer.add_metadata(key, value));
  static const std::vector<uint8_t> data(256, 0x3C);
  CELLM_RETURN_IF_ERROR(
      writer.add_tensor("f32", TensorType::kF32, {4, 2}, std::span(data).first(32)));
  CELLM_RETURN_IF_ERROR(
      writer.add_tensor("q4_0", TensorType::kQ4_0, {32, 2}, std::span(data).first(36)));
  CELLM_RETURN_IF_ERROR(
      writer.add_tensor("q6_K", TensorType::kQ6_K, {256}, std::span(data).first(210)));
  CELLM_RETURN_IF_ERROR(
      writer.add_tensor("empty", TensorType::kF16, {0, 3}, std::span(data).first(0)));
  return writer.write_bytes();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s OUT_DIR MODEL.gguf...\n", argv[0]);
    return 2;
  }
  const std::string out_dir = argv[1];
  for (int i = 2; i < argc; ++i) {
    cellm::StatusOr<cellm::GgufFile> file = cellm::GgufFile::open(argv[i]);
    if (!file.ok()) {
      std::fprintf(stderr, "%s\n", file.status().to_string().c_str());
      return 1;
    }
    const std::string name = base_name(argv[i]);
    cellm::StatusOr<cellm::FileMapping> mapping = cellm::FileMapping::open(argv[i]);
    const std::span<const uint8_t> bytes = mapping->bytes();
    const size_t header = std::min<uint64_t>({file->data_offset_bytes(), bytes.size(), 65536});
    cellm::StatusOr<std::vector<uint8_t>> small = cellm::gguf_testing::shrink_gguf(*file, 8);
    if (!small.ok() || !write(out_dir + "/" + name + ".header", bytes.first(header)) ||
        !write(out_dir + "/" + name + ".small", *small)) {
      std::fprintf(stderr, "cannot write seeds for %s\n", argv[i]);
      return 1;
    }
  }
  cellm::StatusOr<std::vector<uint8_t>> synthetic = every_feature_file();
  if (!synthetic.ok() || !write(out_dir + "/every-feature.gguf", *synthetic)) {
    std::fprintf(stderr, "cannot write the synthetic seed\n");
    return 1;
  }
  return 0;
}
