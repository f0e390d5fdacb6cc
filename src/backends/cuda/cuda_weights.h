// CudaWeights: a model's weights in device memory, uploaded once and shared by every forward
// (decode graphs and eager prefill alike).
//
// upload() reads the ModelWeights views (GGUF bytes on the host), checks every matrix against
// what the kernels compute with (kernels/weight_layout.h: f32, f16, bf16, q8_0, q4_0, q4_K,
// q6_K — anything else is an Unimplemented error naming the tensor), converts rows to the
// kernels' device layout through pinned staging blocks, and, when the types allow it, fuses
// q/k/v into one matrix (and their biases into one vector) and gate/up into one matrix, so a
// layer runs two wide products instead of five. random() builds the same structure for a
// geometry with random values generated on the device (benchmarks). A neox model (qwen2, phi3)
// without q/k norms may get its q and k rows reordered (neox_as_normal) so that each rotary pair
// (i, i + n_rot / 2) of a head becomes adjacent (2i, 2i + 1) — the inverse of llama.cpp's Q/K
// permutation — and its q/k biases with them: it then runs as a normal-style model (rope_style()),
// whose rotation the q|k|v product's epilogue does at small batches, and q·k is unchanged (both
// sides reordered alike; the K cache holds the reordered dims). Norms, biases and rope factors are
// f32 vectors. All tensors live in one allocation. It knows shapes, types and bytes — not steps,
// cells or kernels' launch choices. Thread-safety: immutable after creation; any number of forwards
// may read it at once.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "backends/cuda/device_memory.h"
#include "backends/cuda/kernels/weight_layout.h"
#include "core/status.h"
#include "model/model_config.h"
#include "model/model_weights.h"

namespace cellm {

struct CudaLayerWeights {
  const float* attn_norm = nullptr;       // [hidden]
  const float* ffn_norm = nullptr;        // [hidden]
  const float* post_attn_norm = nullptr;  // [hidden] or null (gemma3's post norms)
  const float* post_ffn_norm = nullptr;   // [hidden] or null
  // q/k/v: fused into `qkv` ([q_width + kv_width + v_width rows, hidden]) when their types
  // match, with wq/wk/wv then row ranges of it; otherwise three separate matrices and `qkv`
  // absent (data null).
  kernels::DeviceWeight qkv;
  kernels::DeviceWeight wq;         // [q_width, hidden]
  kernels::DeviceWeight wk;         // [kv_width, hidden]
  kernels::DeviceWeight wv;         // [v_width, hidden]
  const float* qkv_bias = nullptr;  // [q_width + kv_width + v_width] (q, k, v) or null
  const float* q_norm = nullptr;    // [head_dim] or null (qwen3)
  const float* k_norm = nullptr;    // [head_dim] or null
  kernels::DeviceWeight wo;         // [hidden, num_heads * value_head_dim]
  // gate/up: fused into `gate_up` ([2 * ffn, hidden]: gate rows then up rows) when their types
  // match; otherwise separate and `gate_up` absent.
  kernels::DeviceWeight gate_up;
  kernels::DeviceWeight w_gate;  // [ffn, hidden]
  kernels::DeviceWeight w_up;    // [ffn, hidden]
  kernels::DeviceWeight w_down;  // [hidden, ffn]

  bool qkv_fused() const { return qkv.data != nullptr; }
  bool gate_up_fused() const { return gate_up.data != nullptr; }
};

struct CudaWeightsOptions {
  bool fuse = true;  // concatenate q/k/v and gate/up when their types match
  // Keep a bf16 copy of every quantized matrix the products read beside it, so wide products
  // (past kernels::kFusedMaxTokensWithCopyQ4_0 / Q8_0 rows) run one bf16 GEMM instead of
  // dequantizing per call: faster prefill and many-session decode for 2 more bytes per weight.
  bool resident_bf16 = false;
  // Or keep them only if, with them, at least `keep_free_bytes` of device memory stay free
  // (cudaMemGetInfo before the allocation) — room the caller needs for its KV pool at its largest
  // and its scratch.
  bool resident_bf16_if_room = false;
  uint64_t keep_free_bytes = 0;
  // Reorder a neox model's q and k rows into adjacent rotary pairs (see above; checked on the
  // device, docs/perf/decode.md version 28). CELLM_CUDA_NEOX_AS_NORMAL=0 turns it off (1 on),
  // whatever this says, for measurements.
  bool neox_as_normal = true;
  int device = 0;
};

// The element types of a random model: one for every matrix (embedding and LM head included),
// or with q4_k_m llama.cpp's Q4_K_M mix — Q6_K for the LM head and for attn_v and ffn_down of the
// layers its use_more_bits picks (the first and last eighth, every third between), matrix_type
// (Q4_K) for the rest.
// head_type, when set, is the LM head's type instead (the embedding table's where they are tied),
// as llama.cpp's Q4_0 files keep a Q6_K head or a checkpoint a bf16 tied embedding.
struct RandomWeightsSpec {
  TensorType matrix_type = TensorType::kBF16;
  uint64_t seed = 1;
  bool q4_k_m = false;
  std::optional<TensorType> head_type = std::nullopt;
};

class CudaWeights {
 public:
  // Uploads `weights` (views must stay valid during the call). Errors name the tensor.
  static StatusOr<std::unique_ptr<CudaWeights>> upload(const ModelConfig& config,
                                                       const ModelWeights& weights,
                                                       const CudaWeightsOptions& options);
  // Random weights of `config`'s geometry (config.tied_embeddings and has_qkv_bias respected;
  // rope factors absent unless config.rope.has_freq_factors, then llama3-like values).
  static StatusOr<std::unique_ptr<CudaWeights>> random(const ModelConfig& config,
                                                       const RandomWeightsSpec& spec,
                                                       const CudaWeightsOptions& options);

  const ModelConfig& config() const { return config_; }
  const CudaLayerWeights& layer(int32_t l) const { return layers_[static_cast<size_t>(l)]; }
  const kernels::DeviceWeight& token_embd() const { return token_embd_; }  // [vocab, hidden]
  const kernels::DeviceWeight& output() const { return output_; }  // [vocab, hidden]; may alias
  const float* output_norm() const { return output_norm_; }        // [hidden]
  const float* rope_freqs() const { return rope_freqs_; }          // [n_rot / 2] or null
  // The rotary pairs of the uploaded q and k rows: the config's style, or normal when a neox
  // model's pairs were made adjacent at upload. Every rope kernel must use this one.
  RopeStyle rope_style() const { return rope_style_; }

  // Bytes of device memory the weights occupy (resident bf16 copies included).
  uint64_t num_bytes() const { return buffer_.num_bytes() + copies_.num_bytes(); }
  // The resident bf16 copy ([num_rows, num_cols]) of the matrix whose data is w.data, or null.
  const uint16_t* bf16_copy(const kernels::DeviceWeight& w) const;
  // Whether any quantized matrix has a resident bf16 copy.
  bool has_bf16_copies() const { return !bf16_copies_.empty(); }
  // Bytes one forward reads from the layers' matrices plus the LM head (not the embedding
  // table, of which it reads a row per token): the memory roofline's numerator for one step.
  uint64_t matrix_bytes_per_step() const;
  // Multiply-adds per token of the matrices a forward runs (layers + LM head), x2 for FLOPs.
  uint64_t matrix_macs_per_token() const;

  struct Tensor;  // cuda_weights_tensor.h: a planned tensor and where its values come from

 private:
  explicit CudaWeights(const ModelConfig& config)
      : config_(config), rope_style_(config.rope.style) {}
  Status plan(const ModelWeights* weights, const RandomWeightsSpec& random,
              const CudaWeightsOptions& o, std::vector<Tensor>* tensors);
  void bind(const std::vector<Tensor>& tensors);
  // Fills the resident bf16 copies from the matrices (after they hold their values).
  Status fill_bf16_copies(const std::vector<Tensor>& tensors, cudaStream_t stream);

  ModelConfig config_;
  DeviceBuffer buffer_;  // every tensor, 256-byte aligned
  DeviceBuffer copies_;  // the resident bf16 copies, 256-byte aligned (empty without)
  std::vector<CudaLayerWeights> layers_;
  kernels::DeviceWeight token_embd_;
  kernels::DeviceWeight output_;
  const float* output_norm_ = nullptr;
  const float* rope_freqs_ = nullptr;
  RopeStyle rope_style_ = RopeStyle::kNormal;
  std::unordered_map<const void*, const uint16_t*> bf16_copies_;  // matrix data -> bf16 copy
};

}  // namespace cellm
