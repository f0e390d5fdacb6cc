#include "backends/cpu/cpu_forward.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "gguf/dequantize.h"

namespace cellm {
namespace {

// A small f32 weight (norm, bias, rope factors) as a vector; empty when the view is absent.
std::vector<float> read_vector(const WeightView& w) {
  if (!w.present()) return {};
  std::vector<float> values(static_cast<size_t>(w.num_cols * w.num_rows));
  const Status status = dequantize_row(w.type, w.bytes, values);
  CELLM_CHECK(status.ok()) << w.name << " failed to dequantize after ModelWeights checked it: "
                           << status.to_string();
  return values;
}

// Grows a scratch buffer to at least `size` elements (never shrinks it).
template <typename T>
void ensure_size(std::vector<T>& buffer, int64_t size) {
  if (static_cast<int64_t>(buffer.size()) < size) buffer.resize(static_cast<size_t>(size));
}

// Adds `bias` [width] to each of `num_rows` rows of x [num_rows, width]; no-op without a bias.
void add_bias(float* x, const std::vector<float>& bias, int64_t num_rows, int64_t width) {
  if (bias.empty()) return;
  for (int64_t r = 0; r < num_rows; ++r) cpu_add(x + r * width, bias.data(), width);
}

}  // namespace

CpuForward::CpuForward(const ModelConfig& config, const ModelWeights& weights, ThreadPool* pool)
    : config_(config), weights_(weights), pool_(pool) {
  CELLM_CHECK(static_cast<int32_t>(weights.layers.size()) == config.num_layers &&
              config.num_layers > 0)
      << "CpuForward: " << weights.layers.size() << " layers of weights for a config of "
      << config.num_layers;
  for (const LayerWeights& layer : weights.layers) {
    layer_vectors_.push_back({read_vector(layer.attn_norm), read_vector(layer.ffn_norm),
                              read_vector(layer.q_bias), read_vector(layer.k_bias),
                              read_vector(layer.v_bias), read_vector(layer.q_norm),
                              read_vector(layer.k_norm), read_vector(layer.post_attn_norm),
                              read_vector(layer.post_ffn_norm)});
  }
  output_norm_ = read_vector(weights.output_norm);
  rope_freqs_ = read_vector(weights.rope_freqs);
  const float* factors = rope_freqs_.empty() ? nullptr : rope_freqs_.data();
  rope_ = rope_params(config.rope, config.head_dim, factors);
  sliding_rope_ = rope_params(config.sliding_rope.value_or(config.rope), config.head_dim, factors);
  attention_.num_heads = config.num_heads;
  attention_.num_kv_heads = config.num_kv_heads;
  attention_.head_dim = config.head_dim;
  attention_.value_head_dim = config.value_head_dim;
  attention_.scale = config.query_scale();
  attention_.softcap = config.attn_logit_softcap;
}

void CpuForward::gather_rows(std::vector<float>& buffer, int64_t width,
                             std::span<const int32_t> rows) {
  // rows ascend, so rows[i] >= i: row i's source has not been overwritten yet.
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i] == static_cast<int32_t>(i)) continue;
    std::copy_n(buffer.begin() + rows[i] * width, width,
                buffer.begin() + static_cast<int64_t>(i) * width);
  }
}

void CpuForward::run(std::span<const int32_t> tokens, const CellStep& step,
                     std::span<const int32_t> kept_rows, CpuKvStorage& kv, float* logits) {
  const ModelConfig& c = config_;
  const int64_t num_tokens = static_cast<int64_t>(tokens.size());
  CELLM_CHECK(step.num_tokens == num_tokens)
      << "slice of " << num_tokens << " tokens with a CellStep of " << step.num_tokens;
  for (size_t i = 0; i < kept_rows.size(); ++i) {
    CELLM_CHECK(kept_rows[i] >= 0 && kept_rows[i] < num_tokens &&
                (i == 0 || kept_rows[i] > kept_rows[i - 1]))
        << "kept rows must ascend inside [0, " << num_tokens << ")";
  }
  const std::span<const int32_t> kept = logits != nullptr ? kept_rows : std::span<const int32_t>();
  const int64_t hidden = c.hidden_size;
  const int64_t q_width = c.q_width();
  const int64_t kv_width = c.kv_width();
  const int64_t v_width = c.v_width();
  const int64_t attn_width = static_cast<int64_t>(c.num_heads) * c.value_head_dim;
  const int64_t ffn = c.ffn_size;
  ensure_size(x_, num_tokens * hidden);
  ensure_size(xn_, num_tokens * hidden);
  ensure_size(q_, num_tokens * q_width);
  ensure_size(k_, num_tokens * kv_width);
  ensure_size(v_, num_tokens * v_width);
  ensure_size(attn_, num_tokens * attn_width);
  ensure_size(proj_, num_tokens * hidden);
  ensure_size(gate_, num_tokens * ffn);
  ensure_size(up_, num_tokens * ffn);
  ensure_size(positions_, num_tokens);
  rows_.resize(static_cast<size_t>(num_tokens));
  for (int64_t t = 0; t < num_tokens; ++t) rows_[static_cast<size_t>(t)] = static_cast<int32_t>(t);

  cpu_embed(weights_.token_embd, tokens.data(), num_tokens, x_.data());
  if (c.embedding_scale != 1.0f) {
    for (int64_t i = 0; i < num_tokens * hidden; ++i)
      x_[static_cast<size_t>(i)] *= c.embedding_scale;
  }
  int64_t num_rows = num_tokens;  // rows of the buffers: every token, then the kept ones
  for (int32_t l = 0; l < c.num_layers; ++l) {
    const LayerWeights& w = weights_.layers[static_cast<size_t>(l)];
    const LayerVectors& vec = layer_vectors_[static_cast<size_t>(l)];
    const RopeParams& rope = c.layer_windows[static_cast<size_t>(l)] > 0 ? sliding_rope_ : rope_;
    cpu_rms_norm(x_.data(), vec.attn_norm.data(), num_rows, hidden, c.rms_norm_eps, xn_.data());

    // K and V of every token of the slice, into its cell.
    cpu_matmul(w.wk, xn_.data(), num_rows, k_.data(), pool_);
    cpu_matmul(w.wv, xn_.data(), num_rows, v_.data(), pool_);
    add_bias(k_.data(), vec.k_bias, num_rows, kv_width);
    add_bias(v_.data(), vec.v_bias, num_rows, v_width);
    if (!vec.k_norm.empty()) {
      cpu_rms_norm(k_.data(), vec.k_norm.data(), num_rows * c.num_kv_heads, c.head_dim,
                   c.rms_norm_eps, k_.data());
    }
    cpu_rope(k_.data(), step.token_pos.data(), num_rows, c.num_kv_heads, rope);
    for (int64_t t = 0; t < num_rows; ++t) {
      kv.write(l, step.token_cell[static_cast<size_t>(t)], k_.data() + t * kv_width,
               v_.data() + t * v_width);
    }

    // Past the last layer's K/V only the kept rows matter.
    if (l == c.num_layers - 1) {
      gather_rows(x_, hidden, kept);
      gather_rows(xn_, hidden, kept);
      rows_.assign(kept.begin(), kept.end());
      num_rows = static_cast<int64_t>(kept.size());
    }

    cpu_matmul(w.wq, xn_.data(), num_rows, q_.data(), pool_);
    add_bias(q_.data(), vec.q_bias, num_rows, q_width);
    if (!vec.q_norm.empty()) {
      cpu_rms_norm(q_.data(), vec.q_norm.data(), num_rows * c.num_heads, c.head_dim, c.rms_norm_eps,
                   q_.data());
    }
    visible_.resize(static_cast<size_t>(num_rows));
    for (int64_t r = 0; r < num_rows; ++r) {
      const int32_t token = rows_[static_cast<size_t>(r)];
      positions_[static_cast<size_t>(r)] = step.token_pos[static_cast<size_t>(token)];
      visible_[static_cast<size_t>(r)] =
          step.visible_cells(token, c.layer_windows[static_cast<size_t>(l)]);
    }
    cpu_rope(q_.data(), positions_.data(), num_rows, c.num_heads, rope);
    cpu_attention(q_.data(), visible_, kv.k_view(l), kv.v_view(l), attention_, attn_.data(), pool_);
    cpu_matmul(w.wo, attn_.data(), num_rows, proj_.data(), pool_);
    if (!vec.post_attn_norm.empty()) {
      cpu_rms_norm(proj_.data(), vec.post_attn_norm.data(), num_rows, hidden, c.rms_norm_eps,
                   proj_.data());
    }
    cpu_add(x_.data(), proj_.data(), num_rows * hidden);

    cpu_rms_norm(x_.data(), vec.ffn_norm.data(), num_rows, hidden, c.rms_norm_eps, xn_.data());
    cpu_matmul(w.w_gate, xn_.data(), num_rows, gate_.data(), pool_);
    cpu_matmul(w.w_up, xn_.data(), num_rows, up_.data(), pool_);
    cpu_gated_mul(c.ffn_activation, gate_.data(), up_.data(), num_rows * ffn, gate_.data());
    cpu_matmul(w.w_down, gate_.data(), num_rows, proj_.data(), pool_);
    if (!vec.post_ffn_norm.empty()) {
      cpu_rms_norm(proj_.data(), vec.post_ffn_norm.data(), num_rows, hidden, c.rms_norm_eps,
                   proj_.data());
    }
    cpu_add(x_.data(), proj_.data(), num_rows * hidden);
  }
  if (logits == nullptr || num_rows == 0) return;
  cpu_rms_norm(x_.data(), output_norm_.data(), num_rows, hidden, c.rms_norm_eps, xn_.data());
  cpu_matmul(weights_.output, xn_.data(), num_rows, logits, pool_);
  if (c.final_logit_softcap > 0.0f) {
    for (int64_t i = 0; i < num_rows * c.vocab_size; ++i) {
      logits[i] = soft_cap(logits[i], c.final_logit_softcap);
    }
  }
}

}  // namespace cellm
