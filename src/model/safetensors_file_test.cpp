// SafetensorsFile and SafetensorsSet: a well-formed file read back exactly, and each kind of
// malformed header or data section refused with an error naming it.
#include "model/safetensors_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "model/safetensors_set.h"
#include "model/safetensors_test_util.h"

namespace cellm {
namespace {

using ::testing::HasSubstr;
namespace st = safetensors_testing;

std::vector<st::TensorBytes> sample_tensors() {
  return {
      {"a.weight", "F32", {2, 3}, st::f32_bytes({1, 2, 3, 4, 5, 6})},
      {"b.bias", "BF16", {2}, st::bf16_bytes({0.5f, -1.0f})},
      {"c.qweight", "I32", {1, 1}, st::raw_bytes(std::vector<int32_t>{0x12345678})},
      {"d.scalar", "F16", {}, st::f16_bytes({2.0f})},
  };
}

Status parse_error(const std::string& header, const std::vector<uint8_t>& data) {
  const std::vector<uint8_t> bytes = st::file_bytes(header, data);
  return SafetensorsFile::parse(bytes, "t.safetensors").status();
}

TEST(SafetensorsFileTest, ReadsNamesDtypesShapesMetadataAndBytes) {
  const std::vector<uint8_t> bytes = st::build(sample_tensors(), {{"format", "pt"}});
  StatusOr<SafetensorsFile> file = SafetensorsFile::parse(bytes);
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  ASSERT_EQ(file->tensors().size(), 4u);
  const SafetensorsTensor* a = file->find("a.weight");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->dtype, SafetensorsDtype::kF32);
  EXPECT_EQ(a->shape, (std::vector<uint64_t>{2, 3}));
  EXPECT_EQ(a->num_elements, 6u);
  ASSERT_EQ(a->data.size(), 24u);
  float last;
  std::memcpy(&last, a->data.data() + 20, 4);
  EXPECT_EQ(last, 6.0f);
  EXPECT_EQ(file->find("b.bias")->dtype, SafetensorsDtype::kBF16);
  EXPECT_EQ(file->find("b.bias")->offset_bytes, 24u);
  EXPECT_EQ(file->find("d.scalar")->num_elements, 1u);  // shape [] is a scalar
  EXPECT_EQ(file->find("d.scalar")->shape_string(), "[]");
  EXPECT_EQ(file->find("nope"), nullptr);
  ASSERT_EQ(file->metadata().size(), 1u);
  EXPECT_EQ(file->metadata()[0].second, "pt");
  // Tensors are listed in data order.
  EXPECT_EQ(file->tensors()[0].name, "a.weight");
  EXPECT_EQ(file->tensors()[3].name, "d.scalar");
}

TEST(SafetensorsFileTest, EmptyTensorsMayShareAnOffset) {
  const std::vector<uint8_t> bytes = st::build(
      {{"e0", "F32", {0, 4}, {}}, {"e1", "F32", {0}, {}}, {"x", "F32", {1}, st::f32_bytes({1})}});
  StatusOr<SafetensorsFile> file = SafetensorsFile::parse(bytes);
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  EXPECT_EQ(file->find("e0")->num_elements, 0u);
}

TEST(SafetensorsFileTest, ShortFilesAndBadHeaderLengthsAreErrors) {
  EXPECT_THAT(SafetensorsFile::parse(std::vector<uint8_t>(5, 0), "t").status().message(),
              HasSubstr("shorter than the 8-byte header length"));
  std::vector<uint8_t> bytes = st::build(sample_tensors());
  bytes.resize(40);  // the header runs past the end
  const Status past = SafetensorsFile::parse(bytes, "t.safetensors").status();
  EXPECT_EQ(past.code(), StatusCode::kDataLoss);
  EXPECT_THAT(past.message(), HasSubstr("t.safetensors: safetensors: header length"));
  EXPECT_THAT(past.message(), HasSubstr("runs past the end"));
  std::vector<uint8_t> huge(16, 0);
  huge[6] = 1;  // 2^48
  EXPECT_THAT(SafetensorsFile::parse(huge, "t").status().message(),
              HasSubstr("over the 104857600 byte limit"));
}

TEST(SafetensorsFileTest, TruncatedDataIsAnErrorNamingTheTensor) {
  std::vector<uint8_t> bytes = st::build(sample_tensors());
  bytes.pop_back();
  const Status status = SafetensorsFile::parse(bytes, "t.safetensors").status();
  EXPECT_EQ(status.code(), StatusCode::kDataLoss);
  EXPECT_THAT(status.message(), HasSubstr("tensor 'd.scalar'"));
  EXPECT_THAT(status.message(), HasSubstr("run past the data section"));
}

TEST(SafetensorsFileTest, MalformedHeadersAreErrorsNamingTheProblem) {
  const std::vector<uint8_t> data(64, 0);
  struct Case {
    std::string header;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"{", "not valid JSON"},
      {"[1, 2]", "not a JSON object"},
      {R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
           "a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})",
       "names 'a' twice"},
      {R"({"a": {"dtype": "F33", "shape": [1], "data_offsets": [0, 4]}})", "unknown dtype 'F33'"},
      {R"({"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", "not a list of sizes"},
      {R"({"a": {"dtype": "F32", "shape": [1.5], "data_offsets": [0, 4]}})", "not a list of sizes"},
      {R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [8, 4]}})", "end before they begin"},
      {R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [64, 68]}})", "past the data"},
      {R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}})", "needs 8"},
      {R"({"a": {"dtype": "F32", "shape": [4294967296, 4294967296, 16], "data_offsets": [0, 4]}})",
       "is too large"},
      {R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
           "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
       "overlaps tensor 'a'"},
      {R"({"a": {"dtype": "F32", "shape": [1]}})", "no 'data_offsets' pair"},
      {R"({"a": {"shape": [1], "data_offsets": [0, 4]}})", "no string 'dtype'"},
      {R"({"a": 7})", "not an object"},
      {R"({"__metadata__": {"k": 1}})", "'__metadata__' entry 'k' is not a string"},
      {R"({"a": [[[[[[[[[[[]]]]]]]]]]]})", "nests deeper than 8"},
  };
  for (const Case& c : cases) {
    const Status status = parse_error(c.header, data);
    EXPECT_FALSE(status.ok()) << c.header;
    EXPECT_THAT(status.message(), HasSubstr(c.expected)) << c.header;
    EXPECT_THAT(status.message(), HasSubstr("t.safetensors: safetensors: ")) << c.header;
  }
}

class SafetensorsSetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "safetensors_set_" + std::to_string(::getpid()) + "_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  std::string dir_;
};

TEST_F(SafetensorsSetTest, IndexMapsTensorsToShards) {
  ASSERT_TRUE(
      st::write_file(path("s1.safetensors"), st::build({{"x", "F32", {1}, st::f32_bytes({1})}})));
  ASSERT_TRUE(st::write_file(
      path("s2.safetensors"),
      st::build({{"y", "F32", {1}, st::f32_bytes({2})}, {"z", "F32", {1}, st::f32_bytes({3})}})));
  ASSERT_TRUE(st::write_text(
      path("model.safetensors.index.json"),
      R"({"metadata": {}, "weight_map": {"x": "s1.safetensors", "y": "s2.safetensors"}})"));
  StatusOr<SafetensorsSet> set = SafetensorsSet::open_dir(dir_);
  ASSERT_TRUE(set.ok()) << set.status().to_string();
  EXPECT_EQ(set->names(), (std::vector<std::string>{"x", "y"}));  // z is not in the index
  EXPECT_EQ(set->files().size(), 2u);
  EXPECT_THAT(set->file_of("y"), HasSubstr("s2.safetensors"));
  float y;
  std::memcpy(&y, set->find("y")->data.data(), 4);
  EXPECT_EQ(y, 2.0f);
}

TEST_F(SafetensorsSetTest, IndexNamingAMissingTensorOrAPathIsAnError) {
  ASSERT_TRUE(
      st::write_file(path("s1.safetensors"), st::build({{"x", "F32", {1}, st::f32_bytes({1})}})));
  ASSERT_TRUE(st::write_text(path("model.safetensors.index.json"),
                             R"({"weight_map": {"w": "s1.safetensors"}})"));
  EXPECT_THAT(SafetensorsSet::open_dir(dir_).status().message(),
              HasSubstr("tensor 'w' is not in shard 's1.safetensors'"));
  ASSERT_TRUE(st::write_text(path("model.safetensors.index.json"),
                             R"({"weight_map": {"x": "../s1.safetensors"}})"));
  EXPECT_THAT(SafetensorsSet::open_dir(dir_).status().message(),
              HasSubstr("is not a file name in the checkpoint directory"));
}

TEST_F(SafetensorsSetTest, AMalformedOrDeeplyNestedIndexIsRefusedNamingIt) {
  ASSERT_TRUE(st::write_text(path("model.safetensors.index.json"),
                             std::string(10000, '[') + std::string(10000, ']')));
  const Status nested = SafetensorsSet::open_dir(dir_).status();
  EXPECT_THAT(nested.message(), HasSubstr("model.safetensors.index.json"));
  EXPECT_THAT(nested.message(), HasSubstr("nests deeper"));
  ASSERT_TRUE(st::write_text(path("model.safetensors.index.json"), R"({"weight_map": {"x": )"));
  EXPECT_THAT(SafetensorsSet::open_dir(dir_).status().message(), HasSubstr("not valid JSON"));
  ASSERT_TRUE(st::write_text(path("model.safetensors.index.json"), R"({"weight_map": {"x": 3}})"));
  EXPECT_THAT(SafetensorsSet::open_dir(dir_).status().message(), HasSubstr("is not a string"));
}

TEST_F(SafetensorsSetTest, ShardsWithoutAnIndexMustNotRepeatNames) {
  ASSERT_TRUE(
      st::write_file(path("a.safetensors"), st::build({{"x", "F32", {1}, st::f32_bytes({1})}})));
  ASSERT_TRUE(
      st::write_file(path("b.safetensors"), st::build({{"x", "F32", {1}, st::f32_bytes({2})}})));
  EXPECT_THAT(SafetensorsSet::open_dir(dir_).status().message(),
              HasSubstr("tensor 'x' is also in"));
  EXPECT_THAT(SafetensorsSet::open_dir(dir_ + "/nope").status().message(),
              HasSubstr("does not exist"));
}

}  // namespace
}  // namespace cellm
