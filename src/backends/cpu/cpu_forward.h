// CpuForward: the reference forward of one slice — the function both program methods compute,
// (tokens[T], positions[T], logits_to_keep[K]) → logits[K, vocab], with K/V placed by a CellStep.
//
// Embedding (× the config's embedding scale); per layer RMSNorm, q/k/v projections (+ qwen2
// biases, + qwen3/gemma3 per-head q/k RMSNorm), RoPE (the layer's: gemma3's windowed layers have
// their own), K/V written to each token's cell, grouped-query attention of each token over its
// own sequence's visible cells, output projection (RMS-normed again with post norms), residual,
// RMSNorm, gated MLP (SwiGLU or GeGLU; post-normed likewise), residual; then the final norm and
// the LM head on the kept rows only. f32 arithmetic; weights dequantized
// on the fly from the GGUF mapping. Each token's result depends only on its own inputs and the
// cells it sees — not on the other tokens of the slice nor on the thread split — so one prompt
// gives the same logits alone, packed with others, or cut into slices of any width. It knows
// nothing of sessions, batches or slicing plans (cpu_executor.h). Thread-safety: one run() at a
// time; it uses the ThreadPool it was given.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backends/cpu/cpu_kv_storage.h"
#include "backends/cpu/cpu_ops.h"
#include "cache/cell_step.h"
#include "core/thread_pool.h"
#include "model/model_config.h"
#include "model/model_weights.h"

namespace cellm {

class CpuForward {
 public:
  // `weights` views must stay valid (keep their GgufFile alive); `pool` may be null (one thread)
  // and must outlive this object. Small f32 vectors (norms, biases, rope factors) are copied.
  CpuForward(const ModelConfig& config, const ModelWeights& weights, ThreadPool* pool);

  const ModelConfig& config() const { return config_; }

  // Runs one slice. tokens: [T] ids in [0, vocab); step: the CellStep placing exactly these T
  // tokens (step.num_tokens == T); kept_rows: [K] indices into tokens, strictly ascending; kv:
  // storage with rows for every cell of the step. Writes logits: [K, vocab], f32 — or, when
  // logits is null, skips the final norm and the LM head (K/V are still written).
  void run(std::span<const int32_t> tokens, const CellStep& step,
           std::span<const int32_t> kept_rows, CpuKvStorage& kv, float* logits);

 private:
  struct LayerVectors {
    std::vector<float> attn_norm;       // [hidden]
    std::vector<float> ffn_norm;        // [hidden]
    std::vector<float> q_bias;          // [q_width] or empty
    std::vector<float> k_bias;          // [kv_width] or empty
    std::vector<float> v_bias;          // [v_width] or empty
    std::vector<float> q_norm;          // [head_dim] or empty
    std::vector<float> k_norm;          // [head_dim] or empty
    std::vector<float> post_attn_norm;  // [hidden] or empty (gemma3)
    std::vector<float> post_ffn_norm;   // [hidden] or empty
  };

  // Keeps rows `rows` of a [num_rows, width] buffer, in order, at its front.
  static void gather_rows(std::vector<float>& buffer, int64_t width, std::span<const int32_t> rows);

  ModelConfig config_;
  ModelWeights weights_;
  ThreadPool* pool_;
  std::vector<LayerVectors> layer_vectors_;  // [num_layers]
  std::vector<float> output_norm_;           // [hidden]
  std::vector<float> rope_freqs_;            // [n_rot / 2] or empty
  RopeParams rope_;
  RopeParams sliding_rope_;  // the windowed layers' (config.sliding_rope), else rope_
  AttentionParams attention_;

  // Scratch, grown to the widest slice seen. Row counts shrink to K in the last layer.
  std::vector<float> x_;            // [T, hidden] the residual stream
  std::vector<float> xn_;           // [T, hidden] normed input of a block
  std::vector<float> q_;            // [T, num_heads * head_dim]
  std::vector<float> k_;            // [T, num_kv_heads * head_dim]
  std::vector<float> v_;            // [T, num_kv_heads * value_head_dim]
  std::vector<float> attn_;         // [T, num_heads * value_head_dim]
  std::vector<float> proj_;         // [T, hidden]
  std::vector<float> gate_;         // [T, ffn]
  std::vector<float> up_;           // [T, ffn]
  std::vector<int32_t> rows_;       // [T] the step token of each row of the buffers above
  std::vector<int32_t> positions_;  // [T] the position of each row
  std::vector<std::span<const int32_t>> visible_;  // [T] cells each row attends over
};

}  // namespace cellm
