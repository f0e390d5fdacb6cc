#include "model/model_config.h"

#include <gtest/gtest.h>

#include <functional>

#include "gguf/gguf_writer.h"
#include "model/model_weights.h"
#include "test_models.h"

namespace cellm {
namespace {

ModelConfig load_config(const std::string& relative) {
  StatusOr<GgufFile> file = GgufFile::open(testing::test_model_path(relative));
  EXPECT_TRUE(file.ok()) << file.status().to_string();
  if (!file.ok()) return {};
  StatusOr<ModelConfig> config = ModelConfig::from_gguf(*file);
  EXPECT_TRUE(config.ok()) << config.status().to_string();
  return config.ok() ? *config : ModelConfig{};
}

TEST(ModelConfigTest, RopeStyleFollowsEachArchitecturesGgufConvention) {
  // llama.cpp's LLM_ARCH table: LLAMA-style adjacent pairs for llama and mistral, NEOX halves for
  // the rest.
  EXPECT_EQ(rope_style_of(Architecture::kLlama), RopeStyle::kNormal);
  EXPECT_EQ(rope_style_of(Architecture::kMistral), RopeStyle::kNormal);
  for (Architecture a : {Architecture::kQwen2, Architecture::kQwen3, Architecture::kPhi3,
                         Architecture::kGemma2, Architecture::kGemma3}) {
    EXPECT_EQ(rope_style_of(a), RopeStyle::kNeox) << architecture_name(a);
  }
}

// Expected values below come from ../shared/models/PROVENANCE.md and arch/README.md.
TEST(ModelConfigTest, Stories260KUsesTheDefaultRopeBaseAndGroupedHeads) {
  ModelConfig c = load_config("stories260K.gguf");
  EXPECT_EQ(c.architecture, Architecture::kLlama);
  EXPECT_EQ(c.num_layers, 5);
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.ffn_size, 172);
  EXPECT_EQ(c.num_heads, 8);
  EXPECT_EQ(c.num_kv_heads, 4);
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_EQ(c.rope.num_rotary_dims, 8);
  EXPECT_EQ(c.rope.freq_base, 10000.0f);  // key absent: the GGUF default
  EXPECT_EQ(c.rope.style, RopeStyle::kNormal);
  EXPECT_FLOAT_EQ(c.rms_norm_eps, 1e-5f);
  EXPECT_EQ(c.vocab_size, 512);
  EXPECT_FALSE(c.tied_embeddings);
  EXPECT_FALSE(c.has_qkv_bias);
}

TEST(ModelConfigTest, TinyLlama3HasRopeFactorsAndTiedEmbeddings) {
  ModelConfig c = load_config("arch/tiny-llama3.gguf");
  EXPECT_EQ(c.num_layers, 2);
  EXPECT_EQ(c.num_heads, 4);
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.ffn_size, 128);
  EXPECT_EQ(c.rope.freq_base, 500000.0f);
  EXPECT_TRUE(c.rope.has_freq_factors);
  EXPECT_TRUE(c.tied_embeddings);
}

TEST(ModelConfigTest, TinyQwen2UsesNeoxRopeBiasesAndDefaultsRotaryDimsToTheHeadSize) {
  ModelConfig c = load_config("arch/tiny-qwen2.gguf");
  EXPECT_EQ(c.architecture, Architecture::kQwen2);
  EXPECT_EQ(c.rope.style, RopeStyle::kNeox);
  EXPECT_EQ(c.head_dim, 16);  // no key_length: hidden / heads
  EXPECT_EQ(c.rope.num_rotary_dims, 16);
  EXPECT_EQ(c.vocab_size, 512);  // no vocab_size key: the token count
  EXPECT_FLOAT_EQ(c.rms_norm_eps, 1e-6f);
  EXPECT_EQ(c.rope.freq_base, 1000000.0f);
  EXPECT_TRUE(c.has_qkv_bias);
  EXPECT_FALSE(c.tied_embeddings);
}

TEST(ModelConfigTest, TinyQwen3TakesTheHeadSizeFromKeyLength) {
  ModelConfig c = load_config("arch/tiny-qwen3.gguf");
  EXPECT_EQ(c.architecture, Architecture::kQwen3);
  EXPECT_EQ(c.head_dim, 32);  // 4 heads x 32 != hidden 64
  EXPECT_EQ(c.q_width(), 128);
  EXPECT_TRUE(c.has_qk_norm);
  EXPECT_TRUE(c.tied_embeddings);
}

TEST(ModelConfigTest, TinyMistralHasOneKvHead) {
  ModelConfig c = load_config("arch/tiny-mistral.gguf");
  EXPECT_EQ(c.num_kv_heads, 1);
  EXPECT_EQ(c.ffn_size, 96);
  EXPECT_EQ(c.rope.style, RopeStyle::kNormal);
}

TEST(ModelConfigTest, UnknownArchitectureIsAnErrorNamingIt) {
  StatusOr<GgufFile> file = GgufFile::open(testing::test_model_path("vocab/ggml-vocab-gpt-2.gguf"));
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  StatusOr<ModelConfig> config = ModelConfig::from_gguf(*file);
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(config.status().message().find("'gpt2'"), std::string::npos)
      << config.status().message();
}

TEST(ModelWeightsTest, EveryTensorOfStories260KIsBoundWithItsShape) {
  StatusOr<GgufFile> file = GgufFile::open(testing::test_model_path("stories260K.gguf"));
  ASSERT_TRUE(file.ok());
  StatusOr<ModelConfig> config = ModelConfig::from_gguf(*file);
  ASSERT_TRUE(config.ok());
  StatusOr<ModelWeights> weights = ModelWeights::from_gguf(*file, *config);
  ASSERT_TRUE(weights.ok()) << weights.status().to_string();
  EXPECT_EQ(weights->layers.size(), 5u);
  EXPECT_EQ(weights->layers[0].wk.num_rows, 32);  // attn_k 64x32
  EXPECT_EQ(weights->layers[0].w_down.num_cols, 172);
  EXPECT_EQ(weights->total_bytes(), 1171200u);  // PROVENANCE: tensor data totals 1,171,200 bytes
  EXPECT_EQ(weights->all().size(), 48u);        // 48 tensors
}

TEST(ModelWeightsTest, VocabularyOnlyFileIsMissingItsEmbeddingTensor) {
  StatusOr<GgufFile> file =
      GgufFile::open(testing::test_model_path("vocab/ggml-vocab-llama-spm.gguf"));
  ASSERT_TRUE(file.ok());
  StatusOr<ModelConfig> config = ModelConfig::from_gguf(*file);
  ASSERT_TRUE(config.ok()) << config.status().to_string();
  StatusOr<ModelWeights> weights = ModelWeights::from_gguf(*file, *config);
  ASSERT_FALSE(weights.ok());
  EXPECT_EQ(weights.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(weights.status().message(), "tensor 'token_embd.weight' is missing");
}

// Rewrites stories260K with one tensor changed by `edit` (return false to drop it), and loads the
// model's config and weights from the bytes.
struct EditedModel {
  std::vector<uint8_t> bytes;
  Status status;
};

EditedModel load_edited_stories(const std::function<bool(std::string& name, TensorType& type,
                                                         std::vector<uint64_t>& dims)>& edit) {
  EditedModel result;
  StatusOr<GgufFile> source = GgufFile::open(testing::test_model_path("stories260K.gguf"));
  EXPECT_TRUE(source.ok());
  if (!source.ok()) return result;
  GgufWriter writer;
  for (const auto& [key, value] : source->metadata())
    EXPECT_TRUE(writer.add_metadata(key, value).ok());
  std::vector<std::vector<uint8_t>> kept_bytes;
  for (const GgufTensorInfo& info : source->tensors()) {
    std::string name = info.name;
    TensorType type = info.type;
    std::vector<uint64_t> dims = info.dims;
    if (!edit(name, type, dims)) continue;
    StatusOr<uint64_t> row = row_size_bytes(type, dims[0]);
    EXPECT_TRUE(row.ok());
    uint64_t size = *row;
    for (size_t i = 1; i < dims.size(); ++i) size *= dims[i];
    std::span<const uint8_t> data = source->tensor_data(info);
    kept_bytes.emplace_back(data.begin(), data.begin() + std::min<uint64_t>(size, data.size()));
    kept_bytes.back().resize(size, 0x3c);
    EXPECT_TRUE(
        writer.add_tensor(name, type, dims, std::span<const uint8_t>(kept_bytes.back())).ok());
  }
  StatusOr<std::vector<uint8_t>> bytes = writer.write_bytes();
  EXPECT_TRUE(bytes.ok());
  result.bytes = std::move(*bytes);
  StatusOr<GgufFile> file = GgufFile::parse(result.bytes);
  EXPECT_TRUE(file.ok()) << file.status().to_string();
  if (!file.ok()) return result;
  StatusOr<ModelConfig> config = ModelConfig::from_gguf(*file);
  result.status = config.ok() ? ModelWeights::from_gguf(*file, *config).status() : config.status();
  return result;
}

TEST(ModelWeightsTest, MissingTensorIsAOneLineErrorNamingIt) {
  EditedModel model = load_edited_stories(
      [](std::string& name, TensorType&, auto&) { return name != "blk.3.ffn_down.weight"; });
  EXPECT_EQ(model.status.code(), StatusCode::kNotFound);
  EXPECT_EQ(model.status.message(), "tensor 'blk.3.ffn_down.weight' is missing");
}

TEST(ModelWeightsTest, MisShapedTensorIsAnErrorNamingItsShapeAndTheExpectedOne) {
  EditedModel model = load_edited_stories([](std::string& name, TensorType&, auto& dims) {
    if (name == "blk.1.attn_k.weight") dims = {64, 64};
    return true;
  });
  EXPECT_EQ(model.status.code(), StatusCode::kDataLoss);
  EXPECT_EQ(model.status.message(), "tensor 'blk.1.attn_k.weight' has shape 64x64, expected 64x32");
}

TEST(ModelWeightsTest, UnsupportedTensorTypeIsAnErrorNamingTheTensorAndType) {
  EditedModel model = load_edited_stories([](std::string& name, TensorType& type, auto& dims) {
    if (name == "token_embd.weight") {
      type = TensorType::kIQ4_NL;  // 32-element blocks: 64 columns are two blocks
      dims = {64, 512};
    }
    return true;
  });
  EXPECT_EQ(model.status.code(), StatusCode::kUnimplemented);
  EXPECT_EQ(model.status.message(),
            "tensor 'token_embd.weight' has type iq4_nl, which cellm cannot compute with");
}

TEST(ModelWeightsTest, LongRopeFactorsOnAModelOtherThanPhi3AreRefused) {
  EditedModel model = load_edited_stories([](std::string& name, TensorType&, auto&) {
    if (name == "output_norm.weight") name = "rope_factors_short.weight";
    return true;
  });
  EXPECT_EQ(model.status.code(), StatusCode::kUnimplemented);
  EXPECT_EQ(model.status.message(),
            "tensor 'rope_factors_short.weight': LongRoPE factors are supported on phi3 models "
            "only");
}

TEST(ModelWeightsTest, AFusedTensorOfAnotherArchitectureIsRefusedNotIgnored) {
  // A llama model reads attn_q / attn_k / attn_v; an attn_qkv beside them would be left out.
  EditedModel model = load_edited_stories([](std::string& name, TensorType&, auto&) {
    if (name == "blk.2.attn_q.weight") name = "blk.2.attn_qkv.weight";
    return true;
  });
  EXPECT_EQ(model.status.code(), StatusCode::kUnimplemented);
  EXPECT_EQ(model.status.message(), "tensor 'blk.2.attn_qkv.weight' is not part of a llama model");
}

}  // namespace
}  // namespace cellm
