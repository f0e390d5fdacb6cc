// gemma2 end to end on the CPU executor: tiny-gemma2's Hugging Face checkpoint (tests/support/
// tiny_gemma.h: scaled embeddings, GeGLU, post norms, 1 + w norms, a windowed layer and a global
// one, query_pre_attn_scalar, attention scores and final logits soft-capped) exported to a program
// whose greedy tokens equal HF transformers' float64 run and whose logits are within 1e-4 of it —
// from the config as published checkpoints write it and as transformers 5 writes it back, and
// again from the program's own GGUF; the program's tensors and keys in llama.cpp's gemma2 layout, a
// file without cellm's extra keys read with llama.cpp's defaults; bad configs refused by name.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "export_test_support.h"
#include "gguf/gguf_writer.h"
#include "program/program_test_support.h"
#include "tiny_gemma.h"

namespace cellm {
namespace {

constexpr float kTolerance = 1e-4f;

class ExportGemma2Test : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    hf_dir_ = new std::string(et::fresh_dir("gemma2") + "/tiny-gemma2-hf");
    testing::write_tiny_gemma2_checkpoint(*hf_dir_);
  }
  static void TearDownTestSuite() {
    delete hf_dir_;
    hf_dir_ = nullptr;
  }

  // Greedy runs of every reference case on `program` (the first `num_steps` of each when > 0).
  static void expect_reference(const Program& program, const std::string& what,
                               int32_t num_steps = 0) {
    et::expect_reference_cases(program, testing::tiny_gemma2_reference().at("cases"), kTolerance,
                               "tiny-gemma2 " + what, num_steps);
  }

  static std::string exported(const std::string& name) {
    const std::string output = et::fresh_dir(name) + "/program.gguf";
    testing::export_tiny_gemma3(*hf_dir_, output);
    return output;
  }

  static std::string* hf_dir_;
};

std::string* ExportGemma2Test::hf_dir_ = nullptr;

TEST_F(ExportGemma2Test, TheExportedProgramMatchesTransformers) {
  const std::string output = exported("gemma2_program");
  ASSERT_FALSE(HasFatalFailure());
  const Program program = et::load_ok(output);
  const ModelConfig& c = program.config();
  EXPECT_EQ(c.architecture, Architecture::kGemma2);
  EXPECT_EQ(c.rope.style, RopeStyle::kNeox);
  EXPECT_EQ(c.layer_windows, (std::vector<int32_t>{5, 0}));
  EXPECT_EQ(c.rope.freq_base, 10000.0f);
  EXPECT_FALSE(c.sliding_rope.has_value());  // one rope for every layer
  EXPECT_FLOAT_EQ(c.query_scale(), 1.0f / std::sqrt(24.0f));
  EXPECT_EQ(c.embedding_scale, 8.0f);
  EXPECT_EQ(c.ffn_activation, FfnActivation::kGeluTanh);
  EXPECT_EQ(c.attn_logit_softcap, 4.0f);
  EXPECT_EQ(c.final_logit_softcap, 6.0f);
  EXPECT_TRUE(c.has_post_norms);
  EXPECT_FALSE(c.has_qk_norm);
  EXPECT_TRUE(c.tied_embeddings);
  expect_reference(program, "exported");
}

TEST_F(ExportGemma2Test, TransformersFiveConfigGivesTheSameProgram) {
  const std::string dir = et::fresh_dir("gemma2_v5") + "/hf";
  const nlohmann::json& config = testing::tiny_gemma2_reference().at("config_v5");
  ASSERT_TRUE(config.contains("layer_types"));
  ASSERT_NO_FATAL_FAILURE(testing::write_tiny_gemma2_checkpoint(dir, &config));
  const std::string output = dir + "/program.gguf";
  ASSERT_NO_FATAL_FAILURE(testing::export_tiny_gemma3(dir, output));
  const Program program = et::load_ok(output);
  EXPECT_EQ(program.config().layer_windows, (std::vector<int32_t>{5, 0}));
  EXPECT_EQ(program.config().attn_logit_softcap, 4.0f);
  expect_reference(program, "transformers 5 config", 8);
}

TEST_F(ExportGemma2Test, AProgramExportedAgainFromItsGgufMatchesTransformers) {
  const std::string first = exported("gemma2_first");
  ASSERT_FALSE(HasFatalFailure());
  expect_reference(et::load_ok(et::export_again_from_gguf(first, "gemma2_again")), "re-exported");
}

TEST_F(ExportGemma2Test, TheProgramHoldsLlamaCppsGemma2TensorsAndKeys) {
  const std::string output = exported("gemma2_layout");
  ASSERT_FALSE(HasFatalFailure());
  const Program program = et::load_ok(output);
  const GgufFile& file = program.file();
  for (int layer = 0; layer < 2; ++layer) {
    const std::string p = "blk." + std::to_string(layer) + ".";
    for (const char* name :
         {"attn_norm.weight", "post_attention_norm.weight", "ffn_norm.weight",
          "post_ffw_norm.weight", "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight"}) {
      EXPECT_NE(file.find_tensor(p + name), nullptr) << p << name;
    }
    EXPECT_EQ(file.find_tensor(p + "attn_q_norm.weight"), nullptr) << p;
  }
  EXPECT_EQ(file.find_tensor("output.weight"), nullptr);  // tied
  StatusOr<std::string> arch = file.get_string("general.architecture");
  ASSERT_TRUE(arch.ok());
  EXPECT_EQ(*arch, "gemma2");
  for (const auto& [key, expected] :
       {std::pair{"gemma2.attn_logit_softcapping", 4.0f},
        std::pair{"gemma2.final_logit_softcapping", 6.0f}, std::pair{"gemma2.rope.freq_base", 1e4f},
        std::pair{"gemma2.attention.scale", 1.0f / std::sqrt(24.0f)}}) {
    StatusOr<float> value = file.get_f32(key);
    ASSERT_TRUE(value.ok()) << key;
    EXPECT_FLOAT_EQ(*value, expected) << key;
  }
  StatusOr<uint32_t> window = file.get_u32("gemma2.attention.sliding_window");
  ASSERT_TRUE(window.ok());
  EXPECT_EQ(*window, 5u);
  EXPECT_FALSE(file.has("gemma2.rope.freq_base_swa"));
}

// A gemma2 file as llama.cpp's converter writes it has none of cellm's extra keys (one global
// layer in two, scores scaled by 1 / sqrt(head size)); without its soft-capping keys llama.cpp
// caps at 50 and 30.
TEST_F(ExportGemma2Test, AFileWithoutTheExtraKeysReadsWithLlamaCppsDefaults) {
  const std::string output = exported("gemma2_plain");
  ASSERT_FALSE(HasFatalFailure());
  StatusOr<GgufFile> source = GgufFile::open(output);
  ASSERT_TRUE(source.ok());
  const auto extra_key = [](const std::string& key) {
    return key == "gemma2.attention.sliding_window_pattern" || key == "gemma2.attention.scale" ||
           key == "gemma2.attn_logit_softcapping" || key == "gemma2.final_logit_softcapping";
  };
  std::vector<uint8_t> bytes;
  ASSERT_NO_FATAL_FAILURE(et::rewrite_gguf(*source, extra_key, {}, &bytes));
  StatusOr<GgufFile> file = GgufFile::parse(bytes);
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  StatusOr<ModelConfig> config = ModelConfig::from_gguf(*file);
  ASSERT_TRUE(config.ok()) << config.status().to_string();
  EXPECT_EQ(config->layer_windows, (std::vector<int32_t>{5, 0}));
  EXPECT_FLOAT_EQ(config->query_scale(), 1.0f / std::sqrt(32.0f));
  EXPECT_EQ(config->attn_logit_softcap, 50.0f);
  EXPECT_EQ(config->final_logit_softcap, 30.0f);
  EXPECT_NE(config->summary().find("scores capped at 50"), std::string::npos) << config->summary();

  // A cap that is not a positive number is refused by name.
  std::vector<uint8_t> bad_bytes;
  ASSERT_NO_FATAL_FAILURE(et::rewrite_gguf(
      *file, extra_key, {{"gemma2.final_logit_softcapping", GgufValue::f32(-1.0f)}}, &bad_bytes));
  StatusOr<GgufFile> bad_file = GgufFile::parse(bad_bytes);
  ASSERT_TRUE(bad_file.ok());
  const StatusOr<ModelConfig> refused = ModelConfig::from_gguf(*bad_file);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("gemma2.final_logit_softcapping"), std::string::npos)
      << refused.status().to_string();
}

// The invariants the mutation and fuzz suites hold every loaded program to
// (program_test_support.h) hold for gemma2's.
TEST_F(ExportGemma2Test, Gemma2ProgramsKeepTheLoadersInvariants) {
  const std::string output = exported("gemma2_invariants");
  ASSERT_FALSE(HasFatalFailure());
  et::expect_loader_invariants(output);
}

// A Gemma 2 setting cellm does not run, in config.json, is refused by name.
TEST_F(ExportGemma2Test, SettingsCellmDoesNotRunAreRefusedByName) {
  struct Mutation {
    const char* what;
    std::function<void(nlohmann::json&)> apply;
    const char* expected;
  };
  const Mutation mutations[] = {
      {"no attention soft-capping",
       [](nlohmann::json& c) { c["attn_logit_softcapping"] = nullptr; }, "attn_logit_softcapping"},
      {"no final soft-capping", [](nlohmann::json& c) { c["final_logit_softcapping"] = nullptr; },
       "final_logit_softcapping"},
      {"a negative cap", [](nlohmann::json& c) { c["final_logit_softcapping"] = -30.0; },
       "final_logit_softcapping"},
      {"an exact GELU", [](nlohmann::json& c) { c["hidden_activation"] = "gelu"; },
       "hidden_activation"},
      {"rope scaling",
       [](nlohmann::json& c) {
         c["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 2.0}};
       },
       "gemma2"},
  };
  for (const Mutation& m : mutations) {
    nlohmann::json config = testing::tiny_gemma2_reference().at("config");
    m.apply(config);
    et::expect_config_refused(*hf_dir_, config, m.expected, m.what);
  }
}

}  // namespace
}  // namespace cellm
