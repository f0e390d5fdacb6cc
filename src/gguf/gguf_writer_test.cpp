// GgufWriter: the exact bytes of a small file (worked out by hand from the GGUF layout), its
// validation, the streaming callback, and the temp-file-then-rename write.
#include "gguf/gguf_writer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

namespace cellm {
namespace {

using ::testing::HasSubstr;

std::string temp_path(const std::string& name) { return ::testing::TempDir() + name; }

std::vector<uint8_t> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(GgufWriterTest, WritesTheExactBytesOfASmallFile) {
  GgufWriter writer;
  ASSERT_TRUE(writer.add_metadata("a", GgufValue::u32(7)).ok());
  const std::vector<uint8_t> data = {1, 2, 3, 4, 5, 6, 7, 8};
  ASSERT_TRUE(writer.add_tensor("t", TensorType::kF32, {2}, data).ok());
  StatusOr<std::vector<uint8_t>> bytes = writer.write_bytes();
  ASSERT_TRUE(bytes.ok());

  std::vector<uint8_t> expected = {
      'G', 'G', 'U', 'F', 3, 0, 0, 0,       // magic, version 3
      1,   0,   0,   0,   0, 0, 0, 0,       // 1 tensor
      1,   0,   0,   0,   0, 0, 0, 0,       // 1 key
      1,   0,   0,   0,   0, 0, 0, 0, 'a',  // key "a"
      4,   0,   0,   0,   7, 0, 0, 0,       // u32 7
      1,   0,   0,   0,   0, 0, 0, 0, 't',  // tensor "t"
      1,   0,   0,   0,                     // 1 dim
      2,   0,   0,   0,   0, 0, 0, 0,       // dims {2}
      0,   0,   0,   0,                     // f32
      0,   0,   0,   0,   0, 0, 0, 0,       // offset 0
  };
  ASSERT_EQ(expected.size(), 74u);
  expected.resize(96, 0);  // padding up to the alignment 32
  expected.insert(expected.end(), data.begin(), data.end());
  expected.resize(128, 0);  // the tensor padded to 32 bytes
  EXPECT_EQ(*bytes, expected);
  EXPECT_EQ(writer.file_size_bytes(), 128u);
}

TEST(GgufWriterTest, FileWithoutTensorsEndsAfterItsMetadata) {
  GgufWriter writer;
  ASSERT_TRUE(writer.add_metadata("k", GgufValue::boolean(true)).ok());
  StatusOr<std::vector<uint8_t>> bytes = writer.write_bytes();
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(bytes->size(), 24u + 8 + 1 + 4 + 1);
  EXPECT_EQ(bytes->back(), 1);
}

TEST(GgufWriterTest, AlignmentKeyIsWrittenOnlyWhenNot32) {
  GgufWriter default_writer;
  EXPECT_EQ(default_writer.alignment(), 32u);
  ASSERT_TRUE(default_writer.set_alignment(32).ok());
  StatusOr<std::vector<uint8_t>> plain = default_writer.write_bytes();
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->size(), 24u);  // header only: no keys

  GgufWriter writer;
  ASSERT_TRUE(writer.set_alignment(64).ok());
  const std::vector<uint8_t> data(4);
  ASSERT_TRUE(writer.add_tensor("t", TensorType::kF32, {1}, data).ok());
  StatusOr<std::vector<uint8_t>> bytes = writer.write_bytes();
  ASSERT_TRUE(bytes.ok());
  StatusOr<GgufFile> file = GgufFile::parse(*bytes);
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  EXPECT_EQ(*file->get_u32("general.alignment"), 64u);
  EXPECT_EQ(file->data_offset_bytes(), 128u);  // 24 + 33 (key) + 33 (tensor) = 90, rounded up
  EXPECT_EQ(bytes->size(), 192u);
}

TEST(GgufWriterTest, AlignmentKeyAddedByTheCallerSetsTheAlignment) {
  GgufWriter writer;
  ASSERT_TRUE(writer.add_metadata("general.alignment", GgufValue::u32(16)).ok());
  EXPECT_EQ(writer.alignment(), 16u);
  ASSERT_TRUE(writer.set_alignment(32).ok());  // updates the key in place, adds none
  StatusOr<GgufFile> file = GgufFile::parse(*writer.write_bytes());
  ASSERT_TRUE(file.ok());
  ASSERT_EQ(file->metadata().size(), 1u);
  EXPECT_EQ(*file->get_u32("general.alignment"), 32u);
}

TEST(GgufWriterTest, BadAlignmentsAreRefused) {
  GgufWriter writer;
  EXPECT_THAT(writer.set_alignment(0).message(), HasSubstr("alignment 0 is not a nonzero power"));
  EXPECT_EQ(writer.set_alignment(24).code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(writer.add_metadata("general.alignment", GgufValue::u64(64)).message(),
              HasSubstr("general.alignment must be a u32 nonzero power of two, got 64 (u64)"));
  EXPECT_FALSE(writer.add_metadata("general.alignment", GgufValue::u32(48)).ok());
  EXPECT_EQ(writer.alignment(), 32u);
}

TEST(GgufWriterTest, EmptyAndDuplicateKeysAreRefused) {
  GgufWriter writer;
  EXPECT_EQ(writer.add_metadata("", GgufValue::u8(1)).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(writer.add_metadata("x", GgufValue::u8(1)).ok());
  EXPECT_THAT(writer.add_metadata("x", GgufValue::u8(2)).message(),
              HasSubstr("duplicate metadata key 'x'"));
}

TEST(GgufWriterTest, InconsistentTensorsAreRefusedAndChangeNothing) {
  GgufWriter writer;
  const std::vector<uint8_t> bytes(64);
  EXPECT_THAT(writer.add_tensor("t", TensorType::kF32, {4, 3}, bytes).message(),
              HasSubstr("tensor 't' (f32 4x3) needs 48 bytes, got 64"));
  EXPECT_THAT(writer.add_tensor("t", TensorType::kF32, {}, bytes).message(), HasSubstr("no dims"));
  EXPECT_THAT(writer.add_tensor("t", TensorType::kF32, {1, 1, 1, 1, 16}, bytes).message(),
              HasSubstr("has 5 dims"));
  EXPECT_THAT(writer.add_tensor("t", TensorType::kQ8_0, {16, 2}, bytes).message(),
              HasSubstr("not a whole number of q8_0 blocks of 32"));
  EXPECT_THAT(writer.add_tensor("t", static_cast<TensorType>(5), {16}, bytes).message(),
              HasSubstr("unknown type id 5"));
  EXPECT_EQ(writer.add_tensor("", TensorType::kF32, {16}, bytes).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(writer.num_tensors(), 0u);
  ASSERT_TRUE(writer.add_tensor("t", TensorType::kF32, {16}, bytes).ok());
  EXPECT_THAT(writer.add_tensor("t", TensorType::kF32, {16}, bytes).message(),
              HasSubstr("duplicate tensor name 't'"));
  EXPECT_EQ(writer.num_tensors(), 1u);
}

TEST(GgufWriterTest, CallbackTensorsAreFilledOnceEachInOrderWithTheirOwnSize) {
  GgufWriter writer;
  std::vector<std::pair<std::string, size_t>> calls;
  auto fill_with = [&calls](std::string name, uint8_t byte) {
    return [&calls, name, byte](std::span<uint8_t> out) {
      calls.emplace_back(name, out.size());
      std::fill(out.begin(), out.end(), byte);
      return ok_status();
    };
  };
  ASSERT_TRUE(writer.add_tensor("q", TensorType::kQ4_0, {64, 3}, fill_with("q", 0xAB)).ok());
  ASSERT_TRUE(writer.add_tensor("h", TensorType::kF16, {5}, fill_with("h", 0x11)).ok());
  EXPECT_TRUE(calls.empty());  // nothing runs before the write
  StatusOr<std::vector<uint8_t>> bytes = writer.write_bytes();
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(calls, (std::vector<std::pair<std::string, size_t>>{{"q", 108}, {"h", 10}}));
  StatusOr<GgufFile> file = GgufFile::parse(*bytes);
  ASSERT_TRUE(file.ok());
  const std::span<const uint8_t> q = file->tensor_data(*file->find_tensor("q"));
  EXPECT_EQ(q.size(), 108u);  // 3 rows x 2 blocks x 18 bytes
  EXPECT_TRUE(std::all_of(q.begin(), q.end(), [](uint8_t b) { return b == 0xAB; }));
  const std::span<const uint8_t> h = file->tensor_data(*file->find_tensor("h"));
  EXPECT_TRUE(std::all_of(h.begin(), h.end(), [](uint8_t b) { return b == 0x11; }));
}

TEST(GgufWriterTest, WriteFileMatchesWriteBytesAndLeavesNoTemporary) {
  GgufWriter writer;
  ASSERT_TRUE(writer.add_metadata("general.name", GgufValue::string("tiny")).ok());
  const std::vector<uint8_t> data(12, 9);
  ASSERT_TRUE(writer.add_tensor("t", TensorType::kF32, {3}, data).ok());
  const std::string path = temp_path("gguf_writer_ok.gguf");
  ASSERT_TRUE(writer.write_file(path).ok());
  EXPECT_EQ(read_all(path), *writer.write_bytes());
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  StatusOr<GgufFile> file = GgufFile::open(path);
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(file->path(), path);
  std::filesystem::remove(path);
}

TEST(GgufWriterTest, FailingCallbackLeavesTheOldFileAndNoTemporary) {
  const std::string path = temp_path("gguf_writer_fail.gguf");
  {
    std::ofstream out(path, std::ios::binary);
    out << "old contents";
  }
  GgufWriter writer;
  const std::vector<uint8_t> data(4);
  ASSERT_TRUE(writer.add_tensor("a", TensorType::kF32, {1}, data).ok());
  ASSERT_TRUE(writer
                  .add_tensor("b", TensorType::kF32, {1},
                              [](std::span<uint8_t>) { return io_error("source went away"); })
                  .ok());
  const Status status = writer.write_file(path);
  EXPECT_EQ(status.code(), StatusCode::kIoError);
  EXPECT_EQ(status.message(), "gguf writer: filling tensor 'b': source went away");
  const std::vector<uint8_t> contents = read_all(path);
  EXPECT_EQ(std::string(contents.begin(), contents.end()), "old contents");
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  std::filesystem::remove(path);
}

TEST(GgufWriterTest, UnwritableDirectoryIsAnIoErrorNamingThePath) {
  GgufWriter writer;
  const Status status = writer.write_file("/nonexistent/dir/out.gguf");
  EXPECT_EQ(status.code(), StatusCode::kIoError);
  EXPECT_THAT(status.message(), HasSubstr("/nonexistent/dir/out.gguf.tmp"));
}

}  // namespace
}  // namespace cellm
