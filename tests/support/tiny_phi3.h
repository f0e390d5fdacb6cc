// tiny-phi3: a Phi3ForCausalLM checkpoint made at test time from ../shared/models/arch/
// tiny-mistral-hf (q|k|v fused into qkv_proj, gate|up into gate_up_proj — Phi-3's layout) under
// a config with LongRoPE, a partial rotary head and a sliding window, and HF transformers' float64
// references for it (tiny_phi3_reference.inc, written by tests/tools/gen_tiny_phi3_reference.py,
// which fuses the same tensors the same way). No model is committed: only the config and the
// reference tokens and logits. Two variants: "short" (a program serving at most the original 64
// positions: the short factors) and "long" (more: the long factors). Used by the CPU export suite
// (tests/export_phi3_test.cpp) and the CUDA reference suite. Header-only: each suite is its own
// binary. Thread-safety: test code, one thread.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cpu_executor_testing.h"
#include "model/safetensors_file.h"
#include "model/safetensors_test_util.h"
#include "program/exporter.h"
#include "reference_case.h"
#include "test_models.h"

namespace cellm::testing {

// The generator's document: config, attention factor, variants with their cases.
inline const nlohmann::json& tiny_phi3_reference() {
  static const nlohmann::json reference = nlohmann::json::parse(
#include "tiny_phi3_reference.inc"
  );
  return reference;
}

// The reference variant named `name` ("short" or "long").
inline const nlohmann::json& tiny_phi3_variant(const std::string& name) {
  for (const nlohmann::json& variant : tiny_phi3_reference().at("variants")) {
    if (variant.at("variant") == name) return variant;
  }
  ADD_FAILURE() << "no tiny-phi3 variant " << name;
  return tiny_phi3_reference().at("variants").at(0);
}

// Writes config.json and model.safetensors of tiny-phi3 into `dir` (created).
inline void write_tiny_phi3_checkpoint(const std::string& dir) {
  namespace st = safetensors_testing;
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/config.json") << tiny_phi3_reference().at("config").dump(1);
  StatusOr<SafetensorsFile> mistral =
      SafetensorsFile::open(test_model_path("arch/tiny-mistral-hf/model.safetensors"));
  ASSERT_TRUE(mistral.ok()) << mistral.status().to_string();
  const auto bytes_of = [&](const std::string& name) {
    const SafetensorsTensor* t = mistral->find(name);
    EXPECT_NE(t, nullptr) << name;
    if (t == nullptr) return std::vector<uint8_t>();
    EXPECT_EQ(t->dtype, SafetensorsDtype::kF32) << name;
    return std::vector<uint8_t>(t->data.begin(), t->data.end());
  };
  const auto rows_of = [&](const std::string& name) {
    const SafetensorsTensor* t = mistral->find(name);
    return t == nullptr ? uint64_t{0} : t->shape.at(0);
  };
  std::vector<st::TensorBytes> tensors;
  for (const SafetensorsTensor& t : mistral->tensors()) {
    const std::string& name = t.name;
    const auto cut = [&](const std::string& part) { return name.substr(0, name.find(part)); };
    if (name.find(".self_attn.q_proj.") != std::string::npos) {
      const std::string p = cut(".self_attn.q_proj.") + ".self_attn.";
      std::vector<uint8_t> fused;
      uint64_t rows = 0;
      for (const char* part : {"q_proj.weight", "k_proj.weight", "v_proj.weight"}) {
        const std::vector<uint8_t> b = bytes_of(p + part);
        fused.insert(fused.end(), b.begin(), b.end());
        rows += rows_of(p + part);
      }
      tensors.push_back({p + "qkv_proj.weight", "F32", {rows, t.shape.at(1)}, fused});
    } else if (name.find(".mlp.gate_proj.") != std::string::npos) {
      const std::string p = cut(".mlp.gate_proj.") + ".mlp.";
      std::vector<uint8_t> fused = bytes_of(p + "gate_proj.weight");
      const std::vector<uint8_t> up = bytes_of(p + "up_proj.weight");
      fused.insert(fused.end(), up.begin(), up.end());
      tensors.push_back(
          {p + "gate_up_proj.weight", "F32", {2 * t.shape.at(0), t.shape.at(1)}, fused});
    } else if (name.find(".k_proj.") == std::string::npos &&
               name.find(".v_proj.") == std::string::npos &&
               name.find(".up_proj.") == std::string::npos) {
      tensors.push_back({name, "F32", t.shape, bytes_of(name)});
    }
  }
  ASSERT_TRUE(st::write_file(dir + "/model.safetensors", st::build(tensors, {{"format", "pt"}})));
}

// Exports the checkpoint in `hf_dir` with stories260K's tokenizer to `output`, serving
// `max_seq_len` positions (W 32: below the short variant's 64).
inline void export_tiny_phi3(const std::string& hf_dir, const std::string& output,
                             int32_t max_seq_len, ExportQuant quant = ExportQuant::kKeep) {
  export_tiny_checkpoint(hf_dir, output, max_seq_len, quant);
}

}  // namespace cellm::testing
