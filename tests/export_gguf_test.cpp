// `cellm export --gguf` end to end: stories260K exported as a program carries every cellm.* key of
// DESIGN §3, loads with Program::load, and generates exactly llama.cpp's reference tokens; flags
// set the limits; re-quantization and the tokenizer override behave as documented.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "export_test_support.h"

namespace cellm {
namespace {

using ::testing::HasSubstr;

ExportOptions stories_options(const std::string& output) {
  ExportOptions options;
  options.source = ExportSource::kGguf;
  options.input = testing::test_model_path("stories260K.gguf");
  options.output = output;
  return options;
}

nlohmann::json reference() {
  std::ifstream in(testing::test_model_path("reference/stories260K-greedy.json"));
  return nlohmann::json::parse(in);
}

TEST(ExportGgufTest, Stories260KProgramHasEveryKeyAndGeneratesTheReferenceTokens) {
  const std::string output = et::fresh_dir("gguf_stories") + "/stories.cellm.gguf";
  const ExportReport report = et::export_ok(stories_options(output));
  EXPECT_EQ(report.num_tensors, 48u);
  EXPECT_TRUE(et::nothing_left(output + ".x"));  // no temporaries beside the output
  EXPECT_FALSE(et::exists(output + ".partial"));

  const Program program = et::load_ok(output);
  EXPECT_FALSE(program.uses_default_spec());
  const GgufFile& file = program.file();
  // DESIGN §3's table, key by key, with the values the defaults give stories260K.
  EXPECT_EQ(*file.get_u32("cellm.format_version"), 1u);
  EXPECT_EQ(*file.get_u32("cellm.max_context_len"), 2048u);
  EXPECT_EQ(*file.get_u32("cellm.max_step_tokens"), 512u);
  // The recommended plan: decode graphs per power of two up to 256 and halfway between from 16,
  // m one past the widest.
  EXPECT_EQ(*file.get_u32("cellm.min_prefill_chunk"), 257u);
  EXPECT_EQ(*file.get_u32_array("cellm.decode_widths"),
            (std::vector<uint32_t>{1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256}));
  EXPECT_EQ(*file.get_string("cellm.logits_to_keep_mode"), "selected");
  EXPECT_EQ(*file.get_string("cellm.kv.layout"), "cell");
  EXPECT_EQ(*file.get_u32("cellm.kv.max_cells"), 65536u);
  EXPECT_EQ(*file.get_string("cellm.kv.dtype"), "f32");
  EXPECT_EQ(*file.get_u32_array("cellm.kv.heads"), std::vector<uint32_t>(5, 4));
  EXPECT_EQ(*file.get_u32_array("cellm.kv.head_dims"), std::vector<uint32_t>(5, 8));
  EXPECT_EQ(*file.get_u32_array("cellm.kv.windows"), std::vector<uint32_t>(5, 0));
  EXPECT_EQ(*file.get_u32("cellm.vocab_size"), 512u);
  EXPECT_THAT(*file.get_string("cellm.source"), HasSubstr("gguf stories260K.gguf"));

  // Every tensor and every source key is kept as it was.
  StatusOr<GgufFile> source = GgufFile::open(testing::test_model_path("stories260K.gguf"));
  ASSERT_TRUE(source.ok());
  for (const GgufTensorInfo& info : source->tensors()) {
    const GgufTensorInfo* copy = file.find_tensor(info.name);
    ASSERT_NE(copy, nullptr) << info.name;
    EXPECT_EQ(copy->type, info.type);
    EXPECT_EQ(copy->dims, info.dims);
    const auto a = source->tensor_data(info), b = file.tensor_data(*copy);
    EXPECT_TRUE(std::equal(a.begin(), a.end(), b.begin(), b.end())) << info.name;
  }
  for (const auto& [key, value] : source->metadata()) {
    ASSERT_NE(file.find(key), nullptr) << key;
    EXPECT_TRUE(*file.find(key) == value) << key;
  }

  int num_cases = 0;
  const nlohmann::json cases = reference().at("cases");
  for (const auto& c : cases) {
    const auto prompt = c.at("prompt_tokens").get<std::vector<int32_t>>();
    const auto expected = c.at("generated_tokens").get<std::vector<int32_t>>();
    const testing::GreedyRun run =
        et::greedy(program, prompt, static_cast<int32_t>(expected.size()));
    EXPECT_EQ(run.tokens, expected) << c.at("prompt");
    ++num_cases;
  }
  EXPECT_EQ(num_cases, 6);
}

TEST(ExportGgufTest, FlagsSetTheProgramLimits) {
  const std::string output = et::fresh_dir("gguf_flags") + "/p.gguf";
  ExportOptions options = stories_options(output);
  options.max_step_tokens = 64;
  options.min_prefill_chunk = 8;
  options.max_cells = 1024;
  options.max_seq_len = 512;
  options.decode_widths = {1, 2, 4};
  options.kv_dtype = KvDtype::kF16;
  et::export_ok(options);
  const Program program = et::load_ok(output);
  const ProgramSpec& spec = program.spec();
  EXPECT_EQ(spec.max_step_tokens, 64);
  EXPECT_EQ(spec.min_prefill_chunk, 8);
  EXPECT_EQ(spec.kv_max_cells, 1024);
  EXPECT_EQ(spec.max_context_len, 512);
  EXPECT_EQ(spec.decode_widths, (std::vector<int32_t>{1, 2, 4}));
  EXPECT_EQ(spec.kv_dtype, KvDtype::kF16);
}

TEST(ExportGgufTest, TheDefaultPlanKeepsItsWidthsBelowASmallerW) {
  const std::string output = et::fresh_dir("gguf_plan") + "/p.gguf";
  ExportOptions options = stories_options(output);
  options.max_step_tokens = 64;  // decode widths 1 ... 48, m one past them
  et::export_ok(options);
  const ProgramSpec spec = et::load_ok(output).spec();
  EXPECT_EQ(spec.decode_widths, (std::vector<int32_t>{1, 2, 4, 8, 16, 24, 32, 48}));
  EXPECT_EQ(spec.min_prefill_chunk, 49);
}

TEST(ExportGgufTest, Q8_0QuantizesWholeBlockRowsAndKeepsTheOthers) {
  const std::string output = et::fresh_dir("gguf_q8") + "/q8.gguf";
  ExportOptions options = stories_options(output);
  options.quant = ExportQuant::kQ8_0;
  const ExportReport report = et::export_ok(options);
  const Program program = et::load_ok(output);
  const GgufFile& file = program.file();
  EXPECT_EQ(file.find_tensor("blk.0.attn_q.weight")->type, TensorType::kQ8_0);
  EXPECT_EQ(file.find_tensor("token_embd.weight")->type, TensorType::kQ8_0);
  EXPECT_EQ(file.find_tensor("blk.0.ffn_gate.weight")->type, TensorType::kQ8_0);  // rows of 64
  EXPECT_EQ(file.find_tensor("blk.0.ffn_down.weight")->type, TensorType::kF32);   // rows of 172
  EXPECT_EQ(file.find_tensor("blk.0.attn_norm.weight")->type, TensorType::kF32);
  EXPECT_EQ(*file.get_u32("general.file_type"), 7u);
  ASSERT_EQ(report.notes.size(), 5u);  // one ffn_down per layer
  EXPECT_THAT(report.notes[0], HasSubstr("'blk.0.ffn_down.weight'"));
  EXPECT_THAT(report.notes[0], HasSubstr("172"));

  // q8_0 weights move the logits a little: the first rows stay close to the f32 reference.
  const auto c = reference().at("cases")[0];
  const std::vector<float> expected = testing::read_f32_file(
      testing::test_model_path("reference/" + c.at("logits_file").get<std::string>()));
  const testing::GreedyRun run =
      et::greedy(program, c.at("prompt_tokens").get<std::vector<int32_t>>(), 4);
  const float diff = testing::max_abs_diff(std::span<const float>(run.logits).first(512),
                                           std::span<const float>(expected).first(512));
  EXPECT_GT(diff, 0.0f);
  EXPECT_LT(diff, 0.25f);
  EXPECT_EQ(run.tokens[0], c.at("generated_tokens")[0].get<int32_t>());
}

TEST(ExportGgufTest, TokenizerOverrideMustMatchTheVocabulary) {
  const std::string dir = et::fresh_dir("gguf_tokenizer");
  ExportOptions options = stories_options(dir + "/same.gguf");
  options.tokenizer_path = testing::test_model_path("stories260K.gguf");
  et::export_ok(options);
  EXPECT_THAT(et::load_ok(dir + "/same.gguf").spec().source, HasSubstr("tokenizer from"));

  options.output = dir + "/other.gguf";
  options.tokenizer_path = testing::test_model_path("llama-2-tiny-random.gguf");
  StatusOr<ExportReport> report = export_program(options);
  ASSERT_FALSE(report.ok());
  EXPECT_THAT(report.status().message(), HasSubstr("the tokenizer has 32000 tokens"));
  EXPECT_THAT(report.status().message(), HasSubstr("--tokenizer"));
  EXPECT_TRUE(et::nothing_left(options.output));
}

}  // namespace
}  // namespace cellm
