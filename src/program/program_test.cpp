// Program::load on stories260K (a plain GGUF model: defaults) and on in-memory copies of it with
// `cellm.*` keys added, removed or made inconsistent.
#include "program/program.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gguf/gguf_writer.h"
#include "test_models.h"
#include "tokenizer/tokenizer.h"

namespace cellm {
namespace {

using ::testing::HasSubstr;

// A copy of `source` in memory with `extra` keys appended and every key named in `drop` left out.
std::vector<uint8_t> copy_with(const GgufFile& source,
                               const std::vector<std::pair<std::string, GgufValue>>& extra,
                               const std::vector<std::string>& drop = {}) {
  GgufWriter writer;
  for (const auto& [key, value] : source.metadata()) {
    if (std::find(drop.begin(), drop.end(), key) != drop.end()) continue;
    EXPECT_TRUE(writer.add_metadata(key, value).ok());
  }
  for (const auto& [key, value] : extra) {
    if (std::find(drop.begin(), drop.end(), key) != drop.end()) continue;
    EXPECT_TRUE(writer.add_metadata(key, value).ok()) << key;
  }
  for (const GgufTensorInfo& info : source.tensors()) {
    EXPECT_TRUE(writer.add_tensor(info.name, info.type, info.dims, source.tensor_data(info)).ok());
  }
  StatusOr<std::vector<uint8_t>> bytes = writer.write_bytes();
  EXPECT_TRUE(bytes.ok()) << bytes.status().to_string();
  return bytes.ok() ? *bytes : std::vector<uint8_t>{};
}

std::vector<std::pair<std::string, GgufValue>> spec_keys(int32_t w, int32_t m,
                                                         int32_t context = 1024) {
  ProgramSpec spec;
  spec.max_context_len = context;
  spec.max_step_tokens = w;
  spec.min_prefill_chunk = m;
  spec.kv_heads.assign(5, 4);  // stories260K: 8 heads, 4 kv heads of 8
  spec.kv_head_dims.assign(5, 8);
  spec.kv_windows.assign(5, 0);
  spec.vocab_size = 512;
  spec.source = "test";
  return spec.to_metadata();
}

TEST(ProgramTest, PlainGgufModelLoadsWithDefaultsAndItsTokenizer) {
  StatusOr<Program> program = Program::load(testing::test_model_path("stories260K.gguf"));
  ASSERT_TRUE(program.ok()) << program.status().to_string();
  EXPECT_TRUE(program->uses_default_spec());
  EXPECT_EQ(program->config().num_layers, 5);
  EXPECT_EQ(program->config().vocab_size, 512);
  EXPECT_EQ(program->spec().max_step_tokens, 512);
  EXPECT_EQ(program->spec().min_prefill_chunk, 5);
  EXPECT_EQ(program->spec().kv_max_cells, 65536);
  EXPECT_EQ(program->spec().decode_widths, std::vector<int32_t>{1});
  EXPECT_EQ(program->tokenizer().vocab_size(), 512);
  EXPECT_EQ(program->tokenizer().bos_id(), 1);
  EXPECT_EQ(program->weights().layers.size(), 5u);
}

TEST(ProgramTest, WeightViewsSurviveAMove) {
  StatusOr<Program> loaded = Program::load(testing::test_model_path("stories260K.gguf"));
  ASSERT_TRUE(loaded.ok());
  const uint8_t* before = loaded->weights().token_embd.bytes.data();
  Program moved = std::move(loaded).value();
  EXPECT_EQ(moved.weights().token_embd.bytes.data(), before);
  const GgufTensorInfo* embd = moved.file().find_tensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  EXPECT_EQ(moved.file().tensor_data(*embd).data(), before);
}

TEST(ProgramTest, ExportedKeysAreReadAndValidated) {
  StatusOr<GgufFile> source = GgufFile::open(testing::test_model_path("stories260K.gguf"));
  ASSERT_TRUE(source.ok());
  const std::vector<uint8_t> bytes = copy_with(*source, spec_keys(64, 4));
  StatusOr<GgufFile> file = GgufFile::parse(bytes);
  ASSERT_TRUE(file.ok());
  StatusOr<Program> program = Program::from_file(std::move(file).value());
  ASSERT_TRUE(program.ok()) << program.status().to_string();
  EXPECT_FALSE(program->uses_default_spec());
  EXPECT_EQ(program->spec().max_step_tokens, 64);
  EXPECT_EQ(program->spec().min_prefill_chunk, 4);
  EXPECT_EQ(program->spec().source, "test");
}

TEST(ProgramTest, EachMissingKeyIsAnErrorNamingIt) {
  StatusOr<GgufFile> source = GgufFile::open(testing::test_model_path("stories260K.gguf"));
  ASSERT_TRUE(source.ok());
  for (const auto& [key, value] : spec_keys(64, 4)) {
    const std::vector<uint8_t> bytes = copy_with(*source, spec_keys(64, 4), {key});
    StatusOr<GgufFile> file = GgufFile::parse(bytes);
    ASSERT_TRUE(file.ok());
    StatusOr<Program> program = Program::from_file(std::move(file).value());
    ASSERT_FALSE(program.ok()) << key;
    EXPECT_THAT(program.status().message(), HasSubstr("'" + key + "'"));
  }
}

TEST(ProgramTest, InconsistentLimitsAreErrorsNamingTheKey) {
  StatusOr<GgufFile> source = GgufFile::open(testing::test_model_path("stories260K.gguf"));
  ASSERT_TRUE(source.ok());
  struct Case {
    int32_t w, m, context;
    std::string expected;
  };
  for (const Case& c :
       {Case{4, 8, 1024, "cellm.min_prefill_chunk"}, Case{64, 4, 64, "cellm.max_context_len"}}) {
    const std::vector<uint8_t> bytes = copy_with(*source, spec_keys(c.w, c.m, c.context));
    StatusOr<GgufFile> file = GgufFile::parse(bytes);
    ASSERT_TRUE(file.ok());
    StatusOr<Program> program = Program::from_file(std::move(file).value());
    ASSERT_FALSE(program.ok());
    EXPECT_THAT(program.status().message(), HasSubstr(c.expected));
    EXPECT_THAT(program.status().message(), HasSubstr("GGUF bytes"));
  }
}

TEST(ProgramSpecTest, TheRecommendedPlanStaysBelowW) {
  EXPECT_EQ(recommended_decode_widths(512),
            (std::vector<int32_t>{1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256}));
  EXPECT_EQ(recommended_decode_widths(257),
            (std::vector<int32_t>{1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256}));
  EXPECT_EQ(recommended_decode_widths(256),
            (std::vector<int32_t>{1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192}));
  EXPECT_EQ(recommended_decode_widths(5), (std::vector<int32_t>{1, 2, 4}));
  EXPECT_EQ(recommended_decode_widths(1), (std::vector<int32_t>{1}));
}

TEST(ProgramSpecTest, AutomaticMinPrefillChunkIsOnePastTheWidestAtLeastFiveAtMostW) {
  const std::vector<int32_t> recommended(kRecommendedDecodeWidths.begin(),
                                         kRecommendedDecodeWidths.end());
  EXPECT_EQ(auto_min_prefill_chunk(recommended, 512), 257);
  EXPECT_EQ(auto_min_prefill_chunk(std::vector<int32_t>{1}, 512), 5) << "the seed contract";
  EXPECT_EQ(auto_min_prefill_chunk(std::vector<int32_t>{1, 2, 4}, 512), 5);
  EXPECT_EQ(auto_min_prefill_chunk(std::vector<int32_t>{1, 2, 4, 8, 16}, 512), 17);
  EXPECT_EQ(auto_min_prefill_chunk(std::vector<int32_t>{1, 2, 4, 8, 16}, 16), 16) << "at most W";
  EXPECT_EQ(auto_min_prefill_chunk(std::vector<int32_t>{1, 2}, 4), 4);
}

TEST(ProgramTest, MissingTokenizerIsAnErrorNamingTheKey) {
  StatusOr<GgufFile> source = GgufFile::open(testing::test_model_path("stories260K.gguf"));
  ASSERT_TRUE(source.ok());
  const std::vector<uint8_t> bytes = copy_with(*source, {}, {"tokenizer.ggml.tokens"});
  StatusOr<GgufFile> file = GgufFile::parse(bytes);
  ASSERT_TRUE(file.ok());
  StatusOr<Program> program = Program::from_file(std::move(file).value());
  ASSERT_FALSE(program.ok());
  EXPECT_THAT(program.status().message(), HasSubstr("tokenizer.ggml.tokens"));
}

}  // namespace
}  // namespace cellm
