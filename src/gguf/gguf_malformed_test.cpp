// GgufFile::parse on malformed input: one test per problem, each asserting the status code and
// the distinctive part of the message (what broke and where). Inputs are built byte by byte.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "gguf/gguf_file.h"

namespace cellm {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// Raw GGUF bytes, little-endian, appended field by field.
class Bytes {
 public:
  Bytes& u8(uint8_t v) { return raw(&v, 1); }
  Bytes& u32(uint32_t v) { return raw(&v, 4); }
  Bytes& u64(uint64_t v) { return raw(&v, 8); }
  Bytes& str(std::string_view s) {
    u64(s.size());
    return raw(s.data(), s.size());
  }
  Bytes& zeros(size_t n) {
    bytes_.insert(bytes_.end(), n, 0);
    return *this;
  }
  // Magic, version, counts.
  Bytes& header(uint64_t num_tensors, uint64_t num_kv, uint32_t version = 3) {
    raw("GGUF", 4);
    u32(version);
    u64(num_tensors);
    return u64(num_kv);
  }
  Bytes& kv_u32(std::string_view key, uint32_t v) { return str(key).u32(4).u32(v); }
  Bytes& tensor(std::string_view name, std::vector<uint64_t> dims, uint32_t type, uint64_t offset) {
    str(name).u32(static_cast<uint32_t>(dims.size()));
    for (const uint64_t d : dims) u64(d);
    return u32(type).u64(offset);
  }
  Bytes& pad_to(size_t alignment) { return zeros((alignment - size() % alignment) % alignment); }
  size_t size() const { return bytes_.size(); }
  const std::vector<uint8_t>& get() const { return bytes_; }

 private:
  Bytes& raw(const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    bytes_.insert(bytes_.end(), p, p + n);
    return *this;
  }
  std::vector<uint8_t> bytes_;
};

Status parse_error(const Bytes& bytes) {
  StatusOr<GgufFile> file = GgufFile::parse(bytes.get());
  EXPECT_FALSE(file.ok()) << "parsed although malformed";
  return file.status();
}

void expect_data_loss(const Bytes& bytes, const std::string& fragment) {
  const Status status = parse_error(bytes);
  EXPECT_EQ(status.code(), StatusCode::kDataLoss) << status.to_string();
  EXPECT_THAT(status.message(), StartsWith("gguf: "));
  EXPECT_THAT(status.message(), HasSubstr(fragment));
}

constexpr uint32_t kF32 = 0;
constexpr uint32_t kQ4_0 = 2;
constexpr uint64_t kHuge = uint64_t{1} << 60;

TEST(GgufMalformedTest, EmptyInputIsTruncatedAtOffsetZero) {
  expect_data_loss(Bytes(), "truncated at offset 0 while reading the magic 'GGUF' (file size 0)");
}

TEST(GgufMalformedTest, BadMagicIsNamed) {
  Bytes bytes;
  bytes.u32(0x4C4D4747).u32(3).u64(0).u64(0);  // "GGML"
  expect_data_loss(bytes, "bad magic 'GGML' at offset 0 (expected 'GGUF')");
}

TEST(GgufMalformedTest, VersionOneIsUnsupported) {
  Bytes bytes;
  bytes.header(0, 0, /*version=*/1);
  const Status status = parse_error(bytes);
  EXPECT_EQ(status.code(), StatusCode::kUnimplemented);
  EXPECT_THAT(status.message(), HasSubstr("unsupported version 1 at offset 4"));
}

TEST(GgufMalformedTest, FutureVersionIsUnsupported) {
  Bytes bytes;
  bytes.header(0, 0, /*version=*/4);
  EXPECT_THAT(parse_error(bytes).message(), HasSubstr("unsupported version 4"));
}

TEST(GgufMalformedTest, BigEndianFileIsUnsupported) {
  Bytes bytes;
  bytes.header(0, 0, /*version=*/0x03000000);
  const Status status = parse_error(bytes);
  EXPECT_EQ(status.code(), StatusCode::kUnimplemented);
  EXPECT_THAT(status.message(), HasSubstr("big-endian GGUF v3"));
}

TEST(GgufMalformedTest, TruncatedTensorCountNamesOffset) {
  Bytes bytes;
  bytes.header(0, 0);
  const std::vector<uint8_t> cut(bytes.get().begin(), bytes.get().begin() + 12);
  const Status status = GgufFile::parse(cut).status();
  EXPECT_EQ(status.code(), StatusCode::kDataLoss);
  EXPECT_THAT(status.message(),
              HasSubstr("truncated at offset 8 while reading the tensor count (file size 12)"));
}

TEST(GgufMalformedTest, KeyCountBeyondTheBytesIsRejectedUpFront) {
  Bytes bytes;
  bytes.header(0, kHuge).kv_u32("a", 1);
  expect_data_loss(bytes, "metadata key count 1152921504606846976 at offset 16 cannot fit");
}

TEST(GgufMalformedTest, TensorCountBeyondTheBytesIsRejectedUpFront) {
  Bytes bytes;
  bytes.header(kHuge, 0);
  expect_data_loss(bytes, "tensor count 1152921504606846976 at offset 8 cannot fit");
}

TEST(GgufMalformedTest, TruncatedKeyLengthNamesTheKey) {
  Bytes bytes;
  // Key #0 is 41 bytes (24 + 41 = 65); key #1's length is cut after 4 of its 8 bytes. (Enough
  // bytes remain for the up-front count check to pass: 45 >= 2 keys x 13.)
  bytes.header(0, 2).str("k").u32(8).str(std::string(20, 'v')).u32(5);
  expect_data_loss(bytes, "truncated at offset 65 while reading the length of key #1");
}

TEST(GgufMalformedTest, KeyLengthPastTheEnd) {
  Bytes bytes;
  bytes.header(0, 1).u64(1000).zeros(13);
  expect_data_loss(bytes,
                   "string length 1000 at offset 24 (key #0) runs past the end of the file "
                   "(13 bytes left)");
}

TEST(GgufMalformedTest, StringValueLengthPastTheEnd) {
  Bytes bytes;
  bytes.header(0, 1).str("name").u32(8).u64(kHuge).zeros(4);
  expect_data_loss(bytes,
                   "string length 1152921504606846976 at offset 40 (the value of key #0 "
                   "'name') runs past the end");
}

TEST(GgufMalformedTest, HugeArrayCountIsRejectedBeforeAllocating) {
  Bytes bytes;
  bytes.header(0, 1).str("scores").u32(9).u32(6).u64(kHuge).zeros(64);
  expect_data_loss(bytes,
                   "array of 1152921504606846976 f32 elements at offset 46 in the value of "
                   "key #0 'scores' runs past the end of the file (64 bytes left)");
}

TEST(GgufMalformedTest, MetadataArraysBeyondTheElementLimitAreRefused) {
  // Two u8 arrays of 2^23 + 1 elements: together one more than the 2^24 the reader accepts,
  // each honest about its bytes.
  const uint64_t count = (uint64_t{1} << 23) + 1;
  Bytes bytes;
  bytes.header(0, 2).str("a").u32(9).u32(0).u64(count).zeros(count);
  bytes.str("b").u32(9).u32(0).u64(count).zeros(count);
  const Status status = parse_error(bytes);
  EXPECT_EQ(status.code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(status.message(), HasSubstr("array of 8388609 elements at offset "));
  EXPECT_THAT(status.message(), HasSubstr("key #1 'b' exceeds cellm's limit of 16777216"));
}

TEST(GgufMalformedTest, StringArrayCountNeedsEightBytesPerElement) {
  Bytes bytes;
  bytes.header(0, 1).str("tokens").u32(9).u32(8).u64(100).zeros(799);
  expect_data_loss(bytes, "array of 100 string elements");
}

TEST(GgufMalformedTest, TruncatedArrayElementNamesElementAndKey) {
  Bytes bytes;
  bytes.header(0, 1).str("ids").u32(9).u32(8).u64(2).str("abcdefgh").u32(3);
  // 24 + 11 + 4 + 4 + 8 = 51: element 0 (16 bytes); element 1's length starts at 67.
  expect_data_loss(bytes,
                   "truncated at offset 67 while reading the length of element 1 of key "
                   "#0 'ids'");
}

TEST(GgufMalformedTest, UnknownValueTypeIsNamed) {
  Bytes bytes;
  bytes.header(0, 1).str("k").u32(13).u32(0);
  expect_data_loss(bytes, "key #0 'k' has unknown value type 13 at offset 33");
}

TEST(GgufMalformedTest, UnknownArrayElementTypeIsNamed) {
  Bytes bytes;
  bytes.header(0, 1).str("k").u32(9).u32(77).u64(0);
  expect_data_loss(bytes, "unknown array element type 77 at offset 37");
}

TEST(GgufMalformedTest, ArraysNestedTooDeepAreRefused) {
  Bytes bytes;
  bytes.header(0, 1).str("deep").u32(9);
  for (int i = 0; i < 20; ++i) bytes.u32(9).u64(1);  // array of array of ... (20 levels)
  bytes.u32(4).u64(0);
  expect_data_loss(bytes, "arrays nested more than 16 deep");
}

TEST(GgufMalformedTest, BoolOtherThanZeroOrOneIsRefused) {
  Bytes bytes;
  bytes.header(0, 1).str("flag").u32(7).u8(2);
  expect_data_loss(bytes, "bool byte 2 at offset 40 in the value of key #0 'flag'");
}

TEST(GgufMalformedTest, DuplicateKeyIsRefused) {
  Bytes bytes;
  bytes.header(0, 2).kv_u32("a.b", 1).kv_u32("a.b", 2);
  expect_data_loss(bytes, "duplicate key #1 'a.b' (also key #0)");
}

TEST(GgufMalformedTest, AlignmentMustBeU32) {
  Bytes bytes;
  bytes.header(0, 1).str("general.alignment").u32(10).u64(64);
  expect_data_loss(bytes, "general.alignment has type u64, expected u32 (value at offset 53)");
}

TEST(GgufMalformedTest, AlignmentMustBeNonzero) {
  Bytes bytes;
  bytes.header(0, 1).kv_u32("general.alignment", 0);
  expect_data_loss(bytes, "general.alignment is 0, not a nonzero power of two");
}

TEST(GgufMalformedTest, AlignmentMustBeAPowerOfTwo) {
  Bytes bytes;
  bytes.header(0, 1).kv_u32("general.alignment", 48);
  expect_data_loss(bytes, "general.alignment is 48, not a nonzero power of two");
}

TEST(GgufMalformedTest, TensorWithoutDimsIsRefused) {
  Bytes bytes;
  bytes.header(1, 0).tensor("w", {}, kF32, 0).pad_to(32).zeros(32);
  expect_data_loss(bytes,
                   "tensor #0 'w' (info at offset 24): has 0 dims (GGUF tensors have 1 to 4)");
}

TEST(GgufMalformedTest, TensorWithFiveDimsIsRefused) {
  Bytes bytes;
  bytes.header(1, 0).tensor("w", {1, 1, 1, 1, 1}, kF32, 0).pad_to(32).zeros(32);
  expect_data_loss(bytes, "tensor #0 'w' (info at offset 24): has 5 dims");
}

TEST(GgufMalformedTest, DimAboveInt64MaxIsRefused) {
  Bytes bytes;
  bytes.header(1, 0).tensor("w", {1, uint64_t{1} << 63}, kF32, 0).pad_to(32).zeros(32);
  expect_data_loss(bytes, "dim 1 is 9223372036854775808, above 2^63-1");
}

TEST(GgufMalformedTest, ElementCountOverflowIsRefused) {
  Bytes bytes;
  bytes.header(1, 0).tensor("w", {uint64_t{1} << 32, uint64_t{1} << 32}, kF32, 0);
  bytes.pad_to(32).zeros(32);
  expect_data_loss(bytes, "shape 4294967296x4294967296 has more than 2^63-1 elements");
}

TEST(GgufMalformedTest, ByteSizeOverflowIsRefused) {
  Bytes bytes;
  bytes.header(1, 0).tensor("w", {uint64_t{1} << 31, uint64_t{1} << 31}, kF32, 0);
  bytes.pad_to(32).zeros(32);
  expect_data_loss(bytes, "is more than 2^63-1 bytes");
}

TEST(GgufMalformedTest, RowThatIsNotWholeBlocksIsRefused) {
  Bytes bytes;
  bytes.header(1, 0).tensor("blk.0.attn_q.weight", {33, 2}, kQ4_0, 0).pad_to(32).zeros(128);
  expect_data_loss(bytes,
                   "tensor #0 'blk.0.attn_q.weight' (info at offset 24): q4_0 33x2: a "
                   "row of 33 elements is not a whole number of q4_0 blocks of 32");
}

TEST(GgufMalformedTest, UnknownTensorTypeNamesTypeAndTensor) {
  Bytes bytes;
  bytes.header(1, 0).tensor("w", {4}, 99, 0).pad_to(32).zeros(32);
  expect_data_loss(bytes, "tensor #0 'w' (info at offset 24): unknown tensor type id 99");
}

TEST(GgufMalformedTest, MisalignedDataOffsetIsRefused) {
  Bytes bytes;
  bytes.header(1, 0).tensor("w", {4}, kF32, 16).pad_to(32).zeros(64);
  expect_data_loss(bytes, "data offset 16 is not a multiple of the alignment 32");
}

TEST(GgufMalformedTest, MisalignedForTheFileAlignmentIsRefused) {
  Bytes bytes;
  bytes.header(1, 1).kv_u32("general.alignment", 64).tensor("w", {4}, kF32, 32);
  bytes.pad_to(64).zeros(128);
  expect_data_loss(bytes, "data offset 32 is not a multiple of the alignment 64");
}

TEST(GgufMalformedTest, TensorDataPastTheEndNamesTheRange) {
  Bytes bytes;
  bytes.header(1, 0).tensor("w", {16}, kF32, 0);  // 24 + 8 + 1 + 4 + 8 + 4 + 8 = 57 bytes
  bytes.pad_to(32).zeros(40);                     // data at 64; 64 bytes needed, 40 present
  expect_data_loss(bytes, "tensor 'w' data [64, 128) runs past the end of the file (size 104)");
}

TEST(GgufMalformedTest, TensorOffsetFarPastTheEnd) {
  Bytes bytes;
  bytes.header(1, 0).tensor("w", {1}, kF32, uint64_t{1} << 62).pad_to(32).zeros(32);
  expect_data_loss(bytes, "tensor 'w' data at offset 64 + 4611686018427387904 runs past the end");
}

TEST(GgufMalformedTest, DataSectionPastTheEnd) {
  Bytes bytes;
  bytes.header(1, 0).tensor("w", {0}, kF32, 0);  // 57 bytes: the data section would start at 64
  expect_data_loss(bytes,
                   "the data section starts at offset 64 (header end 57 rounded up to the "
                   "alignment 32), past the end of the file (size 57)");
}

TEST(GgufMalformedTest, OverlappingTensorsAreRefused) {
  Bytes bytes;
  bytes.header(2, 0).tensor("a", {16}, kF32, 0).tensor("b", {8}, kF32, 32);
  bytes.pad_to(32).zeros(64);
  const size_t data = 96;  // 24 + 33 + 33 = 90, rounded up to 96
  ASSERT_EQ(bytes.size(), data + 64);
  expect_data_loss(bytes, "tensor 'a' data [96, 160) overlaps tensor 'b' data [128, 160)");
}

TEST(GgufMalformedTest, DuplicateTensorNameIsRefused) {
  Bytes bytes;
  bytes.header(2, 0).tensor("w", {8}, kF32, 0).tensor("w", {8}, kF32, 32);
  bytes.pad_to(32).zeros(64);
  expect_data_loss(bytes, "tensor #1 'w' (info at offset 57): duplicate name (also tensor #0)");
}

TEST(GgufMalformedTest, TruncatedTensorInfoNamesTheField) {
  Bytes bytes;
  // A 61-byte key first, so the up-front tensor count check (32 bytes per tensor) passes.
  bytes.header(1, 1).str("k").u32(8).str(std::string(40, 'v'));
  bytes.str("w").u32(2).u64(4);  // the info starts at 85; dim 1 would start at 106
  expect_data_loss(bytes, "truncated at offset 106 while reading dim 1 of tensor #0 'w'");
}

TEST(GgufMalformedTest, ControlBytesInNamesAreEscaped) {
  Bytes bytes;
  bytes.header(1, 0).tensor(std::string("a\nb\0", 4), {4}, 99, 0).pad_to(32).zeros(32);
  expect_data_loss(bytes, "tensor #0 'a\\nb\\x00'");
}

TEST(GgufWellFormedEdgeTest, EmptyTensorWithAZeroDimIsAllowed) {
  Bytes bytes;
  bytes.header(1, 0).tensor("empty", {0, 4}, kF32, 0).pad_to(32);
  StatusOr<GgufFile> file = GgufFile::parse(bytes.get());
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  EXPECT_EQ(file->tensors()[0].num_elements, 0u);
  EXPECT_EQ(file->tensors()[0].size_bytes, 0u);
  EXPECT_TRUE(file->tensor_data(file->tensors()[0]).empty());
}

TEST(GgufWellFormedEdgeTest, FileWithoutTensorsMayEndRightAfterItsMetadata) {
  Bytes bytes;
  bytes.header(0, 1).str("general.name").u32(8).str("vocab");  // 24 + 20 + 4 + 13 = 61 bytes
  StatusOr<GgufFile> file = GgufFile::parse(bytes.get());
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  EXPECT_EQ(file->data_offset_bytes(), 61u);
  EXPECT_EQ(*file->get_string("general.name"), "vocab");
}

TEST(GgufWellFormedEdgeTest, TrailingBytesAfterTheLastTensorAreAllowed) {
  Bytes bytes;
  bytes.header(1, 0).tensor("w", {8}, kF32, 0).pad_to(32).zeros(32 + 100);
  StatusOr<GgufFile> file = GgufFile::parse(bytes.get());
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  EXPECT_EQ(file->data_offset_bytes(), 64u);
}

TEST(GgufOpenTest, ErrorsArePrefixedWithThePath) {
  const std::string path = ::testing::TempDir() + "gguf_open_truncated.gguf";
  {
    std::ofstream out(path, std::ios::binary);
    out.write("GGUF\x03\0", 6);
  }
  const Status status = GgufFile::open(path).status();
  EXPECT_EQ(status.code(), StatusCode::kDataLoss);
  EXPECT_EQ(status.message(),
            path + ": gguf: truncated at offset 4 while reading the version (file size 6)");
  std::filesystem::remove(path);
}

TEST(GgufOpenTest, MissingFileIsAnIoError) {
  const Status status = GgufFile::open("/nonexistent/model.gguf").status();
  EXPECT_EQ(status.code(), StatusCode::kIoError);
  EXPECT_THAT(status.message(), HasSubstr("/nonexistent/model.gguf"));
}

}  // namespace
}  // namespace cellm
