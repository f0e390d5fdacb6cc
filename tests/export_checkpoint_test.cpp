// `cellm export --checkpoint-dir` end to end on stories260K written as a Hugging Face checkpoint
// (two safetensors shards with an index, tokenizer.json, tokenizer_config.json): the program
// generates the same greedy tokens as stories260K.gguf with logits within 1e-5; the same
// checkpoint in bf16 equals stories260K with bf16-rounded weights.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "core/float16.h"
#include "export_test_support.h"
#include "gguf/gguf_writer.h"

namespace cellm {
namespace {

using ::testing::HasSubstr;

constexpr int32_t kSteps = 48;

std::vector<std::vector<int32_t>> prompts() {
  std::ifstream in(testing::test_model_path("reference/stories260K-greedy.json"));
  const nlohmann::json reference = nlohmann::json::parse(in);
  std::vector<std::vector<int32_t>> out;
  for (const auto& c : reference.at("cases")) {
    out.push_back(c.at("prompt_tokens").get<std::vector<int32_t>>());
  }
  return out;
}

GgufFile open_stories() {
  StatusOr<GgufFile> file = GgufFile::open(testing::test_model_path("stories260K.gguf"));
  EXPECT_TRUE(file.ok());
  return std::move(file).value();
}

ExportOptions checkpoint_options(const std::string& dir, const std::string& output) {
  ExportOptions options;
  options.source = ExportSource::kCheckpoint;
  options.input = dir;
  options.output = output;
  return options;
}

// Runs every prompt on both programs; returns the largest logits difference.
float compare_programs(const Program& a, const Program& b, bool expect_same_tokens) {
  float worst = 0.0f;
  for (const std::vector<int32_t>& prompt : prompts()) {
    const testing::GreedyRun ra = et::greedy(a, prompt, kSteps);
    const testing::GreedyRun rb = et::greedy(b, prompt, kSteps);
    if (expect_same_tokens) {
      EXPECT_EQ(ra.tokens, rb.tokens);
    }
    if (ra.tokens != rb.tokens) continue;  // rows after a different token are not comparable
    worst = std::max(worst, testing::max_abs_diff(ra.logits, rb.logits));
  }
  return worst;
}

TEST(ExportCheckpointTest, ShardedF32CheckpointEqualsTheGgufModel) {
  const std::string dir = et::fresh_dir("ckpt_f32");
  const GgufFile stories = open_stories();
  et::write_hf_checkpoint(stories, dir, {.dtype = "F32", .num_shards = 2});
  ASSERT_TRUE(et::exists(dir + "/model.safetensors.index.json"));
  const std::string output = dir + "/program.gguf";
  const ExportReport report = et::export_ok(checkpoint_options(dir, output));
  EXPECT_THAT(report.spec.source, HasSubstr("checkpoint"));

  const Program exported = et::load_ok(output);
  const Program original = et::load_ok(testing::test_model_path("stories260K.gguf"));
  // The mapping restores llama.cpp's layout exactly (the Q/K permutation included).
  for (const GgufTensorInfo& info : stories.tensors()) {
    const GgufTensorInfo* copy = exported.file().find_tensor(info.name);
    ASSERT_NE(copy, nullptr) << info.name;
    EXPECT_EQ(copy->dims, info.dims) << info.name;
    const auto a = stories.tensor_data(info), b = exported.file().tensor_data(*copy);
    EXPECT_TRUE(std::equal(a.begin(), a.end(), b.begin(), b.end())) << info.name;
  }
  const float worst = compare_programs(exported, original, true);
  EXPECT_LE(worst, 1e-5f);
  std::printf("f32 checkpoint vs stories260K.gguf: worst logits diff %.3g\n",
              static_cast<double>(worst));
}

TEST(ExportCheckpointTest, Bf16CheckpointEqualsBf16RoundedWeights) {
  const std::string dir = et::fresh_dir("ckpt_bf16");
  const GgufFile stories = open_stories();
  et::write_hf_checkpoint(stories, dir, {.dtype = "BF16", .num_shards = 2});
  const std::string output = dir + "/program.gguf";
  et::export_ok(checkpoint_options(dir, output));
  const Program exported = et::load_ok(output);
  EXPECT_EQ(exported.file().find_tensor("blk.0.attn_q.weight")->type, TensorType::kBF16);
  EXPECT_EQ(exported.file().find_tensor("blk.0.attn_norm.weight")->type, TensorType::kF32);

  // The test's own oracle: stories260K with every weight rounded to bf16, stored as f32.
  GgufWriter writer;
  for (const auto& [key, value] : stories.metadata())
    ASSERT_TRUE(writer.add_metadata(key, value).ok());
  std::vector<std::vector<float>> rounded;
  rounded.reserve(stories.tensors().size());
  for (const GgufTensorInfo& info : stories.tensors()) {
    std::vector<float> values = et::tensor_f32(stories, info.name);
    for (float& v : values) v = bf16_to_f32(f32_to_bf16(v));
    rounded.push_back(std::move(values));
    const std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(rounded.back().data()),
                                         rounded.back().size() * 4);
    ASSERT_TRUE(writer.add_tensor(info.name, TensorType::kF32, info.dims, bytes).ok());
  }
  const std::string oracle_path = dir + "/rounded.gguf";
  ASSERT_TRUE(writer.write_file(oracle_path).ok());
  const Program oracle = et::load_ok(oracle_path);
  const float worst = compare_programs(exported, oracle, true);
  EXPECT_LE(worst, 1e-5f);

  // Against the f32 model, bf16 weights move the logits by about a percent of their range.
  const Program original = et::load_ok(testing::test_model_path("stories260K.gguf"));
  const std::vector<int32_t> prompt = prompts()[0];
  const testing::GreedyRun a = et::greedy(exported, prompt, 1);
  const testing::GreedyRun b = et::greedy(original, prompt, 1);
  const float first_row = testing::max_abs_diff(a.logits, b.logits);
  EXPECT_LT(first_row, 0.5f);
  EXPECT_EQ(a.tokens, b.tokens);
  std::printf("bf16 checkpoint: vs rounded oracle %.3g, first row vs f32 model %.3g\n",
              static_cast<double>(worst), static_cast<double>(first_row));
}

TEST(ExportCheckpointTest, SingleFileCheckpointAndF16QuantAreAccepted) {
  const std::string dir = et::fresh_dir("ckpt_single");
  const GgufFile stories = open_stories();
  et::write_hf_checkpoint(stories, dir, {.dtype = "F16", .num_shards = 1});
  ASSERT_TRUE(et::exists(dir + "/model.safetensors"));
  ExportOptions options = checkpoint_options(dir, dir + "/program.gguf");
  options.quant = ExportQuant::kF32;
  et::export_ok(options);
  const Program exported = et::load_ok(options.output);
  EXPECT_EQ(exported.file().find_tensor("blk.0.attn_q.weight")->type, TensorType::kF32);
  EXPECT_EQ(*exported.file().get_u32("general.file_type"), 0u);
}

TEST(ExportCheckpointTest, CheckpointWithoutTokenizerNeedsTheFlag) {
  const std::string dir = et::fresh_dir("ckpt_no_tokenizer");
  const GgufFile stories = open_stories();
  et::write_hf_checkpoint(stories, dir, {.dtype = "F32", .num_shards = 1, .tokenizer = false});
  ExportOptions options = checkpoint_options(dir, dir + "/program.gguf");
  StatusOr<ExportReport> report = export_program(options);
  ASSERT_FALSE(report.ok());
  EXPECT_THAT(report.status().message(), HasSubstr("has no tokenizer.json; pass --tokenizer"));
  EXPECT_TRUE(et::nothing_left(options.output));
  options.tokenizer_path = testing::test_model_path("stories260K.gguf");
  et::export_ok(options);
  EXPECT_TRUE(et::exists(options.output));
}

}  // namespace
}  // namespace cellm
