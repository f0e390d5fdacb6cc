// About 16,000 seeded mutants of the arch test models' config.json files (llama3, mistral, qwen2,
// qwen3), tiny-phi3's and tiny-gemma3's (tests/support/; as transformers 4 and 5 write them)
// through HfConfig::parse: a sweep of single mutations (every key removed; every value replaced by
// the boundaries of its type, by values of other types, by deep nesting and a long array; known
// keys added), then random mixes of semantic mutations and JSON damage (json_mutator_test_util.h).
// Every mutant either parses into a config that keeps the promises of hf_config_test_util.h,
// checked against the mutant's own JSON, or is refused with an expected code and a one-line message
// that starts with the file's name, within 2 s. Never a crash, an escaping exception or a sanitizer
// report (CI runs it under ASan/UBSan).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "model/hf_config.h"
#include "model/hf_config_test_util.h"
#include "model/json_mutator_test_util.h"
#include "test_models.h"

namespace cellm {
namespace {

using Json = nlohmann::json;

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Every key HfConfig::parse reads, at the top level or inside rope_scaling / rope_parameters.
std::vector<std::string> config_keys() {
  return {"model_type",
          "architectures",
          "hidden_size",
          "intermediate_size",
          "num_hidden_layers",
          "num_attention_heads",
          "num_key_value_heads",
          "head_dim",
          "vocab_size",
          "max_position_embeddings",
          "rms_norm_eps",
          "rope_theta",
          "tie_word_embeddings",
          "original_max_position_embeddings",
          "rope_scaling",
          "rope_parameters",
          "rope_type",
          "type",
          "factor",
          "low_freq_factor",
          "high_freq_factor",
          "sliding_window",
          "use_sliding_window",
          "partial_rotary_factor",
          "short_factor",
          "long_factor",
          "attention_factor",
          "max_window_layers",
          "layer_types",
          "attention_bias",
          "mlp_bias",
          "hidden_act",
          "hidden_activation",
          "sliding_window_pattern",
          "rope_local_base_freq",
          "query_pre_attn_scalar",
          "attn_logit_softcapping",
          "final_logit_softcapping",
          "full_attention",
          "sliding_attention",
          "text_config",
          "bos_token_id",
          "eos_token_id",
          "_name_or_path"};
}

std::vector<std::string> config_strings() {
  return {"llama",
          "mistral",
          "qwen2",
          "qwen3",
          "phi3",
          "gemma",
          "LlamaForCausalLM",
          "Qwen3ForCausalLM",
          "MistralForCausalLM",
          "Phi3ForCausalLM",
          "gemma2",
          "Gemma2ForCausalLM",
          "gemma3_text",
          "gemma3",
          "Gemma3ForCausalLM",
          "Gemma3ForConditionalGeneration",
          "gelu_pytorch_tanh",
          "longrope",
          "su",
          "default",
          "linear",
          "llama3",
          "dynamic",
          "yarn",
          "silu",
          "gelu",
          "sliding_attention",
          "full_attention",
          "line one\nline two"};
}

struct Counts {
  int parsed = 0;
  int refused = 0;
};

// Parses one mutant and checks the outcome; `what` describes the mutation for failure messages.
void check_mutant(const std::string& text, const std::string& what, Counts* counts) {
  const std::string where = "mutants/config.json";
  const std::string shown = text.size() > 400 ? text.substr(0, 400) + "..." : text;
  const auto start = std::chrono::steady_clock::now();
  StatusOr<HfConfig> config = HfConfig::parse(text, where);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_LT(seconds, 2.0) << "a parse of " << text.size() << " bytes; mutation: " << what;
  if (!config.ok()) {
    ++counts->refused;
    const Status& status = config.status();
    const StatusCode code = status.code();
    ASSERT_TRUE(code == StatusCode::kDataLoss || code == StatusCode::kNotFound ||
                code == StatusCode::kUnimplemented)
        << status.to_string() << "\nmutation: " << what;
    ASSERT_EQ(status.message().rfind(where + ": ", 0), 0u)
        << status.message() << "\nmutation: " << what;
    ASSERT_EQ(status.message().find('\n'), std::string::npos)
        << status.message() << "\nmutation: " << what;
    ASSERT_LE(status.message().size(), 300u)
        << status.message().substr(0, 300) << "\nmutation: " << what;
    return;
  }
  ++counts->parsed;
  Json json;
  try {
    json = Json::parse(text);
  } catch (const Json::exception&) {
    FAIL() << "accepted text that is not JSON; mutation: " << what << "\n" << shown;
  }
  ASSERT_EQ(hf_config_testing::check_parsed_config(*config, json), "")
      << "mutation: " << what << "\n"
      << shown;
}

TEST(HfConfigMutationTest, EveryMutantParsesSanelyOrFailsWithOneLineNamingTheFile) {
  const std::vector<std::string> models = {"tiny-llama3-hf", "tiny-mistral-hf", "tiny-qwen2-hf",
                                           "tiny-qwen3-hf"};
  std::vector<std::string> bases;
  for (const std::string& model : models) {
    bases.push_back(read_text(testing::test_model_path("arch/" + model + "/config.json")));
    StatusOr<HfConfig> config = HfConfig::parse(bases.back(), "config.json");
    ASSERT_TRUE(config.ok()) << model << ": " << config.status().to_string();
    ASSERT_EQ(hf_config_testing::check_parsed_config(*config, Json::parse(bases.back())), "")
        << model;
  }
  // tiny-phi3's (LongRoPE, a partial rotary head, a window), and the same as transformers 5
  // writes it: everything rope in rope_parameters.
  const Json phi3 = Json::parse(
#include "tiny_phi3_reference.inc"
                        )
                        .at("config");
  Json phi3_v5 = phi3;
  phi3_v5["rope_parameters"] = phi3.at("rope_scaling");
  phi3_v5["rope_parameters"]["rope_type"] = "longrope";
  phi3_v5["rope_parameters"].erase("type");
  for (const char* key :
       {"rope_theta", "partial_rotary_factor", "original_max_position_embeddings"}) {
    phi3_v5["rope_parameters"][key] = phi3.at(key);
    phi3_v5.erase(key);
  }
  phi3_v5.erase("rope_scaling");
  for (const Json& config_json : {phi3, phi3_v5}) {
    bases.push_back(config_json.dump(1));
    StatusOr<HfConfig> config = HfConfig::parse(bases.back(), "config.json");
    ASSERT_TRUE(config.ok()) << config.status().to_string();
    EXPECT_EQ(config->num_rotary_dims, 12);
    EXPECT_EQ(config->rope_scaling.type, "longrope");
    EXPECT_EQ(config->rope_scaling.original_context_length, 64);
    EXPECT_EQ(config->sliding_window, 9);
    ASSERT_EQ(hf_config_testing::check_parsed_config(*config, config_json), "");
  }

  // tiny-gemma3's (a window pattern, two ropes, query_pre_attn_scalar; tests/support/
  // tiny_gemma.h), as published checkpoints and as transformers 5 write it.
  const Json gemma3_document = Json::parse(
#include "tiny_gemma3_reference.inc"
  );
  for (const char* which : {"config", "config_v5"}) {
    const Json& config_json = gemma3_document.at(which);
    bases.push_back(config_json.dump(1));
    StatusOr<HfConfig> config = HfConfig::parse(bases.back(), "config.json");
    ASSERT_TRUE(config.ok()) << which << ": " << config.status().to_string();
    EXPECT_EQ(config->architecture, Architecture::kGemma3) << which;
    EXPECT_EQ(config->sliding_window_pattern, 2) << which;
    EXPECT_EQ(config->rope_local_base_freq, 10000.0f) << which;
    EXPECT_EQ(config->rope_scaling.type, "linear") << which;
    ASSERT_EQ(hf_config_testing::check_parsed_config(*config, config_json), "") << which;
  }
  // tiny-gemma2's (soft caps, Gemma 2's window pattern), both ways.
  const Json gemma2_document = Json::parse(
#include "tiny_gemma2_reference.inc"
  );
  for (const char* which : {"config", "config_v5"}) {
    const Json& config_json = gemma2_document.at(which);
    bases.push_back(config_json.dump(1));
    StatusOr<HfConfig> config = HfConfig::parse(bases.back(), "config.json");
    ASSERT_TRUE(config.ok()) << which << ": " << config.status().to_string();
    EXPECT_EQ(config->architecture, Architecture::kGemma2) << which;
    EXPECT_EQ(config->sliding_window_pattern, 2) << which;
    EXPECT_EQ(config->attn_logit_softcap, 4.0f) << which;
    EXPECT_EQ(config->final_logit_softcap, 6.0f) << which;
    ASSERT_EQ(hf_config_testing::check_parsed_config(*config, config_json), "") << which;
  }
  // And as a Gemma3ForConditionalGeneration's text_config (Gemma 3 4B and up).
  Json multimodal = {{"architectures", {"Gemma3ForConditionalGeneration"}},
                     {"model_type", "gemma3"},
                     {"text_config", gemma3_document.at("config")},
                     {"eos_token_id", {1, 106}}};
  multimodal["text_config"].erase("eos_token_id");
  bases.push_back(multimodal.dump(1));
  {
    StatusOr<HfConfig> config = HfConfig::parse(bases.back(), "config.json");
    ASSERT_TRUE(config.ok()) << config.status().to_string();
    EXPECT_TRUE(config->text_of_multimodal);
    EXPECT_EQ(config->eos_token_ids, (std::vector<int32_t>{1, 106}));
    ASSERT_EQ(hf_config_testing::check_parsed_config(*config, multimodal), "");
  }

  const auto start = std::chrono::steady_clock::now();
  json_mutation_testing::JsonMutator mutator(20250611, config_keys(), config_strings());
  Counts sweep;
  Counts random;
  for (const std::string& base : bases) {
    // Every key removed; every value replaced by every boundary of its type and about 24 other
    // palette values; every known key added with about 8.
    mutator.sweep(base, 24, 8, [&](const std::string& what, const std::string& text) {
      if (!HasFatalFailure()) check_mutant(text, "sweep: " + what, &sweep);
    });
    ASSERT_FALSE(HasFatalFailure());
    // Then random mixes of semantic and structural mutations.
    constexpr int kRandomPerBase = 1000;
    for (int i = 0; i < kRandomPerBase; ++i) {
      check_mutant(mutator.mutate(base), mutator.description(), &random);
      ASSERT_FALSE(HasFatalFailure());
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // Most mutations break something; many keep a config that still parses.
  EXPECT_GT(sweep.refused, sweep.parsed / 2);
  EXPECT_GT(sweep.parsed, 1000);
  EXPECT_GT(random.refused, random.parsed);
  EXPECT_GT(random.parsed, 200);
  std::printf("sweep: %d parsed, %d refused; random: %d parsed, %d refused; %.2f s\n", sweep.parsed,
              sweep.refused, random.parsed, random.refused, seconds);
}

}  // namespace
}  // namespace cellm
