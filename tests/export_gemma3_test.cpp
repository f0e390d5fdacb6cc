// gemma3 end to end on the CPU executor: tiny-gemma3's Hugging Face checkpoint (tests/support/
// tiny_gemma.h: scaled embeddings, GeGLU, post norms, 1 + w norms, a windowed layer and a global
// one with their own ropes, query_pre_attn_scalar) exported to a program whose greedy tokens equal
// HF transformers' float64 run and whose logits are within 1e-4 of it — from the config as
// published checkpoints write it and as transformers 5 writes it back, and again from the
// program's own GGUF; the program's tensors and keys in llama.cpp's gemma3 layout, a file without
// cellm's extra keys read with llama.cpp's defaults; bad configs refused by name.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>

#include "export_test_support.h"
#include "gguf/gguf_writer.h"
#include "model/safetensors_file.h"
#include "program/program_test_support.h"
#include "tiny_gemma.h"

namespace cellm {
namespace {

constexpr float kTolerance = 1e-4f;

class ExportGemma3Test : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    hf_dir_ = new std::string(et::fresh_dir("gemma3") + "/tiny-gemma3-hf");
    testing::write_tiny_gemma3_checkpoint(*hf_dir_);
  }
  static void TearDownTestSuite() {
    delete hf_dir_;
    hf_dir_ = nullptr;
  }

  // Greedy runs of every reference case on `program` (the first `num_steps` of each when > 0).
  static void expect_reference(const Program& program, const std::string& what,
                               int32_t num_steps = 0) {
    et::expect_reference_cases(program, testing::tiny_gemma3_reference().at("cases"), kTolerance,
                               "tiny-gemma3 " + what, num_steps);
  }

  static std::string* hf_dir_;
};

std::string* ExportGemma3Test::hf_dir_ = nullptr;

TEST_F(ExportGemma3Test, TheExportedProgramMatchesTransformers) {
  const std::string output = et::fresh_dir("gemma3_program") + "/program.gguf";
  ASSERT_NO_FATAL_FAILURE(testing::export_tiny_gemma3(*hf_dir_, output));
  const Program program = et::load_ok(output);
  const ModelConfig& c = program.config();
  EXPECT_EQ(c.architecture, Architecture::kGemma3);
  EXPECT_EQ(c.rope.style, RopeStyle::kNeox);
  EXPECT_EQ(c.head_dim, 32);
  EXPECT_EQ(c.layer_windows, (std::vector<int32_t>{5, 0}));
  EXPECT_EQ(c.rope.freq_base, 1e6f);
  EXPECT_EQ(c.rope.freq_scale, 0.125f);
  ASSERT_TRUE(c.sliding_rope.has_value());
  EXPECT_EQ(c.sliding_rope->freq_base, 10000.0f);
  EXPECT_EQ(c.sliding_rope->freq_scale, 1.0f);
  EXPECT_EQ(&c.layer_rope(0), &*c.sliding_rope);
  EXPECT_EQ(&c.layer_rope(1), &c.rope);
  EXPECT_FLOAT_EQ(c.query_scale(), 1.0f / std::sqrt(24.0f));
  EXPECT_EQ(c.embedding_scale, 8.0f);
  EXPECT_EQ(c.ffn_activation, FfnActivation::kGeluTanh);
  EXPECT_TRUE(c.has_post_norms);
  EXPECT_TRUE(c.has_qk_norm);
  EXPECT_TRUE(c.tied_embeddings);
  expect_reference(program, "exported");
}

TEST_F(ExportGemma3Test, TransformersFiveConfigGivesTheSameProgram) {
  // layer_types instead of the pattern, rope_parameters per layer type.
  const std::string dir = et::fresh_dir("gemma3_v5") + "/hf";
  const nlohmann::json& config = testing::tiny_gemma3_reference().at("config_v5");
  ASSERT_TRUE(config.contains("layer_types"));
  ASSERT_TRUE(config.at("rope_parameters").contains("sliding_attention"));
  nlohmann::json without_pattern = config;
  without_pattern.erase("sliding_window_pattern");
  without_pattern.erase("_sliding_window_pattern");
  ASSERT_NO_FATAL_FAILURE(testing::write_tiny_gemma3_checkpoint(dir, &without_pattern));
  const std::string output = dir + "/program.gguf";
  ASSERT_NO_FATAL_FAILURE(testing::export_tiny_gemma3(dir, output));
  const Program program = et::load_ok(output);
  EXPECT_EQ(program.config().layer_windows, (std::vector<int32_t>{5, 0}));
  ASSERT_TRUE(program.config().sliding_rope.has_value());
  EXPECT_EQ(program.config().sliding_rope->freq_base, 10000.0f);
  EXPECT_EQ(program.config().rope.freq_scale, 0.125f);
  expect_reference(program, "transformers 5 config", 8);
}

// Gemma 3 4B / 12B / 27B are Gemma3ForConditionalGeneration checkpoints: the text model's config
// in `text_config` (the token ids at the top level), its weights under language_model.model. (as
// published) or model.language_model. (as transformers >= 4.52 saves them), beside a vision
// tower. The text model exports alone, and is tiny-gemma3 again.
TEST_F(ExportGemma3Test, AMultimodalCheckpointExportsItsTextModel) {
  nlohmann::json text = testing::tiny_gemma3_reference().at("config");
  text.erase("architectures");
  text.erase("bos_token_id");
  text.erase("eos_token_id");
  const nlohmann::json config = {
      {"architectures", {"Gemma3ForConditionalGeneration"}},
      {"model_type", "gemma3"},
      {"text_config", text},
      {"vision_config", {{"model_type", "siglip_vision_model"}, {"hidden_size", 16}}},
      {"bos_token_id", 1},
      {"eos_token_id", {2, 5}},
      {"image_token_index", 500}};
  const std::string plain = et::fresh_dir("gemma3_text_only") + "/program.gguf";
  ASSERT_NO_FATAL_FAILURE(testing::export_tiny_gemma3(*hf_dir_, plain));
  const auto tensor_names = [](const GgufFile& file) {
    std::vector<std::string> names;
    for (const GgufTensorInfo& info : file.tensors()) names.push_back(info.name);
    return names;
  };
  const std::vector<std::string> text_tensors = tensor_names(et::load_ok(plain).file());
  for (const std::string prefix : {"language_model.model.", "model.language_model."}) {
    SCOPED_TRACE(prefix);
    const std::string dir = et::fresh_dir("gemma3_multimodal") + "/hf";
    ASSERT_NO_FATAL_FAILURE(testing::write_tiny_gemma3_checkpoint(dir, &config, prefix, true));
    const std::string output = dir + "/program.gguf";
    ASSERT_NO_FATAL_FAILURE(testing::export_tiny_gemma3(dir, output));
    const Program program = et::load_ok(output);
    EXPECT_EQ(program.config().architecture, Architecture::kGemma3);
    EXPECT_EQ(program.config().layer_windows, (std::vector<int32_t>{5, 0}));
    EXPECT_EQ(tensor_names(program.file()), text_tensors);  // the vision tower left out
    expect_reference(program, "text of a multimodal checkpoint (" + prefix + ")", 8);
  }

  // Without its text_config, or with a vision tensor in a text-only checkpoint: refused by name.
  const std::string dir = et::fresh_dir("gemma3_multimodal_bad") + "/hf";
  nlohmann::json no_text = config;
  no_text.erase("text_config");
  ASSERT_NO_FATAL_FAILURE(testing::write_tiny_gemma3_checkpoint(dir, &no_text, "model.", true));
  ExportOptions options;
  options.source = ExportSource::kCheckpoint;
  options.input = dir;
  options.output = dir + "/program.gguf";
  options.tokenizer_path = testing::test_model_path("stories260K.gguf");
  StatusOr<ExportReport> report = export_program(options);
  ASSERT_FALSE(report.ok());
  EXPECT_NE(report.status().message().find("text_config"), std::string::npos)
      << report.status().to_string();
  ASSERT_NO_FATAL_FAILURE(testing::write_tiny_gemma3_checkpoint(dir, nullptr, "model.", true));
  report = export_program(options);
  ASSERT_FALSE(report.ok());
  EXPECT_NE(report.status().message().find("is not part of a gemma3_text model"), std::string::npos)
      << report.status().to_string();
}

TEST_F(ExportGemma3Test, AProgramExportedAgainFromItsGgufMatchesTransformers) {
  const std::string first = et::fresh_dir("gemma3_first") + "/program.gguf";
  ASSERT_NO_FATAL_FAILURE(testing::export_tiny_gemma3(*hf_dir_, first));
  expect_reference(et::load_ok(et::export_again_from_gguf(first, "gemma3_again")), "re-exported");
}

TEST_F(ExportGemma3Test, TheProgramHoldsLlamaCppsGemma3TensorsAndKeys) {
  const std::string output = et::fresh_dir("gemma3_layout") + "/program.gguf";
  ASSERT_NO_FATAL_FAILURE(testing::export_tiny_gemma3(*hf_dir_, output));
  const Program program = et::load_ok(output);
  const GgufFile& file = program.file();
  for (int layer = 0; layer < 2; ++layer) {
    const std::string p = "blk." + std::to_string(layer) + ".";
    for (const char* name : {"attn_norm.weight", "post_attention_norm.weight", "ffn_norm.weight",
                             "post_ffw_norm.weight", "attn_q_norm.weight", "attn_k_norm.weight",
                             "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight"}) {
      EXPECT_NE(file.find_tensor(p + name), nullptr) << p << name;
    }
  }
  EXPECT_EQ(file.find_tensor("output.weight"), nullptr);  // tied
  // Norms are stored as 1 + w: output_norm is tiny-qwen3's final norm again, bit for bit (the
  // checkpoint holds it minus 1; both steps are exact for values near 1).
  StatusOr<SafetensorsFile> qwen3 =
      SafetensorsFile::open(testing::test_model_path("arch/tiny-qwen3-hf/model.safetensors"));
  ASSERT_TRUE(qwen3.ok());
  const SafetensorsTensor* norm = qwen3->find("model.norm.weight");
  ASSERT_NE(norm, nullptr);
  const GgufTensorInfo* output_norm = file.find_tensor("output_norm.weight");
  ASSERT_NE(output_norm, nullptr);
  ASSERT_EQ(file.tensor_data(*output_norm).size(), norm->data.size());
  EXPECT_EQ(
      std::memcmp(file.tensor_data(*output_norm).data(), norm->data.data(), norm->data.size()), 0);
  const auto u32 = [&](const std::string& key) {
    StatusOr<uint32_t> value = file.get_u32(key);
    EXPECT_TRUE(value.ok()) << key;
    return value.ok() ? *value : 0u;
  };
  const auto f32 = [&](const std::string& key) {
    StatusOr<float> value = file.get_f32(key);
    EXPECT_TRUE(value.ok()) << key;
    return value.ok() ? *value : 0.0f;
  };
  StatusOr<std::string> arch = file.get_string("general.architecture");
  ASSERT_TRUE(arch.ok());
  EXPECT_EQ(*arch, "gemma3");
  EXPECT_EQ(u32("gemma3.attention.sliding_window"), 5u);
  EXPECT_EQ(u32("gemma3.attention.sliding_window_pattern"), 2u);
  EXPECT_EQ(u32("gemma3.attention.key_length"), 32u);
  EXPECT_EQ(f32("gemma3.rope.freq_base"), 1e6f);
  EXPECT_EQ(f32("gemma3.rope.freq_base_swa"), 10000.0f);
  EXPECT_EQ(f32("gemma3.rope.scaling.factor"), 8.0f);
  EXPECT_FLOAT_EQ(f32("gemma3.attention.scale"), 1.0f / std::sqrt(24.0f));
}

// A gemma3 file as llama.cpp's converter writes it has none of cellm's extra keys: one global
// layer in six, windowed layers at base 10000, scores scaled by 1 / sqrt(head size).
TEST_F(ExportGemma3Test, AFileWithoutTheExtraKeysReadsWithLlamaCppsDefaults) {
  const std::string output = et::fresh_dir("gemma3_plain") + "/program.gguf";
  ASSERT_NO_FATAL_FAILURE(testing::export_tiny_gemma3(*hf_dir_, output));
  StatusOr<GgufFile> source = GgufFile::open(output);
  ASSERT_TRUE(source.ok());
  std::vector<uint8_t> bytes;
  ASSERT_NO_FATAL_FAILURE(et::rewrite_gguf(
      *source,
      [](const std::string& key) {
        return key == "gemma3.attention.sliding_window_pattern" ||
               key == "gemma3.attention.scale" || key == "gemma3.rope.freq_base_swa";
      },
      {}, &bytes));
  StatusOr<GgufFile> file = GgufFile::parse(bytes);
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  StatusOr<ModelConfig> config = ModelConfig::from_gguf(*file);
  ASSERT_TRUE(config.ok()) << config.status().to_string();
  EXPECT_EQ(config->layer_windows, (std::vector<int32_t>{5, 5}));  // layer 5 would be global
  EXPECT_EQ(config->sliding_rope->freq_base, 10000.0f);
  EXPECT_FLOAT_EQ(config->query_scale(), 1.0f / std::sqrt(32.0f));

  // Without its window the file is refused by name (llama.cpp requires it too).
  std::vector<uint8_t> no_window_bytes;
  ASSERT_NO_FATAL_FAILURE(et::rewrite_gguf(
      *file, [](const std::string& key) { return key == "gemma3.attention.sliding_window"; }, {},
      &no_window_bytes));
  StatusOr<GgufFile> no_window_file = GgufFile::parse(no_window_bytes);
  ASSERT_TRUE(no_window_file.ok());
  const StatusOr<ModelConfig> refused = ModelConfig::from_gguf(*no_window_file);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("gemma3.attention.sliding_window"), std::string::npos)
      << refused.status().to_string();
}

// The invariants the mutation and fuzz suites hold every loaded program to
// (program_test_support.h) hold for gemma3's.
TEST_F(ExportGemma3Test, Gemma3ProgramsKeepTheLoadersInvariants) {
  const std::string output = et::fresh_dir("gemma3_invariants") + "/program.gguf";
  ASSERT_NO_FATAL_FAILURE(testing::export_tiny_gemma3(*hf_dir_, output));
  et::expect_loader_invariants(output);
}

TEST_F(ExportGemma3Test, AQuantizedProgramStaysCloseToTheReference) {
  // q8_0 matrices (the tied embedding too) under post norms scaling by about 16: the first step's
  // logits stay within half a logit of the reference (their range is about 24; its top two are
  // 0.23 and 0.38 apart, so the greedy token itself may flip).
  const std::string output = et::fresh_dir("gemma3_q8") + "/program.gguf";
  ASSERT_NO_FATAL_FAILURE(testing::export_tiny_gemma3(*hf_dir_, output, 128, ExportQuant::kQ8_0));
  const Program program = et::load_ok(output);
  EXPECT_EQ(program.weights().layers[0].wq.type, TensorType::kQ8_0);
  EXPECT_EQ(program.weights().layers[0].post_ffn_norm.type, TensorType::kF32);
  const int32_t vocab = program.config().vocab_size;
  float worst = 0.0f;
  for (const nlohmann::json& c : testing::tiny_gemma3_reference().at("cases")) {
    const testing::GreedyRun run =
        et::greedy(program, c.at("prompt_tokens").get<std::vector<int32_t>>(), 1);
    ASSERT_EQ(run.logits.size(), static_cast<size_t>(vocab));
    for (const nlohmann::json& entry : c.at("logit_rows").at(0)) {
      const float got = run.logits[entry.at(0).get<size_t>()];
      worst = std::max(worst, std::fabs(got - entry.at(1).get<float>()));
    }
  }
  std::printf("tiny-gemma3 q8_0: worst first-step logits diff vs HF %.3g\n",
              static_cast<double>(worst));
  EXPECT_LT(worst, 0.5f);
}

// A Gemma setting cellm does not run, in config.json, is refused by name.
TEST_F(ExportGemma3Test, SettingsCellmDoesNotRunAreRefusedByName) {
  struct Mutation {
    const char* what;
    std::function<void(nlohmann::json&)> apply;
    const char* expected;
  };
  const Mutation mutations[] = {
      {"Gemma 2's attention soft-capping",
       [](nlohmann::json& c) { c["attn_logit_softcapping"] = 50.0; }, "attn_logit_softcapping"},
      {"final soft-capping", [](nlohmann::json& c) { c["final_logit_softcapping"] = 30.0; },
       "final_logit_softcapping"},
      {"an exact GELU", [](nlohmann::json& c) { c["hidden_activation"] = "gelu"; },
       "hidden_activation"},
      {"global layers out of pattern",
       [](nlohmann::json& c) {
         c["num_hidden_layers"] = 3;
         c["layer_types"] = {"sliding_attention", "full_attention", "full_attention"};
       },
       "layer_types"},
      {"llama3 scaling", [](nlohmann::json& c) { c["rope_scaling"]["rope_type"] = "llama3"; },
       "linear only"},
      {"a window of zero", [](nlohmann::json& c) { c["sliding_window"] = 0; }, "sliding_window"},
  };
  for (const Mutation& m : mutations) {
    nlohmann::json config = testing::tiny_gemma3_reference().at("config");
    m.apply(config);
    et::expect_config_refused(*hf_dir_, config, m.expected, m.what);
  }
}

}  // namespace
}  // namespace cellm
