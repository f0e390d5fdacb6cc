// check_weights (program_test_support.h): every weight view of an accepted model against the
// tensor it names, split from program_test_support.cpp.
#include <fmt/format.h>

#include <optional>
#include <string>
#include <vector>

#include "program/program_test_support.h"

namespace cellm::program_testing {
namespace {

std::string check_view(const GgufFile& file, const WeightView& view, const std::string& name,
                       int64_t num_cols, int64_t num_rows, bool required) {
  const GgufTensorInfo* info = file.find_tensor(name);
  if (info == nullptr) {
    if (required) return "accepted a model without tensor '" + name + "'";
    if (view.present()) return "view of absent tensor '" + name + "' is present";
    return "";
  }
  if (!required) return "accepted tensor '" + name + "' on a model without its kind";
  if (!view.present() && info->size_bytes > 0) return "tensor '" + name + "' is not bound";
  const bool is_vector = num_rows == 1;
  const std::vector<uint64_t> expected_dims =
      is_vector
          ? std::vector<uint64_t>{static_cast<uint64_t>(num_cols)}
          : std::vector<uint64_t>{static_cast<uint64_t>(num_cols), static_cast<uint64_t>(num_rows)};
  if (info->dims != expected_dims) {
    return fmt::format("tensor '{}' of shape {} accepted for {}x{}", name, info->shape_string(),
                       num_cols, num_rows);
  }
  const std::optional<TensorTypeTraits> traits =
      tensor_type_traits(static_cast<uint32_t>(info->type));
  if (!traits || !traits->can_dequantize) return "tensor '" + name + "' of an uncomputable type";
  if (is_vector && info->type != TensorType::kF32) return "vector '" + name + "' is not f32";
  if (view.name != name || view.type != info->type || view.num_cols != num_cols ||
      view.num_rows != num_rows) {
    return "view of '" + name + "' disagrees with the tensor";
  }
  const uint64_t row_bytes =
      static_cast<uint64_t>(num_cols) / traits->block_size * traits->block_bytes;
  if (static_cast<uint64_t>(num_cols) % traits->block_size != 0 || view.row_bytes != row_bytes ||
      view.bytes.size() != row_bytes * static_cast<uint64_t>(num_rows) ||
      view.bytes.data() != file.tensor_data(*info).data() ||
      view.bytes.size() != info->size_bytes) {
    return "view of '" + name + "' is not the tensor's bytes";
  }
  return "";
}

// `view` is rows [first_row, first_row + num_rows) of the fused matrix `name` (phi3's attn_qkv
// and ffn_up), which has `fused_rows` rows of `num_cols`.
std::string check_row_range(const GgufFile& file, const WeightView& view, const std::string& name,
                            int64_t num_cols, int64_t fused_rows, int64_t first_row,
                            int64_t num_rows) {
  const GgufTensorInfo* info = file.find_tensor(name);
  if (info == nullptr) return "accepted a model without tensor '" + name + "'";
  if (info->dims !=
      std::vector<uint64_t>{static_cast<uint64_t>(num_cols), static_cast<uint64_t>(fused_rows)}) {
    return fmt::format("tensor '{}' of shape {} accepted for {}x{}", name, info->shape_string(),
                       num_cols, fused_rows);
  }
  const std::span<const uint8_t> bytes = file.tensor_data(*info);
  const uint64_t row_bytes = info->size_bytes / static_cast<uint64_t>(fused_rows);
  if (view.type != info->type || view.num_cols != num_cols || view.num_rows != num_rows ||
      view.row_bytes != row_bytes ||
      view.bytes.data() != bytes.data() + static_cast<uint64_t>(first_row) * row_bytes ||
      view.bytes.size() != static_cast<uint64_t>(num_rows) * row_bytes) {
    return fmt::format("view of rows {}..{} of '{}' is not those rows", first_row,
                       first_row + num_rows, name);
  }
  return "";
}

}  // namespace

std::string check_weights(const GgufFile& file, const ModelConfig& c, const ModelWeights& w) {
  const int64_t hidden = c.hidden_size;
  const int64_t q = int64_t{c.num_heads} * c.head_dim;
  const int64_t kv = int64_t{c.num_kv_heads} * c.head_dim;
  const int64_t v = int64_t{c.num_kv_heads} * c.value_head_dim;
  const int64_t o = int64_t{c.num_heads} * c.value_head_dim;
  std::string problem =
      check_view(file, w.token_embd, "token_embd.weight", hidden, c.vocab_size, true);
  if (problem.empty()) {
    problem = check_view(file, w.output_norm, "output_norm.weight", hidden, 1, true);
  }
  if (problem.empty() && !c.tied_embeddings) {
    problem = check_view(file, w.output, "output.weight", hidden, c.vocab_size, true);
  }
  if (c.tied_embeddings && w.output.bytes.data() != w.token_embd.bytes.data()) {
    return "tied LM head is not the embedding";
  }
  const bool phi3 = c.architecture == Architecture::kPhi3;
  const bool long_rope = c.rope.long_factors_above_context > 0;
  if (problem.empty() && c.rope.has_freq_factors) {
    problem = check_view(file, w.rope_freqs,
                         !long_rope                   ? "rope_freqs.weight"
                         : w.uses_long_rope_factors() ? "rope_factors_long.weight"
                                                      : "rope_factors_short.weight",
                         c.rope.num_rotary_dims / 2, 1, true);
    for (size_t i = 0; problem.empty() && i < w.rope_freqs.bytes.size() / 4; ++i) {
      float factor = 0.0f;
      std::memcpy(&factor, w.rope_freqs.bytes.data() + 4 * i, 4);
      if (!std::isnormal(factor) || !(factor > 0.0f)) {
        problem = fmt::format("rope factor {} accepted at index {}", factor, i);
      }
    }
  }
  if (!problem.empty()) return problem;
  if (w.layers.size() != static_cast<size_t>(c.num_layers)) return "one weight set per layer";
  for (const GgufTensorInfo& info : file.tensors()) {
    const std::string past = fmt::format("blk.{}.", c.num_layers);
    if (info.name.starts_with(past))
      return "accepted tensor '" + info.name + "' past the last layer";
  }
  for (int32_t i = 0; i < c.num_layers; ++i) {
    const LayerWeights& l = w.layers[static_cast<size_t>(i)];
    const std::string p = fmt::format("blk.{}.", i);
    const struct {
      const WeightView& view;
      const char* name;
      int64_t cols, rows;
      bool required;
    } views[] = {
        {l.attn_norm, "attn_norm.weight", hidden, 1, true},
        {l.wq, "attn_q.weight", hidden, q, true},
        {l.wk, "attn_k.weight", hidden, kv, true},
        {l.wv, "attn_v.weight", hidden, v, true},
        {l.wo, "attn_output.weight", o, hidden, true},
        {l.q_bias, "attn_q.bias", q, 1, c.has_qkv_bias},
        {l.k_bias, "attn_k.bias", kv, 1, c.has_qkv_bias},
        {l.v_bias, "attn_v.bias", v, 1, c.has_qkv_bias},
        {l.q_norm, "attn_q_norm.weight", c.head_dim, 1, c.has_qk_norm},
        {l.k_norm, "attn_k_norm.weight", c.head_dim, 1, c.has_qk_norm},
        {l.ffn_norm, "ffn_norm.weight", hidden, 1, true},
        {l.post_attn_norm, "post_attention_norm.weight", hidden, 1, c.has_post_norms},
        {l.post_ffn_norm, "post_ffw_norm.weight", hidden, 1, c.has_post_norms},
        {l.w_gate, "ffn_gate.weight", hidden, c.ffn_size, true},
        {l.w_up, "ffn_up.weight", hidden, c.ffn_size, true},
        {l.w_down, "ffn_down.weight", c.ffn_size, hidden, true},
    };
    const bool fused_qkv = phi3 && file.find_tensor(p + "attn_qkv.weight") != nullptr;
    for (const auto& e : views) {
      const std::string_view name = e.name;
      if ((fused_qkv &&
           (name == "attn_q.weight" || name == "attn_k.weight" || name == "attn_v.weight")) ||
          (phi3 && (name == "ffn_gate.weight" || name == "ffn_up.weight"))) {
        continue;  // row ranges of a fused tensor: below
      }
      problem = check_view(file, e.view, p + e.name, e.cols, e.rows, e.required);
      if (!problem.empty()) return problem;
    }
    if (fused_qkv) {
      const int64_t rows = q + kv + v;
      problem = check_row_range(file, l.wq, p + "attn_qkv.weight", hidden, rows, 0, q);
      if (problem.empty()) {
        problem = check_row_range(file, l.wk, p + "attn_qkv.weight", hidden, rows, q, kv);
      }
      if (problem.empty()) {
        problem = check_row_range(file, l.wv, p + "attn_qkv.weight", hidden, rows, q + kv, v);
      }
    }
    if (problem.empty() && phi3) {
      const int64_t rows = 2 * int64_t{c.ffn_size};
      problem = check_row_range(file, l.w_gate, p + "ffn_up.weight", hidden, rows, 0, c.ffn_size);
      if (problem.empty()) {
        problem = check_row_range(file, l.w_up, p + "ffn_up.weight", hidden, rows, c.ffn_size,
                                  c.ffn_size);
      }
      if (problem.empty() && file.find_tensor(p + "ffn_gate.weight") != nullptr) {
        problem = "accepted a phi3 layer with ffn_gate.weight";
      }
    }
    if (!problem.empty()) return problem;
  }
  return "";
}

}  // namespace cellm::program_testing
