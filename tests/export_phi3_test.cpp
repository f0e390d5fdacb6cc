// phi3 end to end on the CPU executor: tiny-phi3's Hugging Face checkpoint (tests/support/
// tiny_phi3.h: fused q|k|v and gate|up, LongRoPE, a partial rotary head, a sliding window)
// exported to a program whose greedy tokens equal HF transformers' float64 run and whose logits
// are within 1e-4 of it — with the short factors when the program serves at most the original 64
// positions, the long ones when it serves more (also when a program is exported again from its
// GGUF); the program's tensors and keys in llama.cpp's phi3 layout; bad LongRoPE configs refused
// by name.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <list>

#include "export_test_support.h"
#include "model/rope_pairs.h"
#include "program/program_test_support.h"
#include "tiny_phi3.h"

namespace cellm {
namespace {

constexpr float kTolerance = 1e-4f;

class ExportPhi3Test : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    hf_dir_ = new std::string(et::fresh_dir("phi3") + "/tiny-phi3-hf");
    testing::write_tiny_phi3_checkpoint(*hf_dir_);
  }
  static void TearDownTestSuite() {
    delete hf_dir_;
    hf_dir_ = nullptr;
  }

  // Greedy runs of every case of `variant` on `program`; expects the reference's tokens and logits.
  static void expect_variant(const Program& program, const std::string& variant) {
    et::expect_reference_cases(program, testing::tiny_phi3_variant(variant).at("cases"), kTolerance,
                               "tiny-phi3 " + variant);
  }

  static std::string* hf_dir_;
};

std::string* ExportPhi3Test::hf_dir_ = nullptr;

TEST_F(ExportPhi3Test, AProgramServingTheOriginalContextMatchesTransformersWithShortFactors) {
  const std::string output = et::fresh_dir("phi3_short") + "/program.gguf";
  ASSERT_NO_FATAL_FAILURE(testing::export_tiny_phi3(*hf_dir_, output, 64));
  const Program program = et::load_ok(output);
  const ModelConfig& c = program.config();
  EXPECT_EQ(c.architecture, Architecture::kPhi3);
  EXPECT_EQ(c.rope.style, RopeStyle::kNeox);
  EXPECT_EQ(c.rope.num_rotary_dims, 12);  // 3/4 of 16
  EXPECT_TRUE(c.rope.has_freq_factors);
  EXPECT_EQ(c.rope.long_factors_above_context, 64);
  EXPECT_NEAR(c.rope.attn_factor, testing::tiny_phi3_reference().at("attention_factor"), 1e-6);
  EXPECT_EQ(c.layer_windows, std::vector<int32_t>(2, 9));
  EXPECT_FALSE(program.weights().uses_long_rope_factors());
  EXPECT_NE(program.summary().find("short factors in use"), std::string::npos) << program.summary();
  expect_variant(program, "short");
}

TEST_F(ExportPhi3Test, AProgramServingMoreThanTheOriginalContextUsesTheLongFactors) {
  const std::string output = et::fresh_dir("phi3_long") + "/program.gguf";
  ASSERT_NO_FATAL_FAILURE(testing::export_tiny_phi3(*hf_dir_, output, 512));
  const Program program = et::load_ok(output);
  EXPECT_TRUE(program.weights().uses_long_rope_factors());
  expect_variant(program, "long");

  // The same program exported again from its GGUF, serving 64 positions: short factors again.
  const std::string again = et::fresh_dir("phi3_again") + "/program.gguf";
  ExportOptions options;
  options.source = ExportSource::kGguf;
  options.input = output;
  options.output = again;
  options.max_seq_len = 64;
  options.max_step_tokens = 32;
  et::export_ok(options);
  const Program shorter = et::load_ok(again);
  EXPECT_FALSE(shorter.weights().uses_long_rope_factors());
  expect_variant(shorter, "short");
}

TEST_F(ExportPhi3Test, TheProgramHoldsLlamaCppsPhi3TensorsAndKeys) {
  const std::string output = et::fresh_dir("phi3_layout") + "/program.gguf";
  ASSERT_NO_FATAL_FAILURE(testing::export_tiny_phi3(*hf_dir_, output, 64));
  const Program program = et::load_ok(output);
  const GgufFile& file = program.file();
  // q 4 heads x 16 + k and v 1 x 16 each; gate and up 96 rows each.
  for (int layer = 0; layer < 2; ++layer) {
    const std::string p = "blk." + std::to_string(layer) + ".";
    const GgufTensorInfo* qkv = file.find_tensor(p + "attn_qkv.weight");
    ASSERT_NE(qkv, nullptr);
    EXPECT_EQ(qkv->dims, (std::vector<uint64_t>{64, 96}));
    const GgufTensorInfo* up = file.find_tensor(p + "ffn_up.weight");
    ASSERT_NE(up, nullptr);
    EXPECT_EQ(up->dims, (std::vector<uint64_t>{64, 192}));
    for (const char* absent :
         {"attn_q.weight", "attn_k.weight", "attn_v.weight", "ffn_gate.weight"}) {
      EXPECT_EQ(file.find_tensor(p + absent), nullptr) << p << absent;
    }
  }
  const nlohmann::json& config = testing::tiny_phi3_reference().at("config");
  for (const auto& [name, key] :
       {std::pair<const char*, const char*>{"rope_factors_short.weight", "short_factor"},
        {"rope_factors_long.weight", "long_factor"}}) {
    const GgufTensorInfo* info = file.find_tensor(name);
    ASSERT_NE(info, nullptr) << name;
    const auto expected = config.at("rope_scaling").at(key).get<std::vector<float>>();
    std::vector<float> values(expected.size());
    ASSERT_EQ(file.tensor_data(*info).size(), values.size() * sizeof(float)) << name;
    std::memcpy(values.data(), file.tensor_data(*info).data(), file.tensor_data(*info).size());
    EXPECT_EQ(values, expected) << name;
  }
  const auto u32 = [&](const char* key) {
    StatusOr<uint32_t> value = file.get_u32(key);
    EXPECT_TRUE(value.ok()) << key;
    return value.ok() ? *value : 0u;
  };
  StatusOr<std::string> arch = file.get_string("general.architecture");
  ASSERT_TRUE(arch.ok());
  EXPECT_EQ(*arch, "phi3");
  EXPECT_EQ(u32("phi3.rope.dimension_count"), 12u);
  EXPECT_EQ(u32("phi3.rope.scaling.original_context_length"), 64u);
  EXPECT_EQ(u32("phi3.attention.sliding_window"), 9u);
  EXPECT_EQ(u32("phi3.context_length"), 512u);
  StatusOr<float> attn_factor = file.get_f32("phi3.rope.scaling.attn_factor");
  ASSERT_TRUE(attn_factor.ok());
  EXPECT_NEAR(*attn_factor, 1.2247449f, 1e-6f);
}

// The invariants the mutation and fuzz suites hold every loaded program to
// (program_test_support.h) hold for phi3's: fused row ranges, the factors in use.
TEST_F(ExportPhi3Test, Phi3ProgramsKeepTheLoadersInvariants) {
  for (const int32_t max_seq_len : {64, 512}) {
    const std::string output = et::fresh_dir("phi3_invariants") + "/program.gguf";
    ASSERT_NO_FATAL_FAILURE(testing::export_tiny_phi3(*hf_dir_, output, max_seq_len));
    StatusOr<GgufFile> file = GgufFile::open(output);
    ASSERT_TRUE(file.ok()) << file.status().to_string();
    const program_testing::LoadOutcome outcome =
        program_testing::load_and_check(std::move(file).value());
    EXPECT_TRUE(outcome.loaded) << outcome.refusal;
    EXPECT_EQ(outcome.problem, "") << max_seq_len;
  }
}

TEST_F(ExportPhi3Test, AQuantizedProgramSplitsItsFusedRowsAndStaysCloseToTheReference) {
  // q8_0 rows are quantized along the columns, so q|k|v and gate|up split by rows exactly as the
  // f32 ones do; the first greedy token of each case is the reference's.
  const std::string output = et::fresh_dir("phi3_q8") + "/program.gguf";
  ASSERT_NO_FATAL_FAILURE(testing::export_tiny_phi3(*hf_dir_, output, 64, ExportQuant::kQ8_0));
  const Program program = et::load_ok(output);
  EXPECT_EQ(program.weights().layers[0].wq.type, TensorType::kQ8_0);
  for (const nlohmann::json& c : testing::tiny_phi3_variant("short").at("cases")) {
    const testing::GreedyRun run =
        et::greedy(program, c.at("prompt_tokens").get<std::vector<int32_t>>(), 1);
    EXPECT_EQ(run.tokens.at(0), c.at("generated_tokens").at(0).get<int32_t>());
  }
}

// A bad LongRoPE or rotary setting in config.json is refused, the error naming the key.
TEST_F(ExportPhi3Test, BadLongRopeSettingsAreRefusedByName) {
  struct Mutation {
    const char* what;
    std::function<void(nlohmann::json&)> apply;
    const char* expected;
  };
  const Mutation mutations[] = {
      {"a short factor list one too short",
       [](nlohmann::json& c) { c["rope_scaling"]["short_factor"].erase(0); },
       "rope_scaling.short_factor"},
      {"a long factor of zero", [](nlohmann::json& c) { c["rope_scaling"]["long_factor"][2] = 0; },
       "rope_scaling.long_factor"},
      {"no long factors", [](nlohmann::json& c) { c["rope_scaling"].erase("long_factor"); },
       "rope_scaling.long_factor"},
      {"an odd rotary width", [](nlohmann::json& c) { c["partial_rotary_factor"] = 0.7; },
       "partial_rotary_factor"},
      {"yarn", [](nlohmann::json& c) { c["rope_scaling"]["type"] = "yarn"; },
       "rope_scaling.rope_type"},
      {"an original context of one position (ln 1 = 0 divides the attention factor)",
       [](nlohmann::json& c) { c["original_max_position_embeddings"] = 1; },
       "original_max_position_embeddings"},
  };
  for (const Mutation& m : mutations) {
    nlohmann::json config = testing::tiny_phi3_reference().at("config");
    m.apply(config);
    et::expect_config_refused(*hf_dir_, config, m.expected, m.what);
  }
}

// What CudaWeights does to a neox model (model/rope_pairs.h), done here on the CPU oracle: q and
// k rows (and biases) reordered into adjacent pairs and the model run with normal-style rope
// gives the references' tokens and logits — tiny-phi3 (a partial rotary head) and tiny-qwen2
// (q/k biases).
class NeoxAsNormal {
 public:
  NeoxAsNormal(const ModelConfig& config, const ModelWeights& weights)
      : config_(config), weights_(weights) {
    EXPECT_EQ(config_.rope.style, RopeStyle::kNeox);
    config_.rope.style = RopeStyle::kNormal;
    for (LayerWeights& l : weights_.layers) {
      for (WeightView* view : {&l.wq, &l.wk, &l.q_bias, &l.k_bias}) {
        if (!view->present()) continue;
        EXPECT_EQ(view->type, TensorType::kF32) << view->name;
        // A bias is one row of num_cols elements: reorder elements; a matrix: rows.
        const bool vector = view->num_rows == 1;
        const int64_t count = vector ? view->num_cols : view->num_rows;
        const size_t unit = vector ? sizeof(float) : view->row_bytes;
        std::vector<uint8_t>& out = buffers_.emplace_back(view->bytes.size());
        for (int64_t r = 0; r < count; ++r) {
          const int64_t from = neox_source_row(r, config_.head_dim, config_.rope.num_rotary_dims);
          std::memcpy(out.data() + static_cast<size_t>(r) * unit,
                      view->bytes.data() + static_cast<size_t>(from) * unit, unit);
        }
        view->bytes = out;
      }
    }
  }
  const ModelConfig& config() const { return config_; }
  const ModelWeights& weights() const { return weights_; }

 private:
  ModelConfig config_;
  ModelWeights weights_;
  std::list<std::vector<uint8_t>> buffers_;  // the reordered bytes the views point into
};

TEST_F(ExportPhi3Test, NeoxModelsReorderedIntoAdjacentPairsRunAsNormalStyleModels) {
  const std::string output = et::fresh_dir("phi3_adjacent") + "/program.gguf";
  ASSERT_NO_FATAL_FAILURE(testing::export_tiny_phi3(*hf_dir_, output, 64));
  const Program phi3 = et::load_ok(output);
  {
    const NeoxAsNormal reordered(phi3.config(), phi3.weights());
    CpuExecutor executor(reordered.config(), reordered.weights(), phi3.spec(), {});
    ASSERT_TRUE(executor.initialize().ok());
    for (const nlohmann::json& c : testing::tiny_phi3_variant("short").at("cases")) {
      const testing::GreedyRun run =
          testing::run_greedy(executor, c.at("prompt_tokens").get<std::vector<int32_t>>(),
                              static_cast<int32_t>(c.at("generated_tokens").size()));
      testing::expect_reference_case(run, c, phi3.config().vocab_size, kTolerance,
                                     "tiny-phi3 reordered, case " + c.at("case").dump());
    }
  }
  const std::unique_ptr<Program> qwen2 = testing::load_test_program("arch/tiny-qwen2.gguf");
  ASSERT_NE(qwen2, nullptr);
  ASSERT_TRUE(qwen2->config().has_qkv_bias);
  const NeoxAsNormal reordered(qwen2->config(), qwen2->weights());
  CpuExecutor executor(reordered.config(), reordered.weights(), qwen2->spec(), {});
  ASSERT_TRUE(executor.initialize().ok());
  std::ifstream in(testing::test_model_path("arch/tiny-qwen2-reference.json"));
  const nlohmann::json reference = nlohmann::json::parse(in);
  for (const nlohmann::json& c : reference.at("cases")) {
    const auto expected = c.at("generated_tokens").get<std::vector<int32_t>>();
    const std::vector<float> logits = testing::read_f32_file(
        testing::test_model_path("arch/" + c.at("logits_file").get<std::string>()));
    const testing::GreedyRun run =
        testing::run_greedy(executor, c.at("prompt_tokens").get<std::vector<int32_t>>(),
                            static_cast<int32_t>(expected.size()));
    EXPECT_EQ(run.tokens, expected) << "tiny-qwen2 reordered, case " << c.at("case");
    ASSERT_EQ(run.logits.size(), logits.size());
    EXPECT_LE(testing::max_abs_diff(run.logits, logits), kTolerance);
  }
}

}  // namespace
}  // namespace cellm
