// HfConfig: config.json of each supported architecture, its defaults, the llama3 rope factors
// (values from arch/README.md, worked out by llama.cpp's converter), and errors naming the key.
#include "model/hf_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_models.h"

namespace cellm {
namespace {

using ::testing::HasSubstr;
using Json = nlohmann::json;

Json llama3_config() {
  return Json::parse(R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "vocab_size": 512, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "hidden_act": "silu",
    "max_position_embeddings": 2048, "rms_norm_eps": 1e-05, "rope_theta": 500000.0,
    "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                     "high_freq_factor": 4.0, "original_max_position_embeddings": 64},
    "tie_word_embeddings": true, "bos_token_id": 1, "eos_token_id": 2,
    "original_max_position_embeddings": 64})");
}

StatusOr<HfConfig> parse(const Json& json) { return HfConfig::parse(json.dump(), "config.json"); }

TEST(HfConfigTest, ReadsTheArchCheckpoints) {
  StatusOr<HfConfig> qwen3 = HfConfig::from_dir(testing::test_model_path("arch/tiny-qwen3-hf"));
  ASSERT_TRUE(qwen3.ok()) << qwen3.status().to_string();
  EXPECT_EQ(qwen3->architecture, Architecture::kQwen3);
  EXPECT_EQ(qwen3->head_dim, 32);  // not hidden / heads
  EXPECT_EQ(qwen3->num_kv_heads, 2);
  EXPECT_TRUE(qwen3->tie_word_embeddings);
  EXPECT_FLOAT_EQ(qwen3->rms_norm_eps, 1e-6f);
  EXPECT_EQ(qwen3->gguf_architecture(), "qwen3");
  EXPECT_EQ(qwen3->name, "tiny-qwen3-hf");

  StatusOr<HfConfig> mistral = HfConfig::from_dir(testing::test_model_path("arch/tiny-mistral-hf"));
  ASSERT_TRUE(mistral.ok());
  EXPECT_EQ(mistral->head_dim, 16);       // hidden / heads
  EXPECT_EQ(mistral->sliding_window, 0);  // "sliding_window": null
  EXPECT_EQ(mistral->gguf_architecture(), "llama");
  EXPECT_TRUE(mistral->uses_llama_layout());
  EXPECT_EQ(mistral->eos_token_ids, std::vector<int32_t>{2});
}

TEST(HfConfigTest, Llama3RopeFactorsMatchTheConvertersValues) {
  StatusOr<HfConfig> config = parse(llama3_config());
  ASSERT_TRUE(config.ok()) << config.status().to_string();
  const std::vector<float> expected = {1.0f, 2.4422593f, 8, 8, 8, 8, 8, 8};
  EXPECT_EQ(config->llama3_rope_factors(), expected);

  // Only the top-level copy: the same factors; neither: the 8192 default, mostly 1s.
  Json top_only = llama3_config();
  top_only["rope_scaling"].erase("original_max_position_embeddings");
  EXPECT_EQ(parse(top_only)->llama3_rope_factors(), expected);
  Json scaling_only = llama3_config();
  scaling_only.erase("original_max_position_embeddings");
  EXPECT_EQ(parse(scaling_only)->llama3_rope_factors(), expected);
  Json neither = scaling_only;
  neither["rope_scaling"].erase("original_max_position_embeddings");
  const std::vector<float> default_factors = parse(neither)->llama3_rope_factors();
  EXPECT_EQ(default_factors[3], 1.0f);
  EXPECT_EQ(default_factors[7], 8.0f);
}

TEST(HfConfigTest, DefaultsFollowTransformers) {
  Json json = llama3_config();
  for (const char* key : {"num_key_value_heads", "head_dim", "rms_norm_eps", "rope_theta",
                          "max_position_embeddings", "tie_word_embeddings", "rope_scaling"}) {
    json.erase(key);
  }
  StatusOr<HfConfig> config = parse(json);
  ASSERT_TRUE(config.ok()) << config.status().to_string();
  EXPECT_EQ(config->num_kv_heads, 4);
  EXPECT_EQ(config->head_dim, 16);
  EXPECT_FLOAT_EQ(config->rms_norm_eps, 1e-6f);
  EXPECT_EQ(config->rope_theta, 10000.0f);
  EXPECT_EQ(config->max_position_embeddings, 2048);
  EXPECT_FALSE(config->tie_word_embeddings);
  EXPECT_EQ(config->rope_scaling.type, "");
}

TEST(HfConfigTest, SlidingWindowsFollowEachArchitecture) {
  Json mistral = llama3_config();
  mistral["model_type"] = "mistral";
  mistral.erase("rope_scaling");
  mistral["sliding_window"] = 4096;
  EXPECT_EQ(parse(mistral)->sliding_window, 4096);
  Json qwen2 = mistral;
  qwen2["model_type"] = "qwen2";
  EXPECT_EQ(parse(qwen2)->sliding_window, 0);  // use_sliding_window defaults to false
  qwen2["use_sliding_window"] = true;
  qwen2["max_window_layers"] = 0;
  EXPECT_EQ(parse(qwen2)->sliding_window, 4096);
  qwen2["max_window_layers"] = 1;  // layer 1 only: GGUF has one window for every layer
  EXPECT_EQ(parse(qwen2).status().code(), StatusCode::kUnimplemented);
}

TEST(HfConfigTest, ErrorsNameTheFileAndTheKey) {
  struct Case {
    std::string key;
    Json value;  // null: remove the key
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"hidden_size", nullptr, "config.json: key 'hidden_size' is missing"},
      {"num_hidden_layers", -2, "key 'num_hidden_layers' is not a positive integer"},
      {"model_type", "gpt_neox", "architecture 'gpt_neox' is not supported"},
      {"num_key_value_heads", 3, "key 'num_key_value_heads' (3) does not divide"},
      {"rope_scaling", Json{{"rope_type", "yarn"}}, "key 'rope_scaling.rope_type' = 'yarn'"},
      {"attention_bias", true, "key 'attention_bias' = true"},
      {"hidden_act", "gelu", "key 'hidden_act'"},
      {"eos_token_id", 600, "key 'eos_token_id' is not a token id"},
      {"rms_norm_eps", "small", "key 'rms_norm_eps' is not a number"},
  };
  for (const Case& c : cases) {
    Json json = llama3_config();
    if (c.value.is_null()) {
      json.erase(c.key);
    } else {
      json[c.key] = c.value;
    }
    const Status status = parse(json).status();
    EXPECT_FALSE(status.ok()) << c.key;
    EXPECT_THAT(status.message(), HasSubstr(c.expected)) << c.key;
    EXPECT_THAT(status.message(), HasSubstr("config.json")) << c.key;
  }
  EXPECT_THAT(HfConfig::parse("{", "c.json").status().message(),
              HasSubstr("c.json: not valid JSON"));
}

// Every value llama3_rope_factors divides by or sizes its table with is refused at parse time,
// so no accepted config reaches it with a zero, a negative or equal frequency bounds.
TEST(HfConfigTest, ValuesTheLlama3RopeFactorsCannotTakeAreRefusedNamingTheKey) {
  struct Case {
    std::string pointer;  // JSON pointer into llama3_config()
    Json value;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"/head_dim", 0, "key 'head_dim' is not a positive integer"},
      {"/head_dim", 15, "key 'head_dim' must be even"},
      {"/rope_theta", 0.0, "key 'rope_theta' must be a number > 0"},
      {"/rope_theta", -500000.0, "key 'rope_theta' must be a number > 0"},
      {"/rope_scaling/factor", 0.0, "key 'rope_scaling.factor' must be a number > 0"},
      {"/rope_scaling/factor", -8.0, "key 'rope_scaling.factor' must be a number > 0"},
      {"/rope_scaling/factor", 0.5, "key 'rope_scaling.factor' must be at least 1"},
      {"/rope_scaling/low_freq_factor", 0.0,
       "key 'rope_scaling.low_freq_factor' must be a number > 0"},
      {"/rope_scaling/high_freq_factor", -4.0,
       "key 'rope_scaling.high_freq_factor' must be a number > 0"},
      {"/rope_scaling/high_freq_factor", 1.0,
       "key 'rope_scaling.high_freq_factor' must be above low_freq_factor"},
      {"/rope_scaling/original_max_position_embeddings", 0,
       "key 'rope_scaling.original_max_position_embeddings' is not a positive integer"},
      {"/original_max_position_embeddings", 0,
       "key 'original_max_position_embeddings' is not a positive integer"},
  };
  for (const Case& c : cases) {
    Json json = llama3_config();
    json[Json::json_pointer(c.pointer)] = c.value;
    const Status status = parse(json).status();
    EXPECT_FALSE(status.ok()) << c.pointer;
    EXPECT_THAT(status.message(), HasSubstr("config.json: " + c.expected)) << c.pointer;
  }
  // The same keys inside transformers 5's rope_parameters.
  for (const auto& [key, value] : {std::pair<std::string, double>{"factor", 0.0},
                                   {"low_freq_factor", -1.0},
                                   {"high_freq_factor", 1.0},
                                   {"rope_theta", 0.0}}) {
    Json json = llama3_config();
    json["rope_parameters"] = json["rope_scaling"];
    json.erase("rope_scaling");
    json["rope_parameters"][key] = value;
    const Status status = parse(json).status();
    EXPECT_FALSE(status.ok()) << key;
    EXPECT_THAT(status.message(), HasSubstr("config.json: key 'rope_parameters." + key + "'"))
        << key;
  }
}

}  // namespace
}  // namespace cellm
