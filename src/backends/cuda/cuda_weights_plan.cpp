// CudaWeights::plan: the tensors of the single allocation (which matrices are fused, which get
// a resident bf16 copy, their offsets) and the allocation itself. Split from cuda_weights.cpp.
#include <cstdlib>
#include <string>
#include <vector>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_weights.h"
#include "backends/cuda/cuda_weights_tensor.h"

namespace cellm {

Status CudaWeights::plan(const ModelWeights* w, const RandomWeightsSpec& random_spec,
                         const CudaWeightsOptions& options, std::vector<Tensor>* tensors) {
  const ModelConfig& c = config_;
  layers_.assign(static_cast<size_t>(c.num_layers), CudaLayerWeights{});
  // Random weights: matrix_type, or Q6_K where the Q4_K_M mix puts it (`more_bits`).
  const auto random_type = [&](bool more_bits) {
    return random_spec.q4_k_m && more_bits ? TensorType::kQ6_K : random_spec.matrix_type;
  };
  const auto more_bits = [&](int32_t l) {  // llama.cpp's use_more_bits
    const int32_t n = c.num_layers;
    return l < n / 8 || l >= 7 * n / 8 || (l - n / 8) % 3 == 2;
  };
  const auto matrix = [&](std::string name, std::vector<const WeightView*> sources, int64_t rows,
                          int64_t cols, kernels::DeviceWeight* slot,
                          bool random_more_bits = false) -> Status {
    Tensor t;
    t.name = std::move(name);
    t.type = w != nullptr ? sources[0]->type : random_type(random_more_bits);
    t.num_rows = rows;
    t.num_cols = cols;
    CELLM_RETURN_IF_ERROR(kernels::check_device_weight(t.type, cols, t.name));
    if (w != nullptr) t.sources = std::move(sources);
    t.num_bytes = kernels::device_row_bytes(t.type, cols) * static_cast<uint64_t>(rows);
    t.matrix_slot = slot;
    tensors->push_back(std::move(t));
    return ok_status();
  };
  const auto vector = [&](std::string name, std::vector<const WeightView*> sources,
                          std::vector<int64_t> parts, Tensor::Fill fill, const float** slot) {
    Tensor t;
    t.name = std::move(name);
    t.is_matrix = false;
    t.num_rows = 1;
    for (const int64_t n : parts) t.num_cols += n;
    t.sources = std::move(sources);
    t.part_sizes = std::move(parts);
    t.fill = fill;
    t.num_bytes = static_cast<uint64_t>(t.num_cols) * sizeof(float);
    t.vector_slot = slot;
    tensors->push_back(std::move(t));
  };
  const int64_t hidden = c.hidden_size;
  const bool random = w == nullptr;
  // A neox model's q and k rows reordered into adjacent pairs (random weights: nothing to move).
  const char* neox_env = std::getenv("CELLM_CUDA_NEOX_AS_NORMAL");
  const bool neox_wanted =
      neox_env != nullptr ? std::string(neox_env) != "0" : options.neox_as_normal;
  const bool adjacent = neox_wanted && c.rope.style == RopeStyle::kNeox && !c.has_qk_norm;
  if (adjacent) rope_style_ = RopeStyle::kNormal;
  // The last planned tensor's sources that are q or k (in order), when reordering.
  const auto mark_pairs = [&](std::vector<bool> qk) {
    if (!adjacent || random) return;
    Tensor& t = tensors->back();
    t.pairs_adjacent = std::move(qk);
    t.head_dim = c.head_dim;
    t.num_rotary_dims = c.rope.num_rotary_dims;
  };
  CELLM_RETURN_IF_ERROR(matrix(
      "token_embd.weight",
      random ? std::vector<const WeightView*>{} : std::vector<const WeightView*>{&w->token_embd},
      c.vocab_size, hidden, &token_embd_));
  if (!c.tied_embeddings) {
    CELLM_RETURN_IF_ERROR(matrix(
        "output.weight",
        random ? std::vector<const WeightView*>{} : std::vector<const WeightView*>{&w->output},
        c.vocab_size, hidden, &output_, true));
  }
  if (random && random_spec.head_type.has_value()) {  // the LM head just planned (or the table)
    Tensor& head = tensors->back();
    head.type = *random_spec.head_type;
    CELLM_RETURN_IF_ERROR(kernels::check_device_weight(head.type, hidden, head.name));
    head.num_bytes =
        kernels::device_row_bytes(head.type, hidden) * static_cast<uint64_t>(c.vocab_size);
  }
  vector(
      "output_norm.weight",
      random ? std::vector<const WeightView*>{} : std::vector<const WeightView*>{&w->output_norm},
      {hidden}, Tensor::Fill::kOnes, &output_norm_);
  if (c.rope.has_freq_factors) {
    vector(
        "rope_freqs.weight",
        random ? std::vector<const WeightView*>{} : std::vector<const WeightView*>{&w->rope_freqs},
        {c.rope.num_rotary_dims / 2}, Tensor::Fill::kRopeFactors, &rope_freqs_);
  }
  for (int32_t l = 0; l < c.num_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    CudaLayerWeights& out = layers_[static_cast<size_t>(l)];
    const LayerWeights* lw = random ? nullptr : &w->layers[static_cast<size_t>(l)];
    const auto one = [&](const WeightView LayerWeights::*member) {
      return random ? std::vector<const WeightView*>{}
                    : std::vector<const WeightView*>{&(lw->*member)};
    };
    vector(p + "attn_norm.weight", one(&LayerWeights::attn_norm), {hidden}, Tensor::Fill::kOnes,
           &out.attn_norm);
    vector(p + "ffn_norm.weight", one(&LayerWeights::ffn_norm), {hidden}, Tensor::Fill::kOnes,
           &out.ffn_norm);
    if (c.has_post_norms) {
      vector(p + "post_attention_norm.weight", one(&LayerWeights::post_attn_norm), {hidden},
             Tensor::Fill::kOnes, &out.post_attn_norm);
      vector(p + "post_ffw_norm.weight", one(&LayerWeights::post_ffn_norm), {hidden},
             Tensor::Fill::kOnes, &out.post_ffn_norm);
    }
    const bool fuse_qkv =
        options.fuse && (random ? random_type(more_bits(l)) == random_type(false)
                                : (lw->wq.type == lw->wk.type && lw->wk.type == lw->wv.type));
    if (fuse_qkv) {
      CELLM_RETURN_IF_ERROR(matrix(p + "attn_qkv",
                                   random
                                       ? std::vector<const WeightView*>{}
                                       : std::vector<const WeightView*>{&lw->wq, &lw->wk, &lw->wv},
                                   c.q_width() + c.kv_width() + c.v_width(), hidden, &out.qkv));
      mark_pairs({true, true, false});
    } else {
      CELLM_RETURN_IF_ERROR(
          matrix(p + "attn_q.weight", one(&LayerWeights::wq), c.q_width(), hidden, &out.wq));
      mark_pairs({true});
      CELLM_RETURN_IF_ERROR(
          matrix(p + "attn_k.weight", one(&LayerWeights::wk), c.kv_width(), hidden, &out.wk));
      mark_pairs({true});
      CELLM_RETURN_IF_ERROR(matrix(p + "attn_v.weight", one(&LayerWeights::wv), c.v_width(), hidden,
                                   &out.wv, more_bits(l)));
    }
    const bool has_bias =
        random ? c.has_qkv_bias
               : (lw->q_bias.present() || lw->k_bias.present() || lw->v_bias.present());
    if (has_bias) {
      std::vector<const WeightView*> parts;
      if (!random) {
        parts = {lw->q_bias.present() ? &lw->q_bias : nullptr,
                 lw->k_bias.present() ? &lw->k_bias : nullptr,
                 lw->v_bias.present() ? &lw->v_bias : nullptr};
      }
      vector(p + "attn_qkv.bias", parts, {c.q_width(), c.kv_width(), c.v_width()},
             Tensor::Fill::kSmall, &out.qkv_bias);
      mark_pairs({true, true, false});
    }
    if (c.has_qk_norm) {
      vector(p + "attn_q_norm.weight", one(&LayerWeights::q_norm), {c.head_dim},
             Tensor::Fill::kOnes, &out.q_norm);
      vector(p + "attn_k_norm.weight", one(&LayerWeights::k_norm), {c.head_dim},
             Tensor::Fill::kOnes, &out.k_norm);
    }
    CELLM_RETURN_IF_ERROR(matrix(p + "attn_output.weight", one(&LayerWeights::wo), hidden,
                                 static_cast<int64_t>(c.num_heads) * c.value_head_dim, &out.wo));
    const bool fuse_gate_up = options.fuse && (random || lw->w_gate.type == lw->w_up.type);
    if (fuse_gate_up) {
      CELLM_RETURN_IF_ERROR(matrix(p + "ffn_gate_up",
                                   random ? std::vector<const WeightView*>{}
                                          : std::vector<const WeightView*>{&lw->w_gate, &lw->w_up},
                                   2 * static_cast<int64_t>(c.ffn_size), hidden, &out.gate_up));
    } else {
      CELLM_RETURN_IF_ERROR(matrix(p + "ffn_gate.weight", one(&LayerWeights::w_gate), c.ffn_size,
                                   hidden, &out.w_gate));
      CELLM_RETURN_IF_ERROR(
          matrix(p + "ffn_up.weight", one(&LayerWeights::w_up), c.ffn_size, hidden, &out.w_up));
    }
    CELLM_RETURN_IF_ERROR(matrix(p + "ffn_down.weight", one(&LayerWeights::w_down), hidden,
                                 c.ffn_size, &out.w_down, more_bits(l)));
  }
  const auto aligned = [](uint64_t n) {
    return (n + kTensorAlignment - 1) / kTensorAlignment * kTensorAlignment;
  };
  // Which matrices may get a bf16 copy: the quantized ones a product reads (the embedding table
  // only when it is the LM head too).
  const auto copyable = [&](const Tensor& t) {
    return t.is_matrix && kernels::is_quantized_type(t.type) &&
           (t.matrix_slot != &token_embd_ || c.tied_embeddings);
  };
  uint64_t plain_bytes = 0;
  uint64_t copy_bytes = 0;
  for (const Tensor& t : *tensors) {
    plain_bytes += aligned(t.num_bytes);
    if (copyable(t)) {
      copy_bytes +=
          aligned(static_cast<uint64_t>(t.num_rows) * static_cast<uint64_t>(t.num_cols) * 2);
    }
  }
  bool copies = options.resident_bf16;
  if (!copies && options.resident_bf16_if_room && copy_bytes > 0) {
    size_t free_bytes = 0;
    size_t total_bytes = 0;
    CELLM_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_bytes, &total_bytes));
    copies = plain_bytes + copy_bytes + options.keep_free_bytes <= free_bytes;
  }
  // The copies in an allocation of their own: the small-M products then stream the quantized
  // matrices from the allocation they have without copies (interleaved in one allocation, q8_0
  // at 24 sessions decoded 5% slower on the H200; after the tensors in one, 8 sessions 2–6%).
  uint64_t offset = 0;
  uint64_t copies_offset = 0;
  for (Tensor& t : *tensors) {
    t.offset = offset;
    offset += aligned(t.num_bytes);
    if (copies && copyable(t)) {
      t.has_bf16_copy = true;
      t.bf16_offset = copies_offset;
      copies_offset +=
          aligned(static_cast<uint64_t>(t.num_rows) * static_cast<uint64_t>(t.num_cols) * 2);
    }
  }
  CELLM_ASSIGN_OR_RETURN(buffer_, DeviceBuffer::allocate(offset));
  if (copies_offset > 0) {
    CELLM_ASSIGN_OR_RETURN(copies_, DeviceBuffer::allocate(copies_offset));
  }
  bind(*tensors);
  return ok_status();
}

}  // namespace cellm
