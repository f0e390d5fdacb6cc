// ModelWeights: the weight table of a decoder-only transformer, as typed views into GGUF bytes.
//
// `ModelWeights::from_gguf(file, config)` finds every tensor the architecture needs, checks its
// shape against the config and its type against what cellm can compute with, and returns views
// (type, dims, bytes) into the file's mapping — no copies. A missing tensor, a wrong shape or an
// unsupported type is an error naming the tensor; so are a bias or q/k norm on some layers only
// (layer 0 decides, as in ModelConfig), a layer tensor past the block count, and a rope factor
// that is not a positive normal float. phi3 files hold q|k|v as one `attn_qkv` matrix (or apart,
// as llama.cpp accepts) and gate|up as one `ffn_up` matrix of 2 · ffn rows, gate first: their
// views are row ranges of those tensors. gemma3 adds `post_attention_norm` and `post_ffw_norm`
// per layer (every layer or, elsewhere, none). The views live as long as the GgufFile's
// mapping (keep the file alive; moving it is fine). Backends read weights only through this table.
// Thread-safety: immutable plain data.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "gguf/gguf_file.h"
#include "gguf/tensor_type.h"
#include "model/model_config.h"

namespace cellm {

// A 1-D or 2-D weight. A matrix of `num_rows` rows of `num_cols` elements maps num_cols inputs
// to num_rows outputs (GGUF dims {num_cols, num_rows}); a vector has num_rows == 1.
struct WeightView {
  std::string name;
  TensorType type = TensorType::kF32;
  int64_t num_cols = 0;
  int64_t num_rows = 0;
  uint64_t row_bytes = 0;          // bytes of one row in `type`
  std::span<const uint8_t> bytes;  // [num_rows, row_bytes]

  bool present() const { return !bytes.empty(); }
  std::span<const uint8_t> row(int64_t index) const {
    return bytes.subspan(static_cast<size_t>(index) * row_bytes, row_bytes);
  }
};

struct LayerWeights {
  WeightView attn_norm;       // [hidden]
  WeightView wq;              // [q_width rows, hidden cols]
  WeightView wk;              // [kv_width, hidden]
  WeightView wv;              // [v_width, hidden]
  WeightView wo;              // [hidden, num_heads * value_head_dim]
  WeightView q_bias;          // [q_width] f32, absent unless config.has_qkv_bias
  WeightView k_bias;          // [kv_width]
  WeightView v_bias;          // [v_width]
  WeightView q_norm;          // [head_dim], absent unless config.has_qk_norm
  WeightView k_norm;          // [head_dim]
  WeightView ffn_norm;        // [hidden]
  WeightView post_attn_norm;  // [hidden], absent unless config.has_post_norms (gemma3)
  WeightView post_ffn_norm;   // [hidden], likewise
  WeightView w_gate;          // [ffn, hidden]
  WeightView w_up;            // [ffn, hidden]
  WeightView w_down;          // [hidden, ffn]
};

struct ModelWeights {
  WeightView token_embd;   // [vocab rows, hidden cols]
  WeightView output_norm;  // [hidden]
  WeightView output;       // [vocab, hidden]; the token_embd view when embeddings are tied
  // [num_rotary_dims / 2] f32 divisors in use, absent unless config.rope.has_freq_factors:
  // llama3's rope_freqs, or phi3's short LongRoPE factors until use_long_rope_factors().
  WeightView rope_freqs;
  WeightView rope_factors_long;  // phi3 LongRoPE: [num_rotary_dims / 2] f32, absent otherwise
  std::vector<LayerWeights> layers;

  static StatusOr<ModelWeights> from_gguf(const GgufFile& file, const ModelConfig& config);

  // phi3 LongRoPE: the long factors become rope_freqs (a program serving more than
  // config.rope.long_factors_above_context positions; Program::from_file decides).
  void use_long_rope_factors();
  bool uses_long_rope_factors() const {
    return rope_factors_long.present() && rope_freqs.bytes.data() == rope_factors_long.bytes.data();
  }

  // Every view, for uploads and byte counts (absent optional views are skipped).
  std::vector<const WeightView*> all() const;
  uint64_t total_bytes() const;
};

}  // namespace cellm
