// HfCheckpoint: a Hugging Face checkpoint directory (config.json + safetensors) seen as the GGUF
// tensors of a llama.cpp-style model — names, shapes and layouts mapped, bytes still in place.
//
// Names follow llama.cpp's converter: model.embed_tokens → token_embd, model.norm → output_norm,
// lm_head → output (dropped when tie_word_embeddings), per layer input_layernorm → attn_norm,
// self_attn.{q,k,v,o}_proj → attn_{q,k,v,output}, q/k/v biases → attn_{q,k,v}.bias,
// q_norm/k_norm → attn_{q,k}_norm, post_attention_layernorm → ffn_norm, mlp.{gate,up,down}_proj
// → ffn_{gate,up,down}; llama3 rope scaling adds rope_freqs.weight (HfConfig). phi3's fused
// self_attn.qkv_proj → attn_qkv and mlp.gate_up_proj → ffn_up (gate rows first), its LongRoPE
// lists → rope_factors_short / rope_factors_long, as llama.cpp's converter writes them. gemma2's
// and gemma3's pre_feedforward_layernorm → ffn_norm, their post_attention_layernorm →
// post_attention_norm and post_feedforward_layernorm → post_ffw_norm, and every gemma norm
// (gemma3's q/k norms too) is stored as 1 + w, as llama.cpp's converter stores it (Gemma's RMSNorm
// scales by 1 + w). A Gemma 3 multimodal checkpoint's text model is read from
// language_model.model.* (or model.language_model.*); its vision tower and projector are left out.
// An HF [out, in] matrix becomes GGUF dims {in, out}, rows unchanged except for the llama/mistral
// Q/K row permutation (new row h·d + 2j + t = old row h·d + t·d/2 + j, per head: GGUF llama's RoPE
// pairs adjacent dims where HF rotates halves); qwen2/qwen3 are not permuted. Every tensor the
// architecture needs must be present with its exact shape and a dtype of F32, F16 or BF16 (or,
// for a prequantized checkpoint, a GPTQ linear: gptq.h); a tensor that maps to nothing is an
// error too (rotary_emb.inv_freq buffers are skipped). Errors name the file, the HF tensor and the
// expected shape. Reading is one row at a time (read_row_f32 / repack_row), so an exporter holds
// one tensor at a time. Thread-safety: immutable after open; reads from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "gguf/tensor_type.h"
#include "model/gptq.h"
#include "model/hf_config.h"
#include "model/safetensors_set.h"

namespace cellm {

// One GGUF tensor of the model, and where its rows come from.
struct CheckpointTensor {
  std::string gguf_name;   // "blk.0.attn_q.weight"
  std::string hf_name;     // "model.layers.0.self_attn.q_proj.weight", or the GPTQ prefix
  int64_t num_rows = 1;    // GGUF rows (HF dim 0 of a matrix); 1 for a vector
  int64_t num_cols = 0;    // elements per row
  bool is_matrix = false;  // a 2-D weight (may be quantized); vectors stay f32
  TensorType source_type = TensorType::kF32;  // F32/F16/BF16, or the GPTQ repack type
  const SafetensorsTensor* source = nullptr;  // null for computed and GPTQ tensors
  std::vector<float> values;                  // computed tensors (rope_freqs): [num_cols], f32
  int32_t permute_heads = 0;  // > 0: the llama Q/K row permutation over this many heads
  float value_shift = 0.0f;   // added to every value read (gemma norms: HF w, GGUF 1 + w)
  std::optional<GptqLinear> gptq;

  // GGUF dims, innermost first: {num_cols, num_rows} or {num_cols}.
  std::vector<uint64_t> dims() const;
  // The checkpoint row that GGUF row `row` comes from.
  int64_t source_row(int64_t row) const;
};

class HfCheckpoint {
 public:
  // `prequantized`: linear weights may be GPTQ (settings from GptqConfig::from_dir).
  static StatusOr<HfCheckpoint> open(const std::string& dir, bool prequantized);

  HfCheckpoint(HfCheckpoint&&) noexcept = default;
  HfCheckpoint& operator=(HfCheckpoint&&) noexcept = default;

  const std::string& dir() const { return dir_; }
  const HfConfig& config() const { return config_; }
  const SafetensorsSet& weights() const { return weights_; }
  const std::vector<CheckpointTensor>& tensors() const { return tensors_; }
  const std::optional<GptqConfig>& gptq_config() const { return gptq_config_; }

  // GGUF row `row` of `tensor` as f32 (permutation applied, dtype widened, GPTQ dequantized):
  // out [tensor.num_cols].
  static void read_row_f32(const CheckpointTensor& tensor, int64_t row, std::span<float> out);

 private:
  HfCheckpoint() = default;
  Status map_tensors();
  Status add_matrix(const std::string& gguf_name, const std::string& hf_prefix, int64_t rows,
                    int64_t cols, int32_t permute_heads, bool required);
  Status add_vector(const std::string& gguf_name, const std::string& hf_name, int64_t size,
                    bool required);
  Status check_source(const std::string& hf_name, const SafetensorsTensor& tensor,
                      const std::vector<uint64_t>& shape, CheckpointTensor* out);

  std::string dir_;
  HfConfig config_;
  SafetensorsSet weights_;
  std::optional<GptqConfig> gptq_config_;
  std::vector<CheckpointTensor> tensors_;  // in GGUF file order
  std::vector<std::string> used_;          // HF tensor names consumed (sorted at the end)
};

}  // namespace cellm
