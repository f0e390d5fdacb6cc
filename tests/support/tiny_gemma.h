// tiny-gemma3 and tiny-gemma2: a Gemma3ForCausalLM and a Gemma2ForCausalLM checkpoint made at
// test time from ../shared/models/arch/tiny-qwen3-hf (its attention, MLP and tied embeddings;
// tiny-gemma3 keeps its q/k norms, Gemma 2 has none) under a Gemma config — embeddings scaled by
// sqrt(hidden), GELU (tanh) gating, norms after the attention and the MLP, norms scaling by 1 + w,
// a 5-position window on layer 0 and full attention on layer 1, query_pre_attn_scalar 24;
// tiny-gemma3 with rope base 10000 on the windowed layer and 1e6 scaled linearly by 8 on the
// global one, tiny-gemma2 with base 10000 on both and its scores and logits soft-capped at 4 and
// 6 — and HF transformers' float64 references for them (tiny_gemma3_reference.inc,
// tiny_gemma2_reference.inc, written by tests/tools/gen_tiny_gemma{3,2}_reference.py, which
// derive the four norms of each layer from tiny-qwen3's two the same way, in f32). No model is
// committed: only the configs and the reference tokens and logits. Used by the CPU export suites
// (tests/export_gemma{3,2}_test.cpp) and the CUDA reference suite. Header-only: each suite is its
// own binary. Thread-safety: test code, one thread.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/safetensors_file.h"
#include "model/safetensors_test_util.h"
#include "program/exporter.h"
#include "reference_case.h"
#include "test_models.h"

namespace cellm::testing {

// The generators' documents: config (as published checkpoints write it), config_v5 (as
// transformers 5 writes it back), cases.
inline const nlohmann::json& tiny_gemma3_reference() {
  static const nlohmann::json reference = nlohmann::json::parse(
#include "tiny_gemma3_reference.inc"
  );
  return reference;
}
inline const nlohmann::json& tiny_gemma2_reference() {
  static const nlohmann::json reference = nlohmann::json::parse(
#include "tiny_gemma2_reference.inc"
  );
  return reference;
}

// Writes config.json (`config` of the reference, or `config_override`) and model.safetensors of
// tiny-gemma3 into `dir` (created). `text_prefix` replaces the weights' "model." (a multimodal
// checkpoint's "language_model.model." or "model.language_model."); `vision_tensors` adds two
// tensors of a vision tower and its projector, as such a checkpoint has; without `qk_norms` the
// q/k norms are left out (tiny-gemma2's weights).
inline void write_tiny_gemma3_checkpoint(const std::string& dir,
                                         const nlohmann::json* config_override = nullptr,
                                         const std::string& text_prefix = "model.",
                                         bool vision_tensors = false, bool qk_norms = true) {
  namespace st = safetensors_testing;
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/config.json")
      << (config_override != nullptr ? *config_override : tiny_gemma3_reference().at("config"))
             .dump(1);
  StatusOr<SafetensorsFile> qwen3 =
      SafetensorsFile::open(test_model_path("arch/tiny-qwen3-hf/model.safetensors"));
  ASSERT_TRUE(qwen3.ok()) << qwen3.status().to_string();
  const auto values_of = [&](const std::string& name) {
    const SafetensorsTensor* t = qwen3->find(name);
    EXPECT_NE(t, nullptr) << name;
    std::vector<float> values;
    if (t == nullptr) return values;
    EXPECT_EQ(t->dtype, SafetensorsDtype::kF32) << name;
    values.resize(t->data.size() / sizeof(float));
    std::memcpy(values.data(), t->data.data(), values.size() * sizeof(float));
    return values;
  };
  // f32 arithmetic, element by element, as the generator's torch ops do it.
  const auto shifted = [&](const std::string& name) {
    std::vector<float> v = values_of(name);
    for (float& x : v) x = x - 1.0f;
    return v;
  };
  const auto boosted = [&](const std::string& name) {
    std::vector<float> v = values_of(name);
    for (float& x : v) x = (x - 0.0625f) * 16.0f;
    return v;
  };
  const auto bytes = [](const std::vector<float>& v) {
    std::vector<uint8_t> out(v.size() * sizeof(float));
    std::memcpy(out.data(), v.data(), out.size());
    return out;
  };
  std::vector<st::TensorBytes> tensors;
  for (const SafetensorsTensor& t : qwen3->tensors()) {
    const std::string& name = t.name;
    if (name.ends_with("layernorm.weight")) continue;  // the four layer norms are made below
    if (!qk_norms && (name.ends_with("q_norm.weight") || name.ends_with("k_norm.weight"))) continue;
    const bool norm = name.ends_with("_norm.weight") || name == "model.norm.weight";
    tensors.push_back({name, "F32", t.shape, norm ? bytes(shifted(name)) : bytes(values_of(name))});
  }
  constexpr int kLayers = 2;
  for (int i = 0; i < kLayers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    const std::string q = "model.layers." + std::to_string((i + 1) % kLayers) + ".";
    const std::vector<uint64_t> shape = {64};
    tensors.push_back(
        {p + "input_layernorm.weight", "F32", shape, bytes(shifted(p + "input_layernorm.weight"))});
    tensors.push_back({p + "post_attention_layernorm.weight", "F32", shape,
                       bytes(boosted(q + "input_layernorm.weight"))});
    tensors.push_back({p + "pre_feedforward_layernorm.weight", "F32", shape,
                       bytes(shifted(p + "post_attention_layernorm.weight"))});
    tensors.push_back({p + "post_feedforward_layernorm.weight", "F32", shape,
                       bytes(boosted(q + "post_attention_layernorm.weight"))});
  }
  for (st::TensorBytes& t : tensors) t.name = text_prefix + t.name.substr(std::strlen("model."));
  if (vision_tensors) {
    const std::vector<float> values(8 * 16, 0.25f);
    tensors.push_back({"vision_tower.vision_model.embeddings.patch_embedding.weight",
                       "F32",
                       {8, 16},
                       bytes(values)});
    tensors.push_back(
        {"multi_modal_projector.mm_input_projection_weight", "F32", {16, 8}, bytes(values)});
  }
  ASSERT_TRUE(st::write_file(dir + "/model.safetensors", st::build(tensors, {{"format", "pt"}})));
}

// tiny-gemma2 (`config` of its reference, or `config_override`) into `dir` (created).
inline void write_tiny_gemma2_checkpoint(const std::string& dir,
                                         const nlohmann::json* config_override = nullptr) {
  write_tiny_gemma3_checkpoint(
      dir, config_override != nullptr ? config_override : &tiny_gemma2_reference().at("config"),
      "model.", false, /*qk_norms=*/false);
}

// Exports the checkpoint in `hf_dir` with stories260K's tokenizer to `output` (W 32).
inline void export_tiny_gemma3(const std::string& hf_dir, const std::string& output,
                               int32_t max_seq_len = 128, ExportQuant quant = ExportQuant::kKeep) {
  export_tiny_checkpoint(hf_dir, output, max_seq_len, quant);
}

}  // namespace cellm::testing
