// `cellm export` refusals: each invalid input — a missing config key, an unknown architecture, a
// shape mismatch, truncated or overlapping safetensors data, a stray tensor, W < m, W ≥ the
// context, too few cells, bad decode widths, a value that overflows the requested type while
// streaming — is a one-line error naming the key, tensor, file or flag, and leaves no output
// file behind (an existing output stays as it was).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <functional>

#include "export_test_support.h"
#include "model/safetensors_file.h"

namespace cellm {
namespace {

using ::testing::HasSubstr;

class ExportErrorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = et::fresh_dir(std::string("errors_") +
                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    StatusOr<GgufFile> stories = GgufFile::open(testing::test_model_path("stories260K.gguf"));
    ASSERT_TRUE(stories.ok());
    et::write_hf_checkpoint(*stories, dir_, {.dtype = "F32", .num_shards = 2});
    options_.source = ExportSource::kCheckpoint;
    options_.input = dir_;
    options_.output = dir_ + "/out/program.gguf";
    std::filesystem::create_directories(dir_ + "/out");
  }

  // Runs the export, expects a one-line error, and no file left behind.
  std::string error() {
    StatusOr<ExportReport> report = export_program(options_);
    EXPECT_FALSE(report.ok());
    if (report.ok()) return "";
    const std::string message = report.status().message();
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    EXPECT_TRUE(et::nothing_left(options_.output)) << message;
    EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir_ + "/out"),
                            std::filesystem::directory_iterator()),
              0)
        << "files left in the output folder";
    return message;
  }

  void edit_config(const std::function<void(Json&)>& edit) {
    std::ifstream in(dir_ + "/config.json");
    Json json = Json::parse(in);
    edit(json);
    ASSERT_TRUE(st::write_text(dir_ + "/config.json", json.dump()));
  }

  std::string shard(int i) const {
    return dir_ + "/model-0000" + std::to_string(i) + "-of-00002.safetensors";
  }

  std::vector<uint8_t> read(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }

  std::string dir_;
  ExportOptions options_;
};

TEST_F(ExportErrorsTest, MissingConfigKey) {
  edit_config([](Json& j) { j.erase("hidden_size"); });
  const std::string message = error();
  EXPECT_THAT(message, HasSubstr("config.json: key 'hidden_size' is missing"));
}

TEST_F(ExportErrorsTest, UnknownArchitecture) {
  edit_config([](Json& j) { j["model_type"] = "gpt_neox"; });
  EXPECT_THAT(error(), HasSubstr("architecture 'gpt_neox' is not supported"));
}

TEST_F(ExportErrorsTest, ShapeMismatch) {
  edit_config([](Json& j) { j["intermediate_size"] = 160; });
  const std::string message = error();
  EXPECT_THAT(message, HasSubstr("tensor 'model.layers.0.mlp.gate_proj.weight' has shape "
                                 "[172, 64], expected [160, 64] from config.json"));
  EXPECT_THAT(message, HasSubstr("safetensors"));
}

TEST_F(ExportErrorsTest, TruncatedSafetensors) {
  const std::vector<uint8_t> bytes = read(shard(2));
  ASSERT_GT(bytes.size(), 100u);
  ASSERT_TRUE(st::write_file(shard(2), std::vector<uint8_t>(bytes.begin(), bytes.end() - 100)));
  const std::string message = error();
  EXPECT_THAT(message, HasSubstr("model-00002-of-00002.safetensors: safetensors: tensor"));
  EXPECT_THAT(message, HasSubstr("run past the data section"));
}

TEST_F(ExportErrorsTest, OverlappingSafetensors) {
  const std::vector<uint8_t> bytes = read(shard(1));
  StatusOr<SafetensorsFile> file = SafetensorsFile::parse(bytes);
  ASSERT_TRUE(file.ok());
  uint64_t header_bytes = 0;
  std::memcpy(&header_bytes, bytes.data(), 8);
  Json header = Json::parse(bytes.begin() + 8, bytes.begin() + 8 + static_cast<long>(header_bytes));
  // Move the second tensor (in data order) 4 bytes back, into the first.
  const SafetensorsTensor& second = file->tensors()[1];
  header[second.name]["data_offsets"] = {second.offset_bytes - 4,
                                         second.offset_bytes - 4 + second.data.size()};
  const std::vector<uint8_t> data(bytes.begin() + 8 + static_cast<long>(header_bytes), bytes.end());
  ASSERT_TRUE(st::write_file(shard(1), st::file_bytes(header.dump(), data)));
  const std::string message = error();
  EXPECT_THAT(message, HasSubstr("model-00001-of-00002.safetensors: safetensors: tensor '" +
                                 second.name + "'"));
  EXPECT_THAT(message, HasSubstr("overlaps tensor '" + file->tensors()[0].name + "'"));
}

TEST_F(ExportErrorsTest, StrayTensor) {
  const std::vector<st::TensorBytes> extra = {
      {"model.vision.weight", "F32", {1}, st::f32_bytes({1})}};
  ASSERT_TRUE(st::write_file(dir_ + "/extra.safetensors", st::build(extra)));
  edit_config([](Json&) {});
  std::ifstream in(dir_ + "/model.safetensors.index.json");
  Json index = Json::parse(in);
  index["weight_map"]["model.vision.weight"] = "extra.safetensors";
  ASSERT_TRUE(st::write_text(dir_ + "/model.safetensors.index.json", index.dump()));
  EXPECT_THAT(error(), HasSubstr("tensor 'model.vision.weight' is not part of a llama model"));
}

TEST_F(ExportErrorsTest, LimitsAreCheckedAgainstEachOther) {
  options_.max_step_tokens = 4;
  options_.min_prefill_chunk = 5;
  EXPECT_EQ(error(), "--max-step-tokens (W = 4) must be at least --min-prefill-chunk (m = 5)");
  options_.min_prefill_chunk = -1;
  EXPECT_THAT(error(), HasSubstr("--min-prefill-chunk (-1) must be at least 1 (or auto)"));
  options_.min_prefill_chunk = 5;
  options_.max_step_tokens = 512;
  options_.max_seq_len = 512;
  EXPECT_EQ(error(), "--max-step-tokens (W = 512) must be below --max-seq-len (512)");
  options_.max_seq_len = 0;
  options_.max_cells = 100;
  EXPECT_EQ(error(), "--max-cells (100) must be at least --max-step-tokens (W = 512)");
  options_.max_cells = 65536;
  options_.max_step_tokens = 4096;  // the model's context is 2048
  EXPECT_THAT(error(), HasSubstr("below the model's context length (2048)"));
  options_.max_step_tokens = 512;
  options_.decode_widths = {2, 4};
  EXPECT_EQ(error(), "--decode-widths must start at 1");
  options_.decode_widths = {1, 4, 4};
  EXPECT_EQ(error(), "--decode-widths must be strictly ascending");
  options_.decode_widths = {1, 1024};
  EXPECT_THAT(error(), HasSubstr("--decode-widths: 1024 is wider than --max-step-tokens"));
  EXPECT_THAT(parse_export_quant("q5_k").status().message(), HasSubstr("--quant 'q5_k'"));
  EXPECT_THAT(parse_decode_widths("1,x").status().message(), HasSubstr("--decode-widths '1,x'"));
  EXPECT_EQ(*parse_decode_widths("1,2,8"), (std::vector<int32_t>{1, 2, 8}));
  EXPECT_EQ(*parse_min_prefill_chunk("auto"), kAutoMinPrefillChunk);
  EXPECT_EQ(*parse_min_prefill_chunk("17"), 17);
  EXPECT_THAT(parse_min_prefill_chunk("17x").status().message(),
              HasSubstr("--min-prefill-chunk '17x'"));
}

TEST_F(ExportErrorsTest, FailureWhileStreamingLeavesTheOldOutput) {
  // A weight of 1e6 cannot be f16: the write fails at that tensor, mid-file.
  std::vector<uint8_t> bytes = read(shard(2));
  StatusOr<SafetensorsFile> file = SafetensorsFile::parse(bytes);
  ASSERT_TRUE(file.ok());
  const SafetensorsTensor* down = file->find("model.layers.4.mlp.down_proj.weight");
  ASSERT_NE(down, nullptr);
  const float huge = 1e6f;
  std::memcpy(bytes.data() + (down->data.data() - bytes.data()) + 4 * 70, &huge, 4);
  ASSERT_TRUE(st::write_file(shard(2), bytes));
  ASSERT_TRUE(st::write_text(options_.output, "old"));
  options_.quant = ExportQuant::kF16;
  StatusOr<ExportReport> report = export_program(options_);
  ASSERT_FALSE(report.ok());
  EXPECT_THAT(report.status().message(), HasSubstr("tensor 'blk.4.ffn_down.weight'"));
  EXPECT_EQ(report.status().message().find('\n'), std::string::npos);
  std::ifstream in(options_.output);
  std::string content;
  std::getline(in, content);
  EXPECT_EQ(content, "old");
  EXPECT_FALSE(et::exists(options_.output + ".partial"));
  EXPECT_FALSE(et::exists(options_.output + ".partial.tmp"));
}

TEST_F(ExportErrorsTest, MissingInputsNameThePath) {
  options_.input = dir_ + "/nowhere";
  EXPECT_THAT(error(), HasSubstr("nowhere"));
  options_.source = ExportSource::kGguf;
  options_.input = dir_ + "/nowhere.gguf";
  EXPECT_THAT(error(), HasSubstr("--gguf"));
}

}  // namespace
}  // namespace cellm
