// Test helpers of the export suites that need no backend: fresh temp folders, export and load
// with failures reported, and a writer that
// turns a GGUF llama model (stories260K) into a Hugging Face checkpoint — config.json, sharded
// safetensors in HF layout (the inverse of llama.cpp's Q/K row permutation, written here
// independently), tokenizer.json (SentencePiece-style BPE with byte fallback, merges derived from
// the scores as transformers' converter does) and tokenizer_config.json. Header-only: each suite
// is its own binary. export_test_support.h adds the CPU executor helpers.
// Thread-safety: test code, one thread.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "model/safetensors_test_util.h"
#include "program/exporter.h"
#include "program/hf_tokenizer_test_util.h"
#include "program/program.h"
#include "test_models.h"

namespace cellm::export_testing {

namespace st = safetensors_testing;
using Json = nlohmann::json;

// Folders made by fresh_dir, removed when the test binary exits.
struct TempDirs {
  std::vector<std::string> dirs;
  ~TempDirs() {
    std::error_code error;
    for (const std::string& dir : dirs) std::filesystem::remove_all(dir, error);
  }
};
inline TempDirs& temp_dirs() {
  static TempDirs dirs;
  return dirs;
}

// An empty folder under the test temp dir, unique to `name` and this process (suites of several
// build folders may run at once).
inline std::string fresh_dir(const std::string& name) {
  const std::string dir =
      ::testing::TempDir() + "cellm_export_" + std::to_string(::getpid()) + "_" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  temp_dirs().dirs.push_back(dir);
  return dir;
}

inline bool exists(const std::string& path) { return std::filesystem::exists(path); }

// True when neither `output` nor the exporter's temporary files exist.
inline bool nothing_left(const std::string& output) {
  return !exists(output) && !exists(output + ".partial") && !exists(output + ".partial.tmp");
}

inline Program load_ok(const std::string& path) {
  StatusOr<Program> program = Program::load(path);
  if (!program.ok()) {
    ADD_FAILURE() << program.status().to_string();
    std::abort();
  }
  return std::move(program).value();
}

inline ExportReport export_ok(const ExportOptions& options) {
  StatusOr<ExportReport> report = export_program(options);
  if (!report.ok()) {
    ADD_FAILURE() << report.status().to_string();
    std::abort();
  }
  return std::move(report).value();
}

// An F32 tensor of a GGUF file as floats (GGUF order: rows of dims[0]).
inline std::vector<float> tensor_f32(const GgufFile& file, const std::string& name) {
  const GgufTensorInfo* info = file.find_tensor(name);
  EXPECT_NE(info, nullptr) << name;
  EXPECT_EQ(info->type, TensorType::kF32) << name;
  const std::span<const uint8_t> bytes = file.tensor_data(*info);
  std::vector<float> values(bytes.size() / 4);
  std::memcpy(values.data(), bytes.data(), bytes.size());
  return values;
}

// GGUF llama rows (adjacent rotary pairs) back to HF rows (rotate-half): HF row h*d + t*d/2 + j
// is GGUF row h*d + 2j + t.
inline std::vector<float> unpermute_rows(const std::vector<float>& gguf, int64_t num_heads,
                                         int64_t num_cols) {
  const int64_t num_rows = static_cast<int64_t>(gguf.size()) / num_cols;
  const int64_t d = num_rows / num_heads;
  std::vector<float> hf(gguf.size());
  for (int64_t g = 0; g < num_rows; ++g) {
    const int64_t h = g / d, j = (g % d) / 2, t = g % 2;
    const int64_t r = h * d + t * (d / 2) + j;
    std::copy_n(gguf.begin() + g * num_cols, num_cols, hf.begin() + r * num_cols);
  }
  return hf;
}

struct HfWriteOptions {
  std::string dtype = "F32";  // F32, F16 or BF16 for every tensor
  int num_shards = 2;         // 1 writes model.safetensors without an index
  bool tokenizer = true;
};

// (HF name, tensor) pairs of a GGUF llama model in HF layout and dtype.
inline std::vector<st::TensorBytes> hf_tensors(const GgufFile& model, const std::string& dtype) {
  const int64_t heads = *model.get_u32("llama.attention.head_count");
  const int64_t kv_heads = *model.get_u32("llama.attention.head_count_kv");
  const int64_t layers = *model.get_u32("llama.block_count");
  std::vector<st::TensorBytes> out;
  const auto add = [&](const std::string& hf, const std::string& gguf, int64_t permute_heads) {
    const GgufTensorInfo* info = model.find_tensor(gguf);
    std::vector<float> values = tensor_f32(model, gguf);
    std::vector<uint64_t> shape = {info->dim(0)};
    if (info->dims.size() == 2) shape = {info->dims[1], info->dims[0]};
    if (permute_heads > 0) values = unpermute_rows(values, permute_heads, info->dims[0]);
    std::vector<uint8_t> bytes = dtype == "BF16"  ? st::bf16_bytes(values)
                                 : dtype == "F16" ? st::f16_bytes(values)
                                                  : st::f32_bytes(values);
    out.push_back({hf, dtype, shape, std::move(bytes)});
  };
  add("model.embed_tokens.weight", "token_embd.weight", 0);
  for (int64_t i = 0; i < layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    const std::string g = "blk." + std::to_string(i) + ".";
    add(p + "input_layernorm.weight", g + "attn_norm.weight", 0);
    add(p + "self_attn.q_proj.weight", g + "attn_q.weight", heads);
    add(p + "self_attn.k_proj.weight", g + "attn_k.weight", kv_heads);
    add(p + "self_attn.v_proj.weight", g + "attn_v.weight", 0);
    add(p + "self_attn.o_proj.weight", g + "attn_output.weight", 0);
    add(p + "post_attention_layernorm.weight", g + "ffn_norm.weight", 0);
    add(p + "mlp.gate_proj.weight", g + "ffn_gate.weight", 0);
    add(p + "mlp.up_proj.weight", g + "ffn_up.weight", 0);
    add(p + "mlp.down_proj.weight", g + "ffn_down.weight", 0);
  }
  add("model.norm.weight", "output_norm.weight", 0);
  add("lm_head.weight", "output.weight", 0);
  return out;
}

inline Json hf_config(const GgufFile& model) {
  return {{"architectures", {"LlamaForCausalLM"}},
          {"model_type", "llama"},
          {"vocab_size", 512},
          {"hidden_size", *model.get_u32("llama.embedding_length")},
          {"intermediate_size", *model.get_u32("llama.feed_forward_length")},
          {"num_hidden_layers", *model.get_u32("llama.block_count")},
          {"num_attention_heads", *model.get_u32("llama.attention.head_count")},
          {"num_key_value_heads", *model.get_u32("llama.attention.head_count_kv")},
          {"max_position_embeddings", *model.get_u32("llama.context_length")},
          {"rms_norm_eps", *model.get_f32("llama.attention.layer_norm_rms_epsilon")},
          {"rope_theta", 10000.0},
          {"hidden_act", "silu"},
          {"tie_word_embeddings", false},
          {"bos_token_id", 1},
          {"eos_token_id", 2}};
}

// tokenizer.json of an SPM vocabulary (hf_tokenizer_test_util.h's SentencePiece-style BPE with byte
// fallback); merges as transformers' SentencePieceExtractor derives them (every split of a piece
// into two pieces, ordered by the piece's score, best first).
inline Json spm_tokenizer_json(const GgufFile& model) {
  const std::vector<std::string> tokens = *model.get_string_array("tokenizer.ggml.tokens");
  const std::vector<float> scores = *model.get_f32_array("tokenizer.ggml.scores");
  const std::vector<int32_t> types = *model.get_i32_array("tokenizer.ggml.token_type");
  std::map<std::string, int32_t> ids;
  Json vocab = Json::object();
  for (size_t i = 0; i < tokens.size(); ++i) {
    ids[tokens[i]] = static_cast<int32_t>(i);
    vocab[tokens[i]] = i;
  }
  struct Merge {
    std::string left, right;
    float score;
    int32_t left_id, right_id;
  };
  std::vector<Merge> merges;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (types[i] != 1) continue;
    const std::string& piece = tokens[i];
    std::vector<Merge> local;
    for (size_t cut = 1; cut < piece.size(); ++cut) {
      const std::string l = piece.substr(0, cut), r = piece.substr(cut);
      if (ids.count(l) && ids.count(r)) local.push_back({l, r, scores[i], ids[l], ids[r]});
    }
    std::sort(local.begin(), local.end(), [](const Merge& a, const Merge& b) {
      return std::pair(a.left_id, a.right_id) < std::pair(b.left_id, b.right_id);
    });
    merges.insert(merges.end(), local.begin(), local.end());
  }
  std::stable_sort(merges.begin(), merges.end(),
                   [](const Merge& a, const Merge& b) { return a.score > b.score; });
  Json merge_list = Json::array();
  for (const Merge& m : merges) merge_list.push_back(m.left + " " + m.right);
  for (const auto& [id, piece] :
       {std::pair<size_t, const char*>{0, "<unk>"}, {1, "<s>"}, {2, "</s>"}}) {
    EXPECT_EQ(tokens[id], piece) << "spm_bpe_tokenizer_json names ids 0, 1, 2 so";
  }
  return hf_tokenizer_testing::spm_bpe_tokenizer_json(std::move(vocab), std::move(merge_list));
}

inline const char* kChatTemplate = "{% for m in messages %}{{ m['content'] }}{% endfor %}";

// Writes `model` (a GGUF llama with a SentencePiece vocabulary) as an HF checkpoint in `dir`.
inline void write_hf_checkpoint(const GgufFile& model, const std::string& dir,
                                const HfWriteOptions& options = {}) {
  ASSERT_TRUE(st::write_text(dir + "/config.json", hf_config(model).dump(1)));
  const std::vector<st::TensorBytes> tensors = hf_tensors(model, options.dtype);
  if (options.num_shards <= 1) {
    ASSERT_TRUE(st::write_file(dir + "/model.safetensors", st::build(tensors, {{"format", "pt"}})));
  } else {
    Json weight_map = Json::object();
    const size_t per_shard = (tensors.size() + options.num_shards - 1) / options.num_shards;
    for (int s = 0; s < options.num_shards; ++s) {
      const std::string name = "model-0000" + std::to_string(s + 1) + "-of-0000" +
                               std::to_string(options.num_shards) + ".safetensors";
      const size_t begin = static_cast<size_t>(s) * per_shard;
      const size_t end = std::min(tensors.size(), begin + per_shard);
      const std::vector<st::TensorBytes> shard(tensors.begin() + static_cast<ptrdiff_t>(begin),
                                               tensors.begin() + static_cast<ptrdiff_t>(end));
      for (const st::TensorBytes& t : shard) weight_map[t.name] = name;
      ASSERT_TRUE(st::write_file(dir + "/" + name, st::build(shard, {{"format", "pt"}})));
    }
    ASSERT_TRUE(
        st::write_text(dir + "/model.safetensors.index.json",
                       Json{{"metadata", Json::object()}, {"weight_map", weight_map}}.dump(1)));
  }
  if (!options.tokenizer) return;
  ASSERT_TRUE(st::write_text(dir + "/tokenizer.json", spm_tokenizer_json(model).dump()));
  const Json tokenizer_config = {{"add_bos_token", true},   {"add_eos_token", false},
                                 {"bos_token", "<s>"},      {"eos_token", "</s>"},
                                 {"unk_token", "<unk>"},    {"chat_template", kChatTemplate},
                                 {"model_max_length", 2048}};
  ASSERT_TRUE(st::write_text(dir + "/tokenizer_config.json", tokenizer_config.dump(1)));
}

}  // namespace cellm::export_testing

namespace cellm {

// The short names every export suite uses (test code only).
namespace et = export_testing;
namespace st = safetensors_testing;
using Json = nlohmann::json;

}  // namespace cellm
