#include "model/hf_checkpoint.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>

#include "core/float16.h"
#include "model/rope_pairs.h"

namespace cellm {
namespace {

StatusOr<TensorType> source_type_of(SafetensorsDtype dtype) {
  switch (dtype) {
    case SafetensorsDtype::kF32:
      return TensorType::kF32;
    case SafetensorsDtype::kF16:
      return TensorType::kF16;
    case SafetensorsDtype::kBF16:
      return TensorType::kBF16;
    default:
      return unimplemented(std::string(safetensors_dtype_name(dtype)));
  }
}

bool ends_with(const std::string& text, std::string_view suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::vector<uint64_t> CheckpointTensor::dims() const {
  if (!is_matrix) return {static_cast<uint64_t>(num_cols)};
  return {static_cast<uint64_t>(num_cols), static_cast<uint64_t>(num_rows)};
}

int64_t CheckpointTensor::source_row(int64_t row) const {
  if (permute_heads <= 0) return row;
  const auto head_dim = static_cast<int32_t>(num_rows / permute_heads);
  return neox_source_row(row, head_dim, head_dim);
}

StatusOr<HfCheckpoint> HfCheckpoint::open(const std::string& dir, bool prequantized) {
  HfCheckpoint checkpoint;
  checkpoint.dir_ = dir;
  CELLM_ASSIGN_OR_RETURN(checkpoint.config_, HfConfig::from_dir(dir));
  if (prequantized) {
    CELLM_ASSIGN_OR_RETURN(checkpoint.gptq_config_, GptqConfig::from_dir(dir));
  }
  CELLM_ASSIGN_OR_RETURN(checkpoint.weights_, SafetensorsSet::open_dir(dir));
  CELLM_RETURN_IF_ERROR(checkpoint.map_tensors());
  return checkpoint;
}

Status HfCheckpoint::check_source(const std::string& hf_name, const SafetensorsTensor& tensor,
                                  const std::vector<uint64_t>& shape, CheckpointTensor* out) {
  const std::string file = weights_.file_of(hf_name);
  StatusOr<TensorType> type = source_type_of(tensor.dtype);
  if (!type.ok()) {
    return unimplemented(
        fmt::format("{}: tensor '{}' has dtype {}; cellm converts F32, F16 and "
                    "BF16 weights",
                    file, hf_name, type.status().message()));
  }
  if (tensor.shape != shape) {
    return data_loss(fmt::format("{}: tensor '{}' has shape {}, expected [{}] from config.json",
                                 file, hf_name, tensor.shape_string(), fmt::join(shape, ", ")));
  }
  out->source_type = *type;
  out->source = &tensor;
  used_.push_back(hf_name);
  return ok_status();
}

Status HfCheckpoint::add_matrix(const std::string& gguf_name, const std::string& hf_prefix,
                                int64_t rows, int64_t cols, int32_t permute_heads, bool required) {
  CheckpointTensor t;
  t.gguf_name = gguf_name;
  t.num_rows = rows;
  t.num_cols = cols;
  t.is_matrix = true;
  t.permute_heads = permute_heads;
  const std::string weight_name = hf_prefix + ".weight";
  if (const SafetensorsTensor* source = weights_.find(weight_name); source != nullptr) {
    t.hf_name = weight_name;
    CELLM_RETURN_IF_ERROR(check_source(
        weight_name, *source, {static_cast<uint64_t>(rows), static_cast<uint64_t>(cols)}, &t));
  } else if (gptq_config_ && weights_.find(hf_prefix + ".qweight") != nullptr) {
    t.hf_name = hf_prefix;
    CELLM_ASSIGN_OR_RETURN(GptqLinear linear,
                           GptqLinear::bind(weights_, hf_prefix, *gptq_config_, rows, cols));
    t.source_type = linear.type();
    t.gptq = std::move(linear);
    for (const char* suffix : {".qweight", ".qzeros", ".scales", ".g_idx"}) {
      if (weights_.find(hf_prefix + suffix) != nullptr) used_.push_back(hf_prefix + suffix);
    }
  } else if (!gptq_config_ && weights_.find(hf_prefix + ".qweight") != nullptr) {
    return unimplemented(
        fmt::format("{}: tensor '{}.qweight' is GPTQ-quantized; export it with "
                    "--prequantized",
                    weights_.file_of(hf_prefix + ".qweight"), hf_prefix));
  } else if (required) {
    return not_found(fmt::format("{}: tensor '{}' is missing", dir_, weight_name));
  } else {
    return ok_status();
  }
  tensors_.push_back(std::move(t));
  return ok_status();
}

Status HfCheckpoint::add_vector(const std::string& gguf_name, const std::string& hf_name,
                                int64_t size, bool required) {
  const SafetensorsTensor* source = weights_.find(hf_name);
  if (source == nullptr) {
    if (!required) return ok_status();
    return not_found(fmt::format("{}: tensor '{}' is missing", dir_, hf_name));
  }
  CheckpointTensor t;
  t.gguf_name = gguf_name;
  t.hf_name = hf_name;
  t.num_cols = size;
  CELLM_RETURN_IF_ERROR(check_source(hf_name, *source, {static_cast<uint64_t>(size)}, &t));
  tensors_.push_back(std::move(t));
  return ok_status();
}

Status HfCheckpoint::map_tensors() {
  const HfConfig& c = config_;
  const int64_t hidden = c.hidden_size;
  const int64_t q_width = int64_t{c.num_heads} * c.head_dim;
  const int64_t kv_width = int64_t{c.num_kv_heads} * c.head_dim;
  const bool llama = c.uses_llama_layout();
  const bool qwen2 = c.architecture == Architecture::kQwen2;
  const bool qwen3 = c.architecture == Architecture::kQwen3;
  const bool phi3 = c.architecture == Architecture::kPhi3;
  const bool gemma3 = c.architecture == Architecture::kGemma3;
  const bool gemma = gemma3 || c.architecture == Architecture::kGemma2;
  // A norm vector: gemma2's and gemma3's are stored as 1 + w.
  const auto add_norm = [&](const std::string& gguf_name, const std::string& hf_name,
                            int64_t size) -> Status {
    CELLM_RETURN_IF_ERROR(add_vector(gguf_name, hf_name, size, true));
    if (gemma) tensors_.back().value_shift = 1.0f;
    return ok_status();
  };

  // Where the text model's weights are: model.*, or in a Gemma 3 multimodal checkpoint
  // language_model.model.* (as published) or model.language_model.* (as transformers >= 4.52
  // saves it), beside a vision tower and projector that a text program leaves out.
  std::string model = "model.";
  std::string lm_head = "lm_head";
  if (c.text_of_multimodal) {
    for (const char* prefix : {"language_model.model.", "model.language_model."}) {
      if (weights_.find(std::string(prefix) + "embed_tokens.weight") != nullptr) model = prefix;
    }
    if (model == "language_model.model.") lm_head = "language_model.lm_head";
  }
  const auto is_vision = [&](const std::string& name) {
    return c.text_of_multimodal &&
           (name.starts_with("vision_tower.") || name.starts_with("multi_modal_projector.") ||
            name.starts_with("model.vision_tower.") ||
            name.starts_with("model.multi_modal_projector."));
  };
  CELLM_RETURN_IF_ERROR(
      add_matrix("token_embd.weight", model + "embed_tokens", c.vocab_size, hidden, 0, true));
  for (int32_t i = 0; i < c.num_layers; ++i) {
    const std::string hf = fmt::format("{}layers.{}.", model, i);
    const std::string g = fmt::format("blk.{}.", i);
    CELLM_RETURN_IF_ERROR(add_norm(g + "attn_norm.weight", hf + "input_layernorm.weight", hidden));
    if (phi3) {  // q|k|v as one matrix, as llama.cpp's converter writes it
      CELLM_RETURN_IF_ERROR(add_matrix(g + "attn_qkv.weight", hf + "self_attn.qkv_proj",
                                       q_width + 2 * kv_width, hidden, 0, true));
    } else {
      CELLM_RETURN_IF_ERROR(add_matrix(g + "attn_q.weight", hf + "self_attn.q_proj", q_width,
                                       hidden, llama ? c.num_heads : 0, true));
      CELLM_RETURN_IF_ERROR(add_matrix(g + "attn_k.weight", hf + "self_attn.k_proj", kv_width,
                                       hidden, llama ? c.num_kv_heads : 0, true));
      CELLM_RETURN_IF_ERROR(
          add_matrix(g + "attn_v.weight", hf + "self_attn.v_proj", kv_width, hidden, 0, true));
    }
    CELLM_RETURN_IF_ERROR(
        add_matrix(g + "attn_output.weight", hf + "self_attn.o_proj", hidden, q_width, 0, true));
    if (qwen2) {
      CELLM_RETURN_IF_ERROR(
          add_vector(g + "attn_q.bias", hf + "self_attn.q_proj.bias", q_width, true));
      CELLM_RETURN_IF_ERROR(
          add_vector(g + "attn_k.bias", hf + "self_attn.k_proj.bias", kv_width, true));
      CELLM_RETURN_IF_ERROR(
          add_vector(g + "attn_v.bias", hf + "self_attn.v_proj.bias", kv_width, true));
    }
    if (qwen3 || gemma3) {
      CELLM_RETURN_IF_ERROR(
          add_norm(g + "attn_q_norm.weight", hf + "self_attn.q_norm.weight", c.head_dim));
      CELLM_RETURN_IF_ERROR(
          add_norm(g + "attn_k_norm.weight", hf + "self_attn.k_norm.weight", c.head_dim));
    }
    if (gemma) {
      CELLM_RETURN_IF_ERROR(add_norm(g + "post_attention_norm.weight",
                                     hf + "post_attention_layernorm.weight", hidden));
      CELLM_RETURN_IF_ERROR(
          add_norm(g + "ffn_norm.weight", hf + "pre_feedforward_layernorm.weight", hidden));
      CELLM_RETURN_IF_ERROR(
          add_norm(g + "post_ffw_norm.weight", hf + "post_feedforward_layernorm.weight", hidden));
    } else {
      CELLM_RETURN_IF_ERROR(
          add_norm(g + "ffn_norm.weight", hf + "post_attention_layernorm.weight", hidden));
    }
    if (phi3) {  // gate rows then up rows, one matrix (llama.cpp's ffn_up of a phi3 model)
      CELLM_RETURN_IF_ERROR(add_matrix(g + "ffn_up.weight", hf + "mlp.gate_up_proj",
                                       2 * int64_t{c.intermediate_size}, hidden, 0, true));
    } else {
      CELLM_RETURN_IF_ERROR(add_matrix(g + "ffn_gate.weight", hf + "mlp.gate_proj",
                                       c.intermediate_size, hidden, 0, true));
      CELLM_RETURN_IF_ERROR(add_matrix(g + "ffn_up.weight", hf + "mlp.up_proj", c.intermediate_size,
                                       hidden, 0, true));
    }
    CELLM_RETURN_IF_ERROR(add_matrix(g + "ffn_down.weight", hf + "mlp.down_proj", hidden,
                                     c.intermediate_size, 0, true));
  }
  CELLM_RETURN_IF_ERROR(add_norm("output_norm.weight", model + "norm.weight", hidden));
  if (c.tie_word_embeddings) {
    if (weights_.find(lm_head + ".weight") != nullptr) used_.push_back(lm_head + ".weight");
  } else {
    CELLM_RETURN_IF_ERROR(add_matrix("output.weight", lm_head, c.vocab_size, hidden, 0, true));
  }

  std::sort(used_.begin(), used_.end());
  for (const std::string& name : weights_.names()) {
    if (std::binary_search(used_.begin(), used_.end(), name) || is_vision(name)) continue;
    if (ends_with(name, ".rotary_emb.inv_freq")) continue;  // a buffer old checkpoints saved
    if (ends_with(name, ".qweight") && !gptq_config_) {
      return unimplemented(
          fmt::format("{}: tensor '{}' is GPTQ-quantized; export it with "
                      "--prequantized",
                      weights_.file_of(name), name));
    }
    return data_loss(fmt::format("{}: tensor '{}' is not part of a {} model with this config",
                                 weights_.file_of(name), name, c.model_type));
  }
  // Computed once every tensor above matched the config (head_dim / 2 values: a q_proj of
  // heads x head_dim rows is in the files by now), and first in file order, where llama.cpp's
  // converter writes it.
  const auto add_values = [this](const char* name, std::vector<float> values) {
    CheckpointTensor t;
    t.gguf_name = name;
    t.values = std::move(values);
    t.num_cols = static_cast<int64_t>(t.values.size());
    tensors_.insert(tensors_.begin(), std::move(t));
  };
  if (c.rope_scaling.type == "llama3") add_values("rope_freqs.weight", c.llama3_rope_factors());
  if (c.rope_scaling.type == "longrope") {  // written first, long then short, as llama.cpp does
    add_values("rope_factors_short.weight", c.rope_scaling.short_factors);
    add_values("rope_factors_long.weight", c.rope_scaling.long_factors);
  }
  return ok_status();
}

void HfCheckpoint::read_row_f32(const CheckpointTensor& t, int64_t row, std::span<float> out) {
  CELLM_CHECK_EQ(out.size(), static_cast<size_t>(t.num_cols))
      << t.gguf_name << ": the row buffer must hold exactly one row";
  CELLM_CHECK(row >= 0 && row < t.num_rows)
      << t.gguf_name << " row " << row << " outside its " << t.num_rows << " rows";
  if (!t.values.empty()) {
    std::copy(t.values.begin(), t.values.end(), out.begin());
    return;
  }
  const int64_t src_row = t.source_row(row);
  if (t.gptq) {
    t.gptq->dequantize_row(src_row, out);
    return;
  }
  const size_t n = out.size();
  const uint8_t* src = t.source->data.data() +
                       static_cast<size_t>(src_row) * n * safetensors_dtype_bytes(t.source->dtype);
  switch (t.source_type) {
    case TensorType::kF32:
      std::memcpy(out.data(), src, n * sizeof(float));
      break;
    case TensorType::kF16:
    case TensorType::kBF16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t bits;
        std::memcpy(&bits, src + 2 * i, 2);
        out[i] = t.source_type == TensorType::kF16 ? f16_to_f32(bits) : bf16_to_f32(bits);
      }
      break;
    default:
      CELLM_CHECK(false) << t.gguf_name << ": unexpected source type";
  }
  if (t.value_shift != 0.0f) {
    for (float& value : out) value += t.value_shift;
  }
}

}  // namespace cellm
