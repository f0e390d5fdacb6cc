#include "backends/cpu/cpu_ops.h"

#include <cmath>
#include <span>

#include "core/check.h"
#include "gguf/dequantize.h"

namespace cellm {

void cpu_rms_norm(const float* x, const float* weight, int64_t num_rows, int64_t dim, float eps,
                  float* y) {
  CELLM_CHECK(dim > 0) << "cpu_rms_norm over rows of " << dim << " elements";
  for (int64_t r = 0; r < num_rows; ++r) {
    const float* in = x + r * dim;
    float* out = y + r * dim;
    double sum = 0.0;
    for (int64_t i = 0; i < dim; ++i) sum += static_cast<double>(in[i] * in[i]);
    const float mean = static_cast<float>(sum / static_cast<double>(dim));
    const float scale = 1.0f / std::sqrt(mean + eps);
    for (int64_t i = 0; i < dim; ++i) out[i] = (in[i] * scale) * weight[i];
  }
}

RopeParams rope_params(const RopeConfig& rope, int32_t head_dim, const float* freq_factors) {
  RopeParams params;
  params.style = rope.style;
  params.head_dim = head_dim;
  params.num_rotary_dims = rope.num_rotary_dims;
  params.freq_base = rope.freq_base;
  params.freq_scale = rope.freq_scale;
  params.freq_factors = freq_factors;
  params.attn_factor = rope.attn_factor;
  return params;
}

void cpu_rope(float* x, const int32_t* positions, int64_t num_tokens, int32_t num_heads,
              const RopeParams& params) {
  const int32_t n_rot = params.num_rotary_dims;
  CELLM_CHECK(n_rot >= 0 && n_rot % 2 == 0 && n_rot <= params.head_dim)
      << "cpu_rope: " << n_rot << " rotary dims in a head of " << params.head_dim;
  const int32_t num_pairs = n_rot / 2;
  std::vector<float> cos_theta(static_cast<size_t>(num_pairs));  // [num_pairs] for one token
  std::vector<float> sin_theta(static_cast<size_t>(num_pairs));  // [num_pairs]
  // The pair partner's offset: adjacent (normal) or half the rotary dims away (neox).
  const int32_t partner = params.style == RopeStyle::kNeox ? num_pairs : 1;
  for (int64_t t = 0; t < num_tokens; ++t) {
    const double pos = static_cast<double>(positions[t]) * static_cast<double>(params.freq_scale);
    for (int32_t i = 0; i < num_pairs; ++i) {
      double theta = pos * std::pow(static_cast<double>(params.freq_base),
                                    -2.0 * static_cast<double>(i) / static_cast<double>(n_rot));
      if (params.freq_factors != nullptr) theta /= static_cast<double>(params.freq_factors[i]);
      const double mscale = params.attn_factor;
      cos_theta[static_cast<size_t>(i)] = static_cast<float>(std::cos(theta) * mscale);
      sin_theta[static_cast<size_t>(i)] = static_cast<float>(std::sin(theta) * mscale);
    }
    for (int32_t h = 0; h < num_heads; ++h) {
      float* head = x + (t * num_heads + h) * params.head_dim;
      for (int32_t i = 0; i < num_pairs; ++i) {
        const int32_t first = params.style == RopeStyle::kNeox ? i : 2 * i;
        const float x0 = head[first];
        const float x1 = head[first + partner];
        const float c = cos_theta[static_cast<size_t>(i)];
        const float s = sin_theta[static_cast<size_t>(i)];
        head[first] = x0 * c - x1 * s;
        head[first + partner] = x0 * s + x1 * c;
      }
    }
  }
}

void cpu_silu_mul(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = (g / (1.0f + std::exp(-g))) * up[i];
  }
}

void cpu_gelu_tanh_mul(const float* gate, const float* up, int64_t n, float* out) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    const float inner = kSqrt2OverPi * (g + 0.044715f * g * g * g);
    out[i] = (0.5f * g * (1.0f + std::tanh(inner))) * up[i];
  }
}

void cpu_gated_mul(FfnActivation activation, const float* gate, const float* up, int64_t n,
                   float* out) {
  if (activation == FfnActivation::kGeluTanh) {
    cpu_gelu_tanh_mul(gate, up, n, out);
  } else {
    cpu_silu_mul(gate, up, n, out);
  }
}

float soft_cap(float x, float cap) { return cap * std::tanh(x / cap); }

void cpu_add(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

void cpu_embed(const WeightView& table, const int32_t* tokens, int64_t num_tokens, float* out) {
  const int64_t dim = table.num_cols;
  for (int64_t t = 0; t < num_tokens; ++t) {
    CELLM_CHECK(tokens[t] >= 0 && tokens[t] < table.num_rows)
        << "token " << tokens[t] << " outside " << table.name << "'s " << table.num_rows << " rows";
    const Status status = dequantize_row(table.type, table.row(tokens[t]),
                                         std::span<float>(out + t * dim, static_cast<size_t>(dim)));
    CELLM_CHECK(status.ok()) << table.name
                             << " failed to dequantize after ModelWeights checked it: "
                             << status.to_string();
  }
}

}  // namespace cellm
