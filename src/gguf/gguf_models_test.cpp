// Every shipped GGUF in ../shared/models loads, and matches facts written down in PROVENANCE.md,
// GGUF_INFO.txt and arch/README.md (the expected values below are copied from those documents).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "gguf/gguf_file.h"
#include "gguf/gguf_test_support.h"
#include "test_models.h"

namespace cellm {
namespace {

GgufFile open_model(const std::string& relative) {
  StatusOr<GgufFile> file = GgufFile::open(testing::test_model_path(relative));
  CELLM_CHECK(file.ok()) << file.status().to_string();
  return std::move(file).value();
}

void expect_tensor(const GgufFile& file, const std::string& name, TensorType type,
                   const std::string& shape, uint64_t size_bytes, uint64_t offset_bytes) {
  const GgufTensorInfo* info = file.find_tensor(name);
  ASSERT_NE(info, nullptr) << name;
  EXPECT_EQ(info->type, type) << name;
  EXPECT_EQ(info->shape_string(), shape) << name;
  EXPECT_EQ(info->size_bytes, size_bytes) << name;
  EXPECT_EQ(info->offset_bytes, offset_bytes) << name;
}

TEST(GgufModelsTest, Stories260KMatchesItsProvenance) {
  const GgufFile file = open_model("stories260K.gguf");
  EXPECT_EQ(file.version(), 3u);
  EXPECT_EQ(file.metadata().size(), 19u);
  EXPECT_EQ(file.tensors().size(), 48u);
  EXPECT_EQ(file.alignment(), 32u);
  EXPECT_EQ(file.data_offset_bytes(), 14176u);
  EXPECT_EQ(*file.get_string("general.architecture"), "llama");
  EXPECT_EQ(*file.get_string("general.name"), "llama");
  EXPECT_EQ(*file.get_u32("llama.context_length"), 2048u);
  EXPECT_EQ(*file.get_u32("llama.embedding_length"), 64u);
  EXPECT_EQ(*file.get_u32("llama.block_count"), 5u);
  EXPECT_EQ(*file.get_u32("llama.feed_forward_length"), 172u);
  EXPECT_EQ(*file.get_u32("llama.attention.head_count"), 8u);
  EXPECT_EQ(*file.get_u32("llama.attention.head_count_kv"), 4u);
  EXPECT_EQ(*file.get_u32("llama.rope.dimension_count"), 8u);
  EXPECT_FLOAT_EQ(*file.get_f32("llama.attention.layer_norm_rms_epsilon"), 1e-5f);
  EXPECT_FALSE(file.has("llama.rope.freq_base"));
  EXPECT_FALSE(file.has("tokenizer.ggml.pre"));
  EXPECT_EQ(*file.get_string("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(*file.get_u32("tokenizer.ggml.bos_token_id"), 1u);
  EXPECT_EQ(*file.get_u32("tokenizer.ggml.eos_token_id"), 2u);
  EXPECT_EQ(*file.get_u32("tokenizer.ggml.unknown_token_id"), 0u);
  // "-1 / none" stored as 4294967295: it fits u32 and not i32.
  EXPECT_EQ(*file.get_u32("tokenizer.ggml.padding_token_id"), 4294967295u);
  EXPECT_FALSE(file.get_i32("tokenizer.ggml.padding_token_id").ok());

  const std::vector<std::string> tokens = *file.get_string_array("tokenizer.ggml.tokens");
  ASSERT_EQ(tokens.size(), 512u);
  EXPECT_EQ(tokens[0], "<unk>");
  EXPECT_EQ(tokens[1], "<s>");
  EXPECT_EQ(tokens[2], "</s>");
  EXPECT_EQ(tokens[3], "<0x00>");
  EXPECT_EQ(tokens[258], "<0xFF>");
  EXPECT_EQ(file.get_f32_array("tokenizer.ggml.scores")->size(), 512u);
  const std::vector<int32_t> types = *file.get_i32_array("tokenizer.ggml.token_type");
  ASSERT_EQ(types.size(), 512u);
  EXPECT_EQ(types[3], 6);  // byte tokens are type 6
  EXPECT_EQ(types[258], 6);

  expect_tensor(file, "token_embd.weight", TensorType::kF32, "64x512", 131072, 0);
  expect_tensor(file, "output_norm.weight", TensorType::kF32, "64", 256, 131072);
  expect_tensor(file, "output.weight", TensorType::kF32, "64x512", 131072, 131328);
  expect_tensor(file, "blk.0.attn_k.weight", TensorType::kF32, "64x32", 8192, 278784);
  expect_tensor(file, "blk.0.ffn_down.weight", TensorType::kF32, "172x64", 44032, 355840);
  expect_tensor(file, "blk.4.ffn_norm.weight", TensorType::kF32, "64", 256, 1170944);
  uint64_t total_bytes = 0;
  for (const GgufTensorInfo& info : file.tensors()) total_bytes += info.size_bytes;
  EXPECT_EQ(total_bytes, 1171200u);
  // The last tensor ends exactly at the end of the file (1,185,376 bytes).
  const GgufTensorInfo& last = *file.find_tensor("blk.4.ffn_norm.weight");
  EXPECT_EQ(file.data_offset_bytes() + last.offset_bytes + last.size_bytes, 1185376u);
  EXPECT_EQ(file.tensor_data(last).size(), 256u);
}

TEST(GgufModelsTest, LlamaTwoTinyRandomMatchesItsProvenance) {
  const GgufFile file = open_model("llama-2-tiny-random.gguf");
  EXPECT_EQ(file.version(), 3u);
  EXPECT_EQ(file.metadata().size(), 18u);
  EXPECT_EQ(file.tensors().size(), 12u);
  EXPECT_EQ(file.data_offset_bytes(), 724416u);
  EXPECT_EQ(*file.get_string("general.name"), "LLaMA v2");
  EXPECT_EQ(*file.get_u32("general.file_type"), 1u);
  EXPECT_EQ(*file.get_u32("llama.context_length"), 4096u);
  EXPECT_EQ(*file.get_u32("llama.embedding_length"), 8u);
  EXPECT_EQ(*file.get_u32("llama.block_count"), 1u);
  EXPECT_EQ(*file.get_u32("llama.feed_forward_length"), 32u);
  EXPECT_EQ(*file.get_u32("llama.attention.head_count"), 2u);
  EXPECT_EQ(*file.get_u32("llama.rope.dimension_count"), 4u);
  EXPECT_EQ(file.get_string_array("tokenizer.ggml.tokens")->size(), 32000u);
  EXPECT_EQ(file.get_f32_array("tokenizer.ggml.scores")->size(), 32000u);
  EXPECT_EQ(file.get_i32_array("tokenizer.ggml.token_type")->size(), 32000u);
  expect_tensor(file, "token_embd.weight", TensorType::kF16, "8x32000", 512000, 0);
  expect_tensor(file, "blk.0.ffn_down.weight", TensorType::kF16, "32x8", 512, 513536);
  expect_tensor(file, "blk.0.attn_norm.weight", TensorType::kF32, "8", 32, 514048);
  expect_tensor(file, "output.weight", TensorType::kF16, "8x32000", 512000, 514144);
  EXPECT_EQ(file.tensors().back().name, "output.weight");
}

TEST(GgufModelsTest, LlamaTwoTinyRandomSharesTheLlamaSpmVocabulary) {
  const GgufFile model = open_model("llama-2-tiny-random.gguf");
  const GgufFile vocab = open_model("vocab/ggml-vocab-llama-spm.gguf");
  for (const char* key :
       {"tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type"}) {
    ASSERT_NE(model.find(key), nullptr) << key;
    ASSERT_NE(vocab.find(key), nullptr) << key;
    EXPECT_TRUE(*model.find(key) == *vocab.find(key)) << key;
  }
}

struct ArchFacts {
  const char* file;
  const char* architecture;
  size_t num_tensors;  // 2 per layer's 9 + extras, from the README's naming rules
  bool has_output;     // untied models only
  const char* extra_tensor;
  const char* extra_shape;
};

class GgufArchModelsTest : public ::testing::TestWithParam<ArchFacts> {};

TEST_P(GgufArchModelsTest, LoadsWithTheReadmesShapesAndKeys) {
  const ArchFacts& facts = GetParam();
  const GgufFile file = open_model(facts.file);
  EXPECT_EQ(file.version(), 3u);
  EXPECT_EQ(file.alignment(), 32u);
  EXPECT_FALSE(file.has("general.alignment"));
  EXPECT_EQ(*file.get_string("general.architecture"), facts.architecture);
  EXPECT_EQ(*file.get_string("general.type"), "model");
  EXPECT_EQ(*file.get_u32("general.file_type"), 0u);
  EXPECT_EQ(*file.get_u32("general.quantization_version"), 2u);
  const std::string arch = facts.architecture;
  EXPECT_EQ(*file.get_u32(arch + ".block_count"), 2u);
  EXPECT_EQ(*file.get_u32(arch + ".context_length"), 2048u);
  EXPECT_EQ(*file.get_u32(arch + ".embedding_length"), 64u);
  EXPECT_EQ(*file.get_string("tokenizer.ggml.pre"), "default");
  EXPECT_EQ(file.get_string_array("tokenizer.ggml.tokens")->size(), 512u);
  EXPECT_EQ(file.tensors().size(), facts.num_tensors);
  for (const GgufTensorInfo& info : file.tensors()) EXPECT_EQ(info.type, TensorType::kF32);
  const GgufTensorInfo* embd = file.find_tensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  EXPECT_EQ(embd->shape_string(), "64x512");
  EXPECT_EQ(file.find_tensor("output.weight") != nullptr, facts.has_output);
  const GgufTensorInfo* extra = file.find_tensor(facts.extra_tensor);
  ASSERT_NE(extra, nullptr) << facts.extra_tensor;
  EXPECT_EQ(extra->shape_string(), facts.extra_shape);
}

INSTANTIATE_TEST_SUITE_P(
    Arch, GgufArchModelsTest,
    ::testing::Values(
        // llama3: tied, plus rope_freqs {8}: 2 + 1 + 2*9 tensors.
        ArchFacts{"arch/tiny-llama3.gguf", "llama", 21, false, "rope_freqs.weight", "8"},
        // qwen2: untied, q/k/v biases: 3 + 2*(9+3).
        ArchFacts{"arch/tiny-qwen2.gguf", "qwen2", 27, true, "blk.1.attn_q.bias", "64"},
        // qwen3: tied, q/k norms of head size 32: 2 + 2*(9+2); attn_q is 64x128.
        ArchFacts{"arch/tiny-qwen3.gguf", "qwen3", 24, false, "blk.0.attn_q_norm.weight", "32"},
        // mistral: untied: 3 + 2*9; one kv head of 16, so attn_k is 64x16.
        ArchFacts{"arch/tiny-mistral.gguf", "llama", 21, true, "blk.0.attn_k.weight", "64x16"}),
    [](const auto& info) {
      std::string name = info.param.file;
      name = name.substr(name.find('-') + 1);
      return name.substr(0, name.find('.'));
    });

TEST(GgufModelsTest, TinyQwen3HasTheReadmesProjectionShapes) {
  const GgufFile file = open_model("arch/tiny-qwen3.gguf");
  EXPECT_EQ(file.find_tensor("blk.0.attn_q.weight")->shape_string(), "64x128");
  EXPECT_EQ(file.find_tensor("blk.0.attn_output.weight")->shape_string(), "128x64");
  EXPECT_EQ(*file.get_u32("qwen3.attention.key_length"), 32u);
  EXPECT_FALSE(file.has("qwen3.rope.dimension_count"));
  EXPECT_FLOAT_EQ(*file.get_f32("qwen3.rope.freq_base"), 1000000.0f);
}

struct VocabFacts {
  const char* file;
  uint64_t size_bytes;
  size_t num_kv;
  const char* architecture;
  size_t vocab;
  size_t merges;  // 0: no merges key
};

class GgufVocabModelsTest : public ::testing::TestWithParam<VocabFacts> {};

TEST_P(GgufVocabModelsTest, VocabularyOnlyFileLoadsWithNoTensorsAndNoPadding) {
  const VocabFacts& facts = GetParam();
  const GgufFile file = open_model(std::string("vocab/") + facts.file);
  EXPECT_EQ(file.version(), 3u);
  EXPECT_TRUE(file.tensors().empty());
  EXPECT_EQ(file.metadata().size(), facts.num_kv);
  EXPECT_EQ(file.data_offset_bytes(), facts.size_bytes);  // ends right after the metadata
  EXPECT_EQ(*file.get_string("general.architecture"), facts.architecture);
  EXPECT_EQ(file.get_string_array("tokenizer.ggml.tokens")->size(), facts.vocab);
  if (facts.merges > 0) {
    EXPECT_EQ(file.get_string_array("tokenizer.ggml.merges")->size(), facts.merges);
  } else {
    EXPECT_FALSE(file.has("tokenizer.ggml.merges"));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Vocab, GgufVocabModelsTest,
    ::testing::Values(
        VocabFacts{"ggml-vocab-baichuan.gguf", 1340998, 18, "baichuan", 64000, 0},
        VocabFacts{"ggml-vocab-bert-bge.gguf", 627549, 20, "bert", 30522, 0},
        VocabFacts{"ggml-vocab-deepseek-coder.gguf", 1156067, 25, "llama", 32256, 31757},
        VocabFacts{"ggml-vocab-deepseek-llm.gguf", 3970167, 23, "llama", 102400, 99757},
        VocabFacts{"ggml-vocab-falcon.gguf", 2287728, 18, "falcon", 65024, 64784},
        VocabFacts{"ggml-vocab-gpt-2.gguf", 1766807, 16, "gpt2", 50257, 50000},
        VocabFacts{"ggml-vocab-gpt-neox.gguf", 1771431, 17, "gptneox", 50432, 50009},
        VocabFacts{"ggml-vocab-llama-spm.gguf", 723869, 22, "llama", 32000, 0},
        VocabFacts{"ggml-vocab-mpt.gguf", 1771393, 17, "mpt", 50432, 50009},
        VocabFacts{"ggml-vocab-phi-3.gguf", 726019, 26, "phi3", 32064, 0},
        VocabFacts{"ggml-vocab-refact.gguf", 1720710, 18, "refact", 49216, 48891},
        VocabFacts{"ggml-vocab-starcoder.gguf", 1719346, 19, "starcoder2", 49152, 48872}),
    [](const auto& info) {
      std::string name = std::string(info.param.file).substr(std::string("ggml-vocab-").size());
      name = name.substr(0, name.find('.'));
      for (char& c : name) c = c == '-' ? '_' : c;
      return name;
    });

TEST(GgufModelsTest, PhiThreeExtendsTheLlamaSpmTokens) {
  const std::vector<std::string> llama =
      *open_model("vocab/ggml-vocab-llama-spm.gguf").get_string_array("tokenizer.ggml.tokens");
  const std::vector<std::string> phi =
      *open_model("vocab/ggml-vocab-phi-3.gguf").get_string_array("tokenizer.ggml.tokens");
  ASSERT_EQ(phi.size(), llama.size() + 64);
  EXPECT_TRUE(std::equal(llama.begin(), llama.end(), phi.begin()));
  EXPECT_EQ(phi[32000], "<|endoftext|>");
}

TEST(GgufModelsTest, EveryShippedModelPassesTheIndependentChecks) {
  for (const char* relative :
       {"stories260K.gguf", "llama-2-tiny-random.gguf", "arch/tiny-llama3.gguf",
        "arch/tiny-qwen2.gguf", "arch/tiny-qwen3.gguf", "arch/tiny-mistral.gguf",
        "vocab/ggml-vocab-gpt-2.gguf"}) {
    StatusOr<FileMapping> mapping = FileMapping::open(testing::test_model_path(relative));
    ASSERT_TRUE(mapping.ok());
    StatusOr<GgufFile> file = GgufFile::parse(mapping->bytes());
    ASSERT_TRUE(file.ok()) << relative << ": " << file.status().to_string();
    EXPECT_EQ(gguf_testing::check_parsed_file(*file, mapping->bytes()), "") << relative;
  }
}

}  // namespace
}  // namespace cellm
