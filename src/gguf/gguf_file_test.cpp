// GgufFile: writer → reader round trips of every value type, nested arrays, tensors of several
// types and alignments, and the typed getters' conversions and refusals.
#include "gguf/gguf_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "gguf/gguf_test_support.h"
#include "gguf/gguf_writer.h"

namespace cellm {
namespace {

using ::testing::HasSubstr;

std::vector<uint8_t> pattern_bytes(size_t size, uint8_t seed) {
  std::vector<uint8_t> bytes(size);
  for (size_t i = 0; i < size; ++i) bytes[i] = static_cast<uint8_t>(seed + i * 7);
  return bytes;
}

// Every scalar type at its limits, strings with NUL and UTF-8, and arrays of every kind.
std::vector<std::pair<std::string, GgufValue>> every_value_type() {
  using V = GgufValue;
  return {
      {"u8.max", V::u8(255)},
      {"i8.min", V::i8(-128)},
      {"u16.max", V::u16(65535)},
      {"i16.min", V::i16(-32768)},
      {"u32.max", V::u32(4294967295u)},
      {"i32.min", V::i32(std::numeric_limits<int32_t>::min())},
      {"u64.max", V::u64(std::numeric_limits<uint64_t>::max())},
      {"i64.min", V::i64(std::numeric_limits<int64_t>::min())},
      {"f32.value", V::f32(-1.5e-5f)},
      {"f32.nan", V::f32(std::numeric_limits<float>::quiet_NaN())},
      {"f64.value", V::f64(3.141592653589793)},
      {"f64.neg_zero", V::f64(-0.0)},
      {"bool.true", V::boolean(true)},
      {"bool.false", V::boolean(false)},
      {"string.empty", V::string("")},
      {"string.binary", V::string(std::string("a\0b\xe2\x96\x81", 6))},
      {"array.empty", V::array(GgufValueType::kUint32, {})},
      {"array.strings", V::array(GgufValueType::kString, {V::string("<unk>"), V::string("")})},
      {"array.bools", V::array(GgufValueType::kBool, {V::boolean(true), V::boolean(false)})},
      {"array.i16", V::array(GgufValueType::kInt16, {V::i16(-1), V::i16(7)})},
      {"array.f64", V::array(GgufValueType::kFloat64, {V::f64(0.25), V::f64(-2)})},
      {"array.nested", V::array(GgufValueType::kArray,
                                {V::array(GgufValueType::kUint8, {V::u8(1), V::u8(2)}),
                                 V::array(GgufValueType::kString, {V::string("x")}),
                                 V::array(GgufValueType::kArray,
                                          {V::array(GgufValueType::kInt64, {V::i64(-9)})})})},
  };
}

struct TensorSpec {
  std::string name;
  TensorType type;
  std::vector<uint64_t> dims;
  size_t size_bytes;  // worked out by hand from the block geometry
};

const std::vector<TensorSpec>& tensor_specs() {
  static const std::vector<TensorSpec> specs = {
      {"f32.matrix", TensorType::kF32, {4, 3}, 4 * 3 * 4},
      {"f16.vector", TensorType::kF16, {5}, 5 * 2},
      {"q4_0.matrix", TensorType::kQ4_0, {64, 2}, 2 * 2 * 18},
      {"q8_0.cube", TensorType::kQ8_0, {32, 1, 3}, 3 * 34},
      {"bf16.4d", TensorType::kBF16, {2, 1, 1, 2}, 4 * 2},
      {"q6_K.row", TensorType::kQ6_K, {256}, 210},
      {"empty", TensorType::kF32, {0, 4}, 0},
      // Empty whatever the other dims, even where they multiply past 2^64 (a fuzzer's find).
      {"empty.huge_dims", TensorType::kF32, {uint64_t{1} << 40, uint64_t{1} << 40, 0}, 0},
  };
  return specs;
}

class GgufRoundTripTest : public ::testing::TestWithParam<uint32_t> {};

TEST_P(GgufRoundTripTest, EveryValueTypeAndTensorSurvivesAWriteAndAParse) {
  const uint32_t alignment = GetParam();
  GgufWriter writer;
  ASSERT_TRUE(writer.set_alignment(alignment).ok());
  for (const auto& [key, value] : every_value_type()) {
    ASSERT_TRUE(writer.add_metadata(key, value).ok()) << key;
  }
  std::vector<std::vector<uint8_t>> data;
  for (const TensorSpec& spec : tensor_specs()) {
    data.push_back(pattern_bytes(spec.size_bytes, static_cast<uint8_t>(data.size())));
  }
  for (size_t i = 0; i < tensor_specs().size(); ++i) {
    const TensorSpec& spec = tensor_specs()[i];
    ASSERT_TRUE(writer.add_tensor(spec.name, spec.type, spec.dims, data[i]).ok()) << spec.name;
  }
  StatusOr<std::vector<uint8_t>> bytes = writer.write_bytes();
  ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
  StatusOr<GgufFile> file = GgufFile::parse(*bytes);
  ASSERT_TRUE(file.ok()) << file.status().to_string();

  EXPECT_EQ(file->version(), 3u);
  EXPECT_EQ(file->alignment(), alignment);
  EXPECT_EQ(file->data_offset_bytes() % alignment, 0u);
  std::vector<std::pair<std::string, GgufValue>> expected = every_value_type();
  if (alignment != 32) {
    // Written first, by set_alignment, because it was called before any key was added.
    expected.insert(expected.begin(), {"general.alignment", GgufValue::u32(alignment)});
  }
  ASSERT_EQ(file->metadata().size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(file->metadata()[i].first, expected[i].first);
    EXPECT_TRUE(file->metadata()[i].second == expected[i].second) << expected[i].first;
  }
  ASSERT_EQ(file->tensors().size(), tensor_specs().size());
  for (size_t i = 0; i < tensor_specs().size(); ++i) {
    const TensorSpec& spec = tensor_specs()[i];
    const GgufTensorInfo* info = file->find_tensor(spec.name);
    ASSERT_NE(info, nullptr) << spec.name;
    EXPECT_EQ(&file->tensors()[i], info);
    EXPECT_EQ(info->type, spec.type);
    EXPECT_EQ(info->dims, spec.dims);
    EXPECT_EQ(info->size_bytes, spec.size_bytes);
    EXPECT_EQ(info->offset_bytes % alignment, 0u);
    const std::span<const uint8_t> got = file->tensor_data(*info);
    EXPECT_TRUE(std::equal(got.begin(), got.end(), data[i].begin(), data[i].end())) << spec.name;
  }
  EXPECT_EQ(gguf_testing::check_parsed_file(*file, *bytes), "");
}

INSTANTIATE_TEST_SUITE_P(Alignments, GgufRoundTripTest, ::testing::Values(1u, 8u, 32u, 64u, 4096u));

TEST(GgufFileTest, ShapeStringIsInnermostFirst) {
  GgufTensorInfo info;
  info.dims = {64, 512};
  EXPECT_EQ(info.shape_string(), "64x512");
  EXPECT_EQ(info.dim(0), 64u);
  EXPECT_EQ(info.dim(3), 1u);
}

TEST(GgufFileTest, VersionTwoFilesParse) {
  GgufWriter writer;
  ASSERT_TRUE(writer.add_metadata("general.architecture", GgufValue::string("llama")).ok());
  StatusOr<std::vector<uint8_t>> bytes = writer.write_bytes();
  ASSERT_TRUE(bytes.ok());
  (*bytes)[4] = 2;  // v2 has the same layout as v3 for a little-endian file
  StatusOr<GgufFile> file = GgufFile::parse(*bytes);
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  EXPECT_EQ(file->version(), 2u);
  EXPECT_EQ(*file->get_string("general.architecture"), "llama");
}

// A parsed file with one key per getter case.
GgufFile getter_file(std::vector<uint8_t>* storage) {
  using V = GgufValue;
  GgufWriter writer;
  const std::vector<std::pair<std::string, GgufValue>> entries = {
      {"u32", V::u32(4096)},
      {"u32.big", V::u32(4294967295u)},
      {"i32.negative", V::i32(-1)},
      {"u8", V::u8(200)},
      {"u64.huge", V::u64(uint64_t{1} << 40)},
      {"i64.small", V::i64(12)},
      {"f32", V::f32(1e-5f)},
      {"f64", V::f64(0.5)},
      {"f64.huge", V::f64(1e300)},
      {"bool", V::boolean(true)},
      {"string", V::string("llama")},
      {"strings", V::array(GgufValueType::kString, {V::string("a"), V::string("b")})},
      {"u8s", V::array(GgufValueType::kUint8, {V::u8(1), V::u8(255)})},
      {"u32s.big", V::array(GgufValueType::kUint32, {V::u32(1), V::u32(2147483648u)})},
      {"i32s.negative", V::array(GgufValueType::kInt32, {V::i32(3), V::i32(-4)})},
      {"f32s", V::array(GgufValueType::kFloat32, {V::f32(0.5f), V::f32(-2.0f)})},
      {"f64s", V::array(GgufValueType::kFloat64, {V::f64(0.25)})},
  };
  for (const auto& [key, value] : entries)
    CELLM_CHECK(writer.add_metadata(key, value).ok()) << "test key " << key << " refused";
  *storage = std::move(writer.write_bytes()).value();
  return std::move(GgufFile::parse(*storage)).value();
}

TEST(GgufGetterTest, IntegerGettersAcceptAnyIntegerTypeThatFits) {
  std::vector<uint8_t> storage;
  const GgufFile file = getter_file(&storage);
  EXPECT_EQ(*file.get_u32("u32"), 4096u);
  EXPECT_EQ(*file.get_i32("u32"), 4096);
  EXPECT_EQ(*file.get_u64("u32"), 4096u);
  EXPECT_EQ(*file.get_u32("u8"), 200u);
  EXPECT_EQ(*file.get_u32("i64.small"), 12u);
  EXPECT_EQ(*file.get_u64("u64.huge"), uint64_t{1} << 40);
  EXPECT_EQ(*file.get_u32("u32.big"), 4294967295u);
}

TEST(GgufGetterTest, IntegerThatDoesNotFitNamesKeyValueAndTypes) {
  std::vector<uint8_t> storage;
  const GgufFile file = getter_file(&storage);
  const Status negative = file.get_u32("i32.negative").status();
  EXPECT_EQ(negative.code(), StatusCode::kDataLoss);
  EXPECT_THAT(negative.message(), HasSubstr("key 'i32.negative' value -1 (i32) does not fit u32"));
  EXPECT_THAT(file.get_i32("u32.big").status().message(),
              HasSubstr("value 4294967295 (u32) does not fit i32"));
  EXPECT_THAT(file.get_u32("u64.huge").status().message(),
              HasSubstr("value 1099511627776 (u64) does not fit u32"));
}

TEST(GgufGetterTest, WrongTypeNamesActualAndExpectedType) {
  std::vector<uint8_t> storage;
  const GgufFile file = getter_file(&storage);
  const Status status = file.get_u32("string").status();
  EXPECT_EQ(status.code(), StatusCode::kDataLoss);
  EXPECT_THAT(status.message(), HasSubstr("key 'string' has type string, expected u32"));
  EXPECT_THAT(file.get_u32("f32").status().message(), HasSubstr("has type f32, expected u32"));
  EXPECT_THAT(file.get_f32("u32").status().message(), HasSubstr("has type u32, expected f32"));
  EXPECT_THAT(file.get_bool("u8").status().message(), HasSubstr("has type u8, expected bool"));
  EXPECT_THAT(file.get_string("strings").status().message(),
              HasSubstr("has type array of string, expected string"));
}

TEST(GgufGetterTest, MissingKeyIsNotFound) {
  std::vector<uint8_t> storage;
  const GgufFile file = getter_file(&storage);
  const Status status = file.get_u32("llama.rope.freq_base").status();
  EXPECT_EQ(status.code(), StatusCode::kNotFound);
  EXPECT_THAT(status.message(), HasSubstr("key 'llama.rope.freq_base' not found"));
  EXPECT_FALSE(file.has("llama.rope.freq_base"));
  EXPECT_TRUE(file.has("u32"));
}

TEST(GgufGetterTest, FloatGettersAcceptF32AndF64) {
  std::vector<uint8_t> storage;
  const GgufFile file = getter_file(&storage);
  EXPECT_EQ(*file.get_f32("f32"), 1e-5f);
  EXPECT_EQ(*file.get_f32("f64"), 0.5f);
  EXPECT_THAT(file.get_f32("f64.huge").status().message(),
              HasSubstr("value 1e+300 (f64) does not fit f32"));
  EXPECT_EQ(*file.get_bool("bool"), true);
  EXPECT_EQ(*file.get_string("string"), "llama");
}

TEST(GgufGetterTest, ArrayGettersCheckElementTypes) {
  std::vector<uint8_t> storage;
  const GgufFile file = getter_file(&storage);
  EXPECT_EQ(*file.get_string_array("strings"), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(*file.get_i32_array("u8s"), (std::vector<int32_t>{1, 255}));
  EXPECT_EQ(*file.get_u32_array("u8s"), (std::vector<uint32_t>{1, 255}));
  EXPECT_EQ(*file.get_u32_array("u32s.big"), (std::vector<uint32_t>{1, 2147483648u}));
  EXPECT_EQ(*file.get_i32_array("i32s.negative"), (std::vector<int32_t>{3, -4}));
  EXPECT_EQ(*file.get_f32_array("f32s"), (std::vector<float>{0.5f, -2.0f}));
  EXPECT_EQ(*file.get_f32_array("f64s"), (std::vector<float>{0.25f}));

  EXPECT_THAT(file.get_i32_array("u32s.big").status().message(),
              HasSubstr("element 1 value 2147483648 (u32) does not fit i32"));
  EXPECT_THAT(file.get_u32_array("i32s.negative").status().message(),
              HasSubstr("element 1 value -4 (i32) does not fit u32"));
  EXPECT_THAT(file.get_f32_array("i32s.negative").status().message(),
              HasSubstr("has type array of i32, expected array of f32"));
  EXPECT_THAT(file.get_string_array("u8s").status().message(),
              HasSubstr("has type array of u8, expected array of string"));
  EXPECT_THAT(file.get_i32_array("string").status().message(),
              HasSubstr("has type string, expected array of i32"));
}

TEST(GgufValueTest, IntegersConvertOnlyWhenTheyFit) {
  EXPECT_EQ(GgufValue::i8(-3).as_i64(), -3);
  EXPECT_EQ(GgufValue::i8(-3).as_u64(), std::nullopt);
  EXPECT_EQ(GgufValue::u64(std::numeric_limits<uint64_t>::max()).as_i64(), std::nullopt);
  EXPECT_EQ(GgufValue::u16(9).as_i64(), 9);
  EXPECT_EQ(GgufValue::f32(1.0f).as_u64(), std::nullopt);
  EXPECT_EQ(GgufValue::u32(1).as_f64(), std::nullopt);
  EXPECT_EQ(GgufValue::boolean(true).as_u64(), std::nullopt);
  EXPECT_EQ(GgufValue::u8(1).as_bool(), std::nullopt);
  EXPECT_EQ(GgufValue::u8(1).as_string(), nullptr);
  EXPECT_EQ(GgufValue::string("x").as_array(), nullptr);
}

TEST(GgufValueTest, SummaryAbbreviatesLongArraysAndQuotesStrings) {
  using V = GgufValue;
  std::vector<V> tokens;
  for (const char* token : {"<unk>", "<s>", "</s>", "a", "b", "c", "d", "e"}) {
    tokens.push_back(V::string(token));
  }
  EXPECT_EQ(V::array(GgufValueType::kString, tokens).summary(3),
            "[8 strings: '<unk>', '<s>', '</s>', ...]");
  EXPECT_EQ(V::array(GgufValueType::kFloat32, {V::f32(0.5f), V::f32(1e-5f)}).summary(),
            "[2 f32 values: 0.5, 1e-05]");
  EXPECT_EQ(V::array(GgufValueType::kUint32, {}).summary(), "[0 u32 values]");
  EXPECT_EQ(V::string("a'b\n").summary(), "'a\\'b\\n'");
  EXPECT_EQ(V::i32(-7).summary(), "-7");
  EXPECT_EQ(V::boolean(false).summary(), "false");
  EXPECT_EQ(V::f32(9.99999975e-06f).summary(), "1e-05");
  EXPECT_EQ(V::string(std::string(100, 'x')).summary(), "'" + std::string(48, 'x') + "'...");
}

TEST(GgufValueTest, EqualityIsDeepAndBitwiseForFloats) {
  using V = GgufValue;
  EXPECT_TRUE(V::u32(1) == V::u32(1));
  EXPECT_FALSE(V::u32(1) == V::i32(1));
  EXPECT_FALSE(V::f64(0.0) == V::f64(-0.0));
  EXPECT_TRUE(V::f32(std::nanf("")) == V::f32(std::nanf("")));
  EXPECT_FALSE(V::array(GgufValueType::kUint8, {V::u8(1)}) ==
               V::array(GgufValueType::kUint8, {V::u8(2)}));
}

}  // namespace
}  // namespace cellm
