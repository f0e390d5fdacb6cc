// cpu_ops: the operations of the CPU reference forward, one function per op, on plain f32
// arrays with explicit dims — the oracle that backend kernels are checked against.
//
// Every op computes each output row from its own input row (and, for attention, the cells that
// row may see) in a fixed summation order, so a row's result does not depend on how many rows
// are passed, which rows they are, or how the work is split across a ThreadPool; passing a null
// pool runs on the calling thread with bit-identical results. f32 arithmetic throughout (sums
// of squares and softmax denominators in double, as llama.cpp does). They know shapes, not
// models, sessions or the cell cache's bookkeeping: callers hand them positions and cell lists.
// Thread-safety: pure functions of their arguments; a pool is used by one call at a time.
#pragma once

#include <cstdint>
#include <span>

#include "core/thread_pool.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "program/program_spec.h"

namespace cellm {

// y[r] = x[r] / sqrt(mean(x[r]²) + eps) * weight for each row r of `dim` elements: squares in
// f32 summed in double, scale = 1 / sqrtf(mean + eps) in f32, then (x · scale) · weight.
// x, y: [num_rows, dim], f32 (y may be x); weight: [dim], f32.
void cpu_rms_norm(const float* x, const float* weight, int64_t num_rows, int64_t dim, float eps,
                  float* y);

struct RopeParams {
  RopeStyle style = RopeStyle::kNormal;  // normal: pairs (2i, 2i + 1); neox: (i, i + n_rot / 2)
  int32_t head_dim = 0;
  int32_t num_rotary_dims = 0;  // n_rot: the leading dims of a head that rotate (even)
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;
  const float* freq_factors = nullptr;  // [n_rot / 2] divisors (llama3, LongRoPE), or null
  float attn_factor = 1.0f;             // cos and sin multiplied by this (LongRoPE)
};

// RopeParams of a model; freq_factors as given (the rope_freqs tensor's values, or null).
RopeParams rope_params(const RopeConfig& rope, int32_t head_dim, const float* freq_factors);

// Rotates x in place: pair i of a head at position p turns by
// theta_i = p · freq_scale · freq_base^(−2i / n_rot) / freq_factors[i], computed in double —
// cos and sin times attn_factor in double, rounded once to f32 — and applied as
// (x0, x1) → (x0 cos − x1 sin, x0 sin + x1 cos) in f32. Dims >= n_rot are untouched.
// x: [num_tokens, num_heads, head_dim], f32; positions: [num_tokens].
void cpu_rope(float* x, const int32_t* positions, int64_t num_tokens, int32_t num_heads,
              const RopeParams& params);

// out[i] = silu(gate[i]) · up[i], silu(g) = g / (1 + e^−g). All [n], f32 (out may alias either).
void cpu_silu_mul(const float* gate, const float* up, int64_t n, float* out);

// out[i] = gelu(gate[i]) · up[i] with the tanh form gelu(g) = 0.5 g (1 + tanh(sqrt(2/pi) (g +
// 0.044715 g^3))) in f32 (GeGLU: gemma3). All [n], f32 (out may alias either).
void cpu_gelu_tanh_mul(const float* gate, const float* up, int64_t n, float* out);

// The gated MLP's activation of `activation`: cpu_silu_mul or cpu_gelu_tanh_mul.
void cpu_gated_mul(FfnActivation activation, const float* gate, const float* up, int64_t n,
                   float* out);

// x[i] += y[i]. Both [n], f32.
void cpu_add(float* x, const float* y, int64_t n);

// out[t, r] = Σ_c w[r, c] · x[t, c], each dot in dot_f32's order (gguf/dequantize.h), each weight
// row dequantized once per call. w: a matrix of any dequantizable type; x: [num_tokens,
// w.num_cols], f32; out: [num_tokens, w.num_rows], f32. Parallel over weight rows.
void cpu_matmul(const WeightView& w, const float* x, int64_t num_tokens, float* out,
                ThreadPool* pool);

// out[t] = row tokens[t] of `table` dequantized. tokens in [0, table.num_rows) (CELLM_CHECK).
// out: [num_tokens, table.num_cols], f32.
void cpu_embed(const WeightView& table, const int32_t* tokens, int64_t num_tokens, float* out);

// One layer's K or V cache: element (row, head, d) of [num_rows, num_heads, head_dim] in dtype.
struct KvCacheView {
  const void* data = nullptr;  // float when dtype is f32, else uint16_t f16/bf16 bits
  KvDtype dtype = KvDtype::kF32;
  int32_t num_rows = 0;
  int32_t num_heads = 0;
  int32_t head_dim = 0;
};

struct AttentionParams {
  int32_t num_heads = 0;       // query heads
  int32_t num_kv_heads = 0;    // query head h reads kv head h / (num_heads / num_kv_heads)
  int32_t head_dim = 0;        // q and k head size
  int32_t value_head_dim = 0;  // v head size
  float scale = 0.0f;          // usually 1 / sqrt(head_dim)
  float softcap = 0.0f;  // > 0: scores soft-capped, s → softcap · tanh(s / softcap) (gemma2)
};

// A score or logit soft-capped as gemma2 caps them: cap · tanh(x / cap), in f32.
float soft_cap(float x, float cap);

// Causal attention of each query over exactly the cells it may see: for query i and head h,
// s_j = (q[i, h] · k[cells_j, kvh]) · scale (soft-capped when params.softcap > 0) over cells_j =
// visible_cells[i][j] in order, p = softmax(s) (max subtracted, exp in f32, sum in double), out[i,
// h] = Σ_j p_j · v[cells_j, kvh] accumulated in j order. q: [num_queries, num_heads, head_dim],
// f32; visible_cells: [num_queries] lists of rows of k and v (non-empty); out: [num_queries,
// num_heads, value_head_dim], f32. Parallel over (query, head).
void cpu_attention(const float* q, std::span<const std::span<const int32_t>> visible_cells,
                   const KvCacheView& k, const KvCacheView& v, const AttentionParams& params,
                   float* out, ThreadPool* pool);

}  // namespace cellm
