// `cellm export --prequantized`: a GPTQ-layout llama checkpoint built here with known 4-bit
// weights, scales and zeros (symmetric and asymmetric, groups of 32, 64 and 128, v1 "zero minus
// one" and v2 zeros) exports to a program whose forward equals the forward of an f32 checkpoint
// holding the dequantized weights, w = scale * (q - zero), computed here (≤ 1e-4); the layers are
// repacked into Q4_0 (symmetric, group 32) or cellm's q4_g32/q4_g64/q4_g128. Act-order and other
// unsupported settings are one-line errors naming them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <random>

#include "core/float16.h"
#include "export_test_support.h"
#include "model/gptq.h"
#include "model/safetensors_file.h"

namespace cellm {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kHidden = 128, kFfn = 256, kHeads = 4, kKvHeads = 2, kHeadDim = 32;
constexpr int64_t kLayers = 2, kVocab = 512;

struct GptqCase {
  int group = 32;
  bool sym = true;
  bool v2 = false;  // checkpoint_format gptq_v2: zeros stored as they are
  TensorType expected_type = TensorType::kQ4_0;
};

Json config(const GptqCase* gptq) {
  Json c = {{"architectures", {"LlamaForCausalLM"}},
            {"model_type", "llama"},
            {"vocab_size", kVocab},
            {"hidden_size", kHidden},
            {"intermediate_size", kFfn},
            {"num_hidden_layers", kLayers},
            {"num_attention_heads", kHeads},
            {"num_key_value_heads", kKvHeads},
            {"max_position_embeddings", 256},
            {"rms_norm_eps", 1e-5},
            {"rope_theta", 10000.0},
            {"tie_word_embeddings", false}};
  if (gptq != nullptr) {
    c["quantization_config"] = {
        {"quant_method", "gptq"},    {"bits", 4},
        {"group_size", gptq->group}, {"desc_act", false},
        {"sym", gptq->sym},          {"checkpoint_format", gptq->v2 ? "gptq_v2" : "gptq"}};
  }
  return c;
}

// Packs 8 nibbles per int32, value k at bits 4k.
int32_t pack8(const int* values) {
  uint32_t word = 0;
  for (int k = 0; k < 8; ++k) word |= static_cast<uint32_t>(values[k] & 0xf) << (4 * k);
  return static_cast<int32_t>(word);
}

// Writes the GPTQ checkpoint to `gptq_dir` and the f32 checkpoint of its dequantized weights to
// `f32_dir`. Non-quantized tensors are f16 in the GPTQ checkpoint and the same values in f32.
void write_checkpoints(const GptqCase& c, const std::string& gptq_dir, const std::string& f32_dir) {
  std::mt19937 rng(1234 + c.group + (c.sym ? 0 : 7) + (c.v2 ? 13 : 0));
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<st::TensorBytes> gptq, plain;
  const auto add_plain = [&](const std::string& name, std::vector<uint64_t> shape, float scale,
                             float offset) {
    uint64_t n = 1;
    for (uint64_t d : shape) n *= d;
    std::vector<float> values(n);
    for (float& v : values)
      v = bf16_to_f32(f32_to_bf16(offset + scale * uniform(rng)));  // f16-exact
    gptq.push_back({name, "F16", shape, st::f16_bytes(values)});
    plain.push_back({name, "F32", shape, st::f32_bytes(values)});
  };
  const auto add_linear = [&](const std::string& prefix, int64_t out, int64_t in) {
    const int64_t groups = in / c.group;
    std::vector<int> q(static_cast<size_t>(in * out));               // [in, out]
    std::vector<int> zero(static_cast<size_t>(groups * out));        // [groups, out], real
    std::vector<uint16_t> scale(static_cast<size_t>(groups * out));  // [groups, out], f16
    for (int& v : q) v = static_cast<int>(rng() % 16);
    for (int& z : zero)
      z = c.sym ? 8 : (c.v2 ? static_cast<int>(rng() % 16) : 1 + static_cast<int>(rng() % 15));
    for (uint16_t& s : scale) s = f32_to_f16(0.01f + 0.02f * (uniform(rng) + 1.0f) / 2.0f);
    std::vector<int32_t> qweight(static_cast<size_t>(in / 8 * out));
    for (int64_t r = 0; r < in / 8; ++r) {
      for (int64_t j = 0; j < out; ++j) {
        int nibbles[8];
        for (int k = 0; k < 8; ++k) nibbles[k] = q[static_cast<size_t>((8 * r + k) * out + j)];
        qweight[static_cast<size_t>(r * out + j)] = pack8(nibbles);
      }
    }
    std::vector<int32_t> qzeros(static_cast<size_t>(groups * out / 8));
    for (int64_t g = 0; g < groups; ++g) {
      for (int64_t w = 0; w < out / 8; ++w) {
        int stored[8];
        for (int k = 0; k < 8; ++k) {
          stored[k] = zero[static_cast<size_t>(g * out + 8 * w + k)] - (c.v2 ? 0 : 1);
        }
        qzeros[static_cast<size_t>(g * out / 8 + w)] = pack8(stored);
      }
    }
    std::vector<int32_t> g_idx(static_cast<size_t>(in));
    for (int64_t i = 0; i < in; ++i)
      g_idx[static_cast<size_t>(i)] = static_cast<int32_t>(i / c.group);
    const auto u = [](int64_t v) { return static_cast<uint64_t>(v); };
    gptq.push_back({prefix + ".qweight", "I32", {u(in / 8), u(out)}, st::raw_bytes(qweight)});
    gptq.push_back({prefix + ".qzeros", "I32", {u(groups), u(out / 8)}, st::raw_bytes(qzeros)});
    gptq.push_back({prefix + ".scales", "F16", {u(groups), u(out)}, st::raw_bytes(scale)});
    gptq.push_back({prefix + ".g_idx", "I32", {u(in)}, st::raw_bytes(g_idx)});
    std::vector<float> w(static_cast<size_t>(out * in));  // HF [out, in]
    for (int64_t j = 0; j < out; ++j) {
      for (int64_t i = 0; i < in; ++i) {
        const size_t gj = static_cast<size_t>((i / c.group) * out + j);
        w[static_cast<size_t>(j * in + i)] =
            static_cast<float>(q[static_cast<size_t>(i * out + j)] - zero[gj]) *
            f16_to_f32(scale[gj]);
      }
    }
    plain.push_back({prefix + ".weight", "F32", {u(out), u(in)}, st::f32_bytes(w)});
  };
  add_plain("model.embed_tokens.weight", {kVocab, kHidden}, 1.0f, 0.0f);
  for (int64_t l = 0; l < kLayers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    add_plain(p + "input_layernorm.weight", {kHidden}, 0.1f, 1.0f);
    add_linear(p + "self_attn.q_proj", kHeads * kHeadDim, kHidden);
    add_linear(p + "self_attn.k_proj", kKvHeads * kHeadDim, kHidden);
    add_linear(p + "self_attn.v_proj", kKvHeads * kHeadDim, kHidden);
    add_linear(p + "self_attn.o_proj", kHidden, kHeads * kHeadDim);
    add_plain(p + "post_attention_layernorm.weight", {kHidden}, 0.1f, 1.0f);
    add_linear(p + "mlp.gate_proj", kFfn, kHidden);
    add_linear(p + "mlp.up_proj", kFfn, kHidden);
    add_linear(p + "mlp.down_proj", kHidden, kFfn);
  }
  add_plain("model.norm.weight", {kHidden}, 0.1f, 1.0f);
  add_plain("lm_head.weight", {kVocab, kHidden}, 1.0f, 0.0f);
  ASSERT_TRUE(st::write_text(gptq_dir + "/config.json", config(&c).dump()));
  ASSERT_TRUE(st::write_file(gptq_dir + "/model.safetensors", st::build(gptq)));
  ASSERT_TRUE(st::write_text(f32_dir + "/config.json", config(nullptr).dump()));
  ASSERT_TRUE(st::write_file(f32_dir + "/model.safetensors", st::build(plain)));
}

ExportOptions options_for(ExportSource source, const std::string& dir) {
  ExportOptions options;
  options.source = source;
  options.input = dir;
  options.output = dir + "/program.gguf";
  options.max_step_tokens = 64;
  options.tokenizer_path = testing::test_model_path("stories260K.gguf");
  return options;
}

class ExportGptqTest : public ::testing::TestWithParam<GptqCase> {};

TEST_P(ExportGptqTest, ForwardEqualsTheDequantizedF32Forward) {
  const GptqCase& c = GetParam();
  const std::string name =
      "gptq_g" + std::to_string(c.group) + (c.sym ? "_sym" : "_asym") + (c.v2 ? "_v2" : "");
  const std::string gptq_dir = et::fresh_dir(name), f32_dir = et::fresh_dir(name + "_f32");
  write_checkpoints(c, gptq_dir, f32_dir);
  const ExportReport report = et::export_ok(options_for(ExportSource::kPrequantized, gptq_dir));
  EXPECT_THAT(report.spec.source, HasSubstr("gptq 4-bit group " + std::to_string(c.group)));
  et::export_ok(options_for(ExportSource::kCheckpoint, f32_dir));
  const Program quantized = et::load_ok(gptq_dir + "/program.gguf");
  const Program reference = et::load_ok(f32_dir + "/program.gguf");
  for (const char* tensor :
       {"blk.0.attn_q.weight", "blk.1.attn_k.weight", "blk.1.ffn_down.weight"}) {
    EXPECT_EQ(quantized.file().find_tensor(tensor)->type, c.expected_type) << tensor;
  }
  EXPECT_EQ(quantized.file().find_tensor("token_embd.weight")->type, TensorType::kF16);
  EXPECT_EQ(quantized.file().find_tensor("blk.0.attn_norm.weight")->type, TensorType::kF32);

  const std::vector<int32_t> prompt = {1, 17, 300, 42, 99, 256, 7, 401};
  const testing::GreedyRun a = et::greedy(quantized, prompt, 12);
  const testing::GreedyRun b = et::greedy(reference, prompt, 12);
  EXPECT_EQ(a.tokens, b.tokens);
  const float diff = testing::max_abs_diff(a.logits, b.logits);
  EXPECT_LE(diff, 1e-4f);
  // The weights matter: logits are far from zero and vary.
  EXPECT_GT(*std::max_element(b.logits.begin(), b.logits.end()), 0.5f);
}

INSTANTIATE_TEST_SUITE_P(Layouts, ExportGptqTest,
                         ::testing::Values(GptqCase{32, true, false, TensorType::kQ4_0},
                                           GptqCase{32, false, false, TensorType::kQ4_G32},
                                           GptqCase{64, true, false, TensorType::kQ4_G64},
                                           GptqCase{64, false, false, TensorType::kQ4_G64},
                                           GptqCase{128, true, false, TensorType::kQ4_G128},
                                           GptqCase{128, false, false, TensorType::kQ4_G128},
                                           GptqCase{32, false, true, TensorType::kQ4_G32}),
                         [](const auto& info) {
                           const GptqCase& c = info.param;
                           return "Group" + std::to_string(c.group) + (c.sym ? "Sym" : "Asym") +
                                  (c.v2 ? "V2" : "");
                         });

TEST(ExportGptqErrorsTest, UnsupportedSettingsAreOneLineErrorsNamingThem) {
  const GptqCase c{64, false, false, TensorType::kQ4_G64};
  const std::string dir = et::fresh_dir("gptq_errors"), f32_dir = et::fresh_dir("gptq_errors_f32");
  write_checkpoints(c, dir, f32_dir);
  const ExportOptions options = options_for(ExportSource::kPrequantized, dir);
  const auto error = [&](const ExportOptions& o) {
    StatusOr<ExportReport> report = export_program(o);
    EXPECT_FALSE(report.ok());
    EXPECT_TRUE(et::nothing_left(o.output));
    EXPECT_EQ(report.status().message().find('\n'), std::string::npos);
    return report.status().message();
  };
  // A GPTQ checkpoint given as a plain one.
  EXPECT_THAT(error(options_for(ExportSource::kCheckpoint, dir)),
              HasSubstr("export it with --prequantized"));
  // A plain checkpoint given as prequantized.
  EXPECT_THAT(error(options_for(ExportSource::kPrequantized, f32_dir)),
              HasSubstr("not a GPTQ checkpoint"));
  for (const auto& [key, value, expected] :
       {std::tuple<std::string, Json, std::string>{"desc_act", true, "act-order"},
        {"bits", 8, "'bits' = 8"},
        {"group_size", 16, "'group_size' = 16"},
        {"checkpoint_format", "marlin", "checkpoint_format 'marlin'"}}) {
    Json json = config(&c);
    json["quantization_config"][key] = value;
    ASSERT_TRUE(st::write_text(dir + "/config.json", json.dump()));
    EXPECT_THAT(error(options), HasSubstr(expected)) << key;
  }
  // g_idx that reorders the groups (act-order without the flag) is refused too.
  ASSERT_TRUE(st::write_text(dir + "/config.json", config(&c).dump()));
  std::ifstream in(dir + "/model.safetensors", std::ios::binary);
  std::vector<uint8_t> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  StatusOr<SafetensorsFile> file = SafetensorsFile::parse(bytes);
  ASSERT_TRUE(file.ok());
  const SafetensorsTensor* g_idx = file->find("model.layers.1.mlp.up_proj.g_idx");
  ASSERT_NE(g_idx, nullptr);
  const int32_t last_group = 1;
  std::memcpy(bytes.data() + (g_idx->data.data() - bytes.data()), &last_group, 4);
  ASSERT_TRUE(st::write_file(dir + "/model.safetensors", bytes));
  EXPECT_THAT(error(options),
              HasSubstr("'model.layers.1.mlp.up_proj.g_idx' reorders the groups (act-order)"));
}

TEST(ExportGptqErrorsTest, DeeplyNestedSettingsAreRefusedWithAnErrorNamingTheFile) {
  const std::string deep = std::string(10000, '[') + std::string(10000, ']');
  const std::string dir = et::fresh_dir("gptq_deep");
  // config.json's quantization_config, then quantize_config.json (read first when present).
  for (const std::string file : {"config.json", "quantize_config.json"}) {
    ASSERT_TRUE(st::write_text(dir + "/" + file, deep));
    StatusOr<GptqConfig> settings = GptqConfig::from_dir(dir);
    ASSERT_FALSE(settings.ok()) << file;
    EXPECT_THAT(settings.status().message(),
                HasSubstr(dir + "/" + file + ": JSON nests deeper than 64 levels"));
    EXPECT_EQ(settings.status().message().find('\n'), std::string::npos);
  }
  // Text that is not JSON is a Status too, not an exception.
  ASSERT_TRUE(st::write_text(dir + "/quantize_config.json", "{\"bits\": 4,"));
  StatusOr<GptqConfig> settings = GptqConfig::from_dir(dir);
  ASSERT_FALSE(settings.ok());
  EXPECT_THAT(settings.status().message(),
              HasSubstr(dir + "/quantize_config.json: not valid JSON"));
}

}  // namespace
}  // namespace cellm
