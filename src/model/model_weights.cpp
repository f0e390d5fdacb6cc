#include "model/model_weights.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <cstring>
#include <optional>
#include <utility>

#include "gguf/gguf_text.h"

namespace cellm {
namespace {

enum class Need { kRequired, kOptional };

// Looks up `name`, checks its dims are exactly {num_cols, num_rows} (num_rows 1 = vector) and
// that its type is one cellm computes with; fills `view`.
Status bind_weight(const GgufFile& file, const std::string& name, int64_t num_cols,
                   int64_t num_rows, Need need, WeightView* view) {
  const GgufTensorInfo* info = file.find_tensor(name);
  if (info == nullptr) {
    if (need == Need::kOptional) return ok_status();
    return not_found("tensor '" + name + "' is missing");
  }
  const bool is_vector = num_rows == 1;
  const bool shape_ok =
      is_vector ? (info->dims.size() == 1 && info->dims[0] == static_cast<uint64_t>(num_cols))
                : (info->dims.size() == 2 && info->dims[0] == static_cast<uint64_t>(num_cols) &&
                   info->dims[1] == static_cast<uint64_t>(num_rows));
  if (!shape_ok) {
    const std::string expected =
        is_vector ? fmt::format("{}", num_cols) : fmt::format("{}x{}", num_cols, num_rows);
    return data_loss(
        fmt::format("tensor '{}' has shape {}, expected {}", name, info->shape_string(), expected));
  }
  const TensorTypeTraits& traits = tensor_type_traits(info->type);
  if (!traits.can_dequantize) {
    return unimplemented(
        fmt::format("tensor '{}' has type {}, which cellm cannot compute with", name, traits.name));
  }
  if (is_vector && info->type != TensorType::kF32) {
    return unimplemented(
        fmt::format("tensor '{}' has type {}; norms, biases and rope factors "
                    "must be f32",
                    name, traits.name));
  }
  CELLM_ASSIGN_OR_RETURN(uint64_t row_bytes, row_size_bytes(info->type, info->dims[0]));
  view->name = name;
  view->type = info->type;
  view->num_cols = num_cols;
  view->num_rows = num_rows;
  view->row_bytes = row_bytes;
  view->bytes = file.tensor_data(*info);
  return ok_status();
}

// A rope factor tensor: [num_rotary_dims / 2] f32 divisors of the rotary frequencies. Zero,
// negative, denormal or non-finite would give non-finite angles (llama3's factors are >= 1,
// LongRoPE's short ones about 1 to 3).
Status bind_rope_factors(const GgufFile& file, const std::string& name, const ModelConfig& c,
                         WeightView* view) {
  CELLM_RETURN_IF_ERROR(
      bind_weight(file, name, c.rope.num_rotary_dims / 2, 1, Need::kRequired, view));
  for (size_t i = 0; i < view->bytes.size() / sizeof(float); ++i) {
    float factor = 0.0f;
    std::memcpy(&factor, view->bytes.data() + i * sizeof(float), sizeof(float));
    if (!std::isnormal(factor) || factor < 0.0f) {
      return data_loss(fmt::format(
          "tensor '{}' holds {} at index {}; rope factors must be positive", name, factor, i));
    }
  }
  return ok_status();
}

// Rows [first_row, first_row + num_rows) of a matrix view: a part of a fused tensor.
WeightView row_range(const WeightView& fused, int64_t first_row, int64_t num_rows,
                     std::string_view part) {
  WeightView view = fused;
  view.name = fmt::format("{} ({})", fused.name, part);
  view.num_rows = num_rows;
  view.bytes = fused.bytes.subspan(static_cast<size_t>(first_row) * fused.row_bytes,
                                   static_cast<size_t>(num_rows) * fused.row_bytes);
  return view;
}

// The layer of a "blk.<i>.<name>" tensor; nullopt for other names.
std::optional<uint64_t> layer_of(std::string_view name) {
  if (!name.starts_with("blk.")) return std::nullopt;
  const char* begin = name.data() + 4;
  const char* end = name.data() + name.size();
  uint64_t layer = 0;
  const auto [next, error] = std::from_chars(begin, end, layer);
  if (error != std::errc() || next == end || *next != '.') return std::nullopt;
  return layer;
}

}  // namespace

StatusOr<ModelWeights> ModelWeights::from_gguf(const GgufFile& file, const ModelConfig& c) {
  ModelWeights w;
  const int64_t hidden = c.hidden_size;
  CELLM_RETURN_IF_ERROR(
      bind_weight(file, "token_embd.weight", hidden, c.vocab_size, Need::kRequired, &w.token_embd));
  CELLM_RETURN_IF_ERROR(
      bind_weight(file, "output_norm.weight", hidden, 1, Need::kRequired, &w.output_norm));
  if (c.tied_embeddings) {
    w.output = w.token_embd;
  } else {
    CELLM_RETURN_IF_ERROR(
        bind_weight(file, "output.weight", hidden, c.vocab_size, Need::kRequired, &w.output));
  }
  if (c.rope.has_freq_factors) {
    const bool long_rope = c.rope.long_factors_above_context > 0;
    CELLM_RETURN_IF_ERROR(bind_rope_factors(
        file, long_rope ? "rope_factors_short.weight" : "rope_freqs.weight", c, &w.rope_freqs));
    if (long_rope) {
      CELLM_RETURN_IF_ERROR(
          bind_rope_factors(file, "rope_factors_long.weight", c, &w.rope_factors_long));
    }
  }
  const bool phi3 = c.architecture == Architecture::kPhi3;
  const Need bias = c.has_qkv_bias ? Need::kRequired : Need::kOptional;
  const Need qk_norm = c.has_qk_norm ? Need::kRequired : Need::kOptional;
  // Biases and q/k norms come on every layer or on none, as layer 0 says (ModelConfig): a stray
  // one would run some layers unlike the others.
  auto check_not_stray = [&](const std::string& name, bool expected, const char* decider) {
    if (expected || file.find_tensor(name) == nullptr) return ok_status();
    return data_loss(fmt::format("tensor '{}' is present but '{}' is not", name, decider));
  };
  // Layers grow as their tensors are found, so a count the file cannot back costs nothing.
  for (int32_t i = 0; i < c.num_layers; ++i) {
    LayerWeights& l = w.layers.emplace_back();
    const std::string p = fmt::format("blk.{}.", i);
    for (const char* name : {"attn_q.bias", "attn_k.bias", "attn_v.bias"}) {
      CELLM_RETURN_IF_ERROR(check_not_stray(p + name, c.has_qkv_bias, "blk.0.attn_q.bias"));
    }
    for (const char* name : {"attn_q_norm.weight", "attn_k_norm.weight"}) {
      CELLM_RETURN_IF_ERROR(check_not_stray(p + name, c.has_qk_norm, "blk.0.attn_q_norm.weight"));
    }
    // A tensor cellm would not read would be silently left out of every forward.
    for (const char* name : {"attn_qkv.bias", "ffn_gate.weight", "attn_qkv.weight"}) {
      const bool expected =
          std::string_view(name) == (phi3 ? "attn_qkv.weight" : "ffn_gate.weight");
      if (!expected && file.find_tensor(p + name) != nullptr) {
        return unimplemented(fmt::format("tensor 'blk.{}.{}' is not part of a {} model", i, name,
                                         architecture_name(c.architecture)));
      }
    }
    CELLM_RETURN_IF_ERROR(
        bind_weight(file, p + "attn_norm.weight", hidden, 1, Need::kRequired, &l.attn_norm));
    if (phi3 && file.find_tensor(p + "attn_qkv.weight") != nullptr) {
      WeightView qkv;
      CELLM_RETURN_IF_ERROR(bind_weight(file, p + "attn_qkv.weight", hidden,
                                        int64_t{c.q_width()} + c.kv_width() + c.v_width(),
                                        Need::kRequired, &qkv));
      l.wq = row_range(qkv, 0, c.q_width(), "q rows");
      l.wk = row_range(qkv, c.q_width(), c.kv_width(), "k rows");
      l.wv = row_range(qkv, int64_t{c.q_width()} + c.kv_width(), c.v_width(), "v rows");
    } else {
      CELLM_RETURN_IF_ERROR(
          bind_weight(file, p + "attn_q.weight", hidden, c.q_width(), Need::kRequired, &l.wq));
      CELLM_RETURN_IF_ERROR(
          bind_weight(file, p + "attn_k.weight", hidden, c.kv_width(), Need::kRequired, &l.wk));
      CELLM_RETURN_IF_ERROR(
          bind_weight(file, p + "attn_v.weight", hidden, c.v_width(), Need::kRequired, &l.wv));
    }
    CELLM_RETURN_IF_ERROR(bind_weight(file, p + "attn_output.weight",
                                      static_cast<int64_t>(c.num_heads) * c.value_head_dim, hidden,
                                      Need::kRequired, &l.wo));
    CELLM_RETURN_IF_ERROR(bind_weight(file, p + "attn_q.bias", c.q_width(), 1, bias, &l.q_bias));
    CELLM_RETURN_IF_ERROR(bind_weight(file, p + "attn_k.bias", c.kv_width(), 1, bias, &l.k_bias));
    CELLM_RETURN_IF_ERROR(bind_weight(file, p + "attn_v.bias", c.v_width(), 1, bias, &l.v_bias));
    CELLM_RETURN_IF_ERROR(
        bind_weight(file, p + "attn_q_norm.weight", c.head_dim, 1, qk_norm, &l.q_norm));
    CELLM_RETURN_IF_ERROR(
        bind_weight(file, p + "attn_k_norm.weight", c.head_dim, 1, qk_norm, &l.k_norm));
    CELLM_RETURN_IF_ERROR(
        bind_weight(file, p + "ffn_norm.weight", hidden, 1, Need::kRequired, &l.ffn_norm));
    for (const auto& [name, view] : {std::pair{"post_attention_norm.weight", &l.post_attn_norm},
                                     std::pair{"post_ffw_norm.weight", &l.post_ffn_norm}}) {
      if (!c.has_post_norms && file.find_tensor(p + name) != nullptr) {
        return unimplemented(fmt::format("tensor 'blk.{}.{}' is not part of a {} model", i, name,
                                         architecture_name(c.architecture)));
      }
      CELLM_RETURN_IF_ERROR(bind_weight(
          file, p + name, hidden, 1, c.has_post_norms ? Need::kRequired : Need::kOptional, view));
    }
    if (phi3) {
      WeightView gate_up;  // [2 * ffn rows, hidden cols]: gate rows, then up rows
      CELLM_RETURN_IF_ERROR(bind_weight(file, p + "ffn_up.weight", hidden, int64_t{2} * c.ffn_size,
                                        Need::kRequired, &gate_up));
      l.w_gate = row_range(gate_up, 0, c.ffn_size, "gate rows");
      l.w_up = row_range(gate_up, c.ffn_size, c.ffn_size, "up rows");
    } else {
      CELLM_RETURN_IF_ERROR(
          bind_weight(file, p + "ffn_gate.weight", hidden, c.ffn_size, Need::kRequired, &l.w_gate));
      CELLM_RETURN_IF_ERROR(
          bind_weight(file, p + "ffn_up.weight", hidden, c.ffn_size, Need::kRequired, &l.w_up));
    }
    CELLM_RETURN_IF_ERROR(
        bind_weight(file, p + "ffn_down.weight", c.ffn_size, hidden, Need::kRequired, &l.w_down));
  }
  // A layer past the block count would be silently left out of every forward.
  for (const GgufTensorInfo& info : file.tensors()) {
    if (layer_of(info.name).value_or(0) >= static_cast<uint64_t>(c.num_layers)) {
      return data_loss(
          fmt::format("tensor {} is past the last layer: model metadata key '{}.block_count' is {}",
                      gguf_quote(info.name, 128), architecture_name(c.architecture), c.num_layers));
    }
  }
  return w;
}

std::vector<const WeightView*> ModelWeights::all() const {
  std::vector<const WeightView*> views = {&token_embd, &output_norm};
  if (output.bytes.data() != token_embd.bytes.data()) views.push_back(&output);
  if (rope_freqs.present()) views.push_back(&rope_freqs);
  for (const LayerWeights& l : layers) {
    for (const WeightView* v : {&l.attn_norm, &l.wq, &l.wk, &l.wv, &l.wo, &l.q_bias, &l.k_bias,
                                &l.v_bias, &l.q_norm, &l.k_norm, &l.ffn_norm, &l.post_attn_norm,
                                &l.post_ffn_norm, &l.w_gate, &l.w_up, &l.w_down}) {
      if (v->present()) views.push_back(v);
    }
  }
  return views;
}

void ModelWeights::use_long_rope_factors() {
  CELLM_CHECK(rope_factors_long.present()) << "use_long_rope_factors on a model without them";
  rope_freqs = rope_factors_long;
}

uint64_t ModelWeights::total_bytes() const {
  uint64_t total = 0;
  for (const WeightView* v : all()) total += v->bytes.size();
  return total;
}

}  // namespace cellm
