// CudaForward's fused small-M path (cuda_forward.h): slices of at most kDecodeMatmulMaxTokens
// rows with the norms, RoPE + K/V write, SwiGLU, residual adds and the kept-row gather folded
// into the matrix products (kernels/decode_matmul.cuh).
#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <string>

#include "backends/cuda/cuda_forward.h"
#include "backends/cuda/kernels/matmul.cuh"
#include "backends/cuda/kernels/matmul_int8.cuh"
#include "backends/cuda/kernels/rope_kv.cuh"

namespace cellm {
namespace {

// False when the environment variable is "0" (measurement switches, read once per forward).
bool env_allows(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr || std::strcmp(value, "0") != 0;
}

// The widest fused step of Q4_K / Q6_K weights with int8 activations where resident bf16 copies
// serve the wider ones (without copies: kDecodeMatmulMaxTokens). H200, Llama-3.1-8B geometry,
// q4_k, ms per step with 2 / 4 / 8 rows fused: 3.90 / 5.23 / 8.55 (dp4a with a per-group scale
// and min is issue-bound); wider steps' cuBLAS at 8 rows: 5.15 on the copies, 10.41 on tiles
// dequantized per step (q6_k: 3.70 / 5.13 / 8.22; 5.12 / 10.86).
constexpr int32_t kKQuantFusedRowsWithCopies = 4;

// Below this peak memory bandwidth (the H100 SXM's 3.35 TB/s; the H200 has 4.8) a device takes the
// one-token defaults measured on the H100 where they differ from the H200's (docs/perf/decode.md
// version 35): Q4_0's output product hands over too, the fused layer's kernels let the next one
// launch at their start. On a slower bus a step's fixed costs weigh less against its bytes.
constexpr double kSlowBusBelowBytesPerS = 4.0e12;

}  // namespace

void CudaForward::plan_fused_path() {
  const ModelConfig& c = config_;
  int8_activations_ = forward_config_.int8_activations && env_allows("CELLM_CUDA_INT8");
  int8_matmul_rows_ =
      int8_activations_ && env_allows("CELLM_CUDA_INT8_MMA") ? kernels::kInt8MatmulMaxTokens : 0;
  const char* fold = std::getenv("CELLM_CUDA_INT8_FOLD");  // opt-in: slower on the H200
  int8_fold_ = fold != nullptr && std::strcmp(fold, "1") == 0;
  attention_q8_ = env_allows("CELLM_CUDA_ATTENTION_Q8");
  const char* early = std::getenv("CELLM_CUDA_ATTENTION_EARLY");
  attention_early_after_product_ = early != nullptr && std::strcmp(early, "1") == 0;
  kquant_per_256_ = env_allows("CELLM_CUDA_KQUANT_PER256");
  kquant_o_from_attention_ = env_allows("CELLM_CUDA_KQUANT_O_FROM_ATTENTION");
  int8_qkv_apart_ = env_allows("CELLM_CUDA_INT8_QKV_APART");
  const bool slow_bus =
      peak_bandwidth_bytes_per_s_ > 0.0 && peak_bandwidth_bytes_per_s_ < kSlowBusBelowBytesPerS;
  // CELLM_CUDA_TRIGGER_AFTER_WAIT: 0 at their start, 1 after their wait (for measurements).
  const char* trigger = std::getenv("CELLM_CUDA_TRIGGER_AFTER_WAIT");
  const bool after_wait = trigger != nullptr ? std::strcmp(trigger, "0") != 0 : !slow_bus;
  fused_trigger_ = after_wait ? kernels::PdlTrigger::kAfterWait : kernels::PdlTrigger::kAtStart;
  wide_input_ = env_allows("CELLM_CUDA_WIDE_INPUT");
  // One table of angles serves every layer only when every layer rotates alike.
  rope_table_used_ = c.rope.num_rotary_dims > 0 && !c.sliding_rope.has_value() &&
                     env_allows("CELLM_CUDA_ROPE_TABLE");
  // K-quants with int8 activations but no int8 tensor-core product: the fused decode product up
  // to kKQuantFusedRowsWithCopies rows, or kDecodeMatmulMaxTokens without copies
  // (CELLM_CUDA_KQUANT_FUSED_ROWS overrides, for measurements); wider, their products run cuBLAS
  // on the copies or on dequantized tiles.
  kquant_fused_rows_ = [this] {
    const char* value = std::getenv("CELLM_CUDA_KQUANT_FUSED_ROWS");
    if (value != nullptr) return std::clamp(std::atoi(value), 1, kernels::kDecodeMatmulMaxTokens);
    return weights_.has_bf16_copies() ? kKQuantFusedRowsWithCopies
                                      : kernels::kDecodeMatmulMaxTokens;
  }();
  fused_max_rows_ = 0;
  post_norm_fused_rows_ = 0;
  if (!forward_config_.fused_decode || !env_allows("CELLM_CUDA_FUSED")) return;
  // Models with post norms fuse only on int8 activations quantized by launches: each launch also
  // joins the post-normed block output before it to the residual (enqueue_post_norm_fused).
  const bool post_norm = c.has_post_norms;
  if (post_norm ? !int8_activations_ || int8_fold_ || !env_allows("CELLM_CUDA_POST_NORM_FUSED")
                : c.ffn_activation != FfnActivation::kSilu || c.embedding_scale != 1.0f) {
    return;
  }
  int32_t max_rows = kernels::kDecodeMatmulMaxTokens;
  // Each weight type keeps the fused path only as wide as its small-M products pay
  // (kernels::small_m_max_tokens: wider, the tensor-core path is faster), and F16 / BF16 only at
  // one row: at two, the unfused sequence on the small-M kernels measured 2.5% faster on the
  // H200 (355 against 346 tok/s, Llama-3.1-8B geometry, two sessions).
  // With int8 activations, Q8_0 / Q4_0 products of 2 / 3 rows and more run faster on the int8
  // tensor cores than in the fused layer (kernels::int8_matmul_min_tokens).
  const auto allow = [&](const kernels::DeviceWeight& w) {
    if (w.data == nullptr || !kernels::decode_matmul_supports(w)) return false;
    if (post_norm && !kernels::decode_matmul_takes_int8(w)) return false;
    const bool half = w.type == TensorType::kF16 || w.type == TensorType::kBF16;
    // K-quants the wide step gives the int8 decode product keep the fused layer as far.
    const bool int8_kquant = int8_decode_applies(w, kquant_fused_rows_);
    max_rows = std::min(max_rows, half          ? 1
                                  : int8_kquant ? kquant_fused_rows_
                                                : kernels::small_m_max_tokens(w.type));
    if (int8_matmul_rows_ > 0 && kernels::int8_matmul_supports(w)) {
      max_rows = std::min(max_rows, kernels::int8_matmul_min_tokens(w.type) - 1);
    }
    return true;
  };
  // The post-norm path's LM head takes whatever product its type has (enqueue_post_norm_fused).
  bool ok = (post_norm || allow(weights_.output())) && weights_.output_norm() != nullptr;
  bool norms_free = true;
  for (int32_t l = 0; ok && l < c.num_layers; ++l) {
    const CudaLayerWeights& w = weights_.layer(l);
    // q, k and v apart (their types differ: Q4_K_M's Q6_K v) when they take one input alike.
    const bool qkv_ok = w.qkv_fused()
                            ? allow(w.qkv)
                            : allow(w.wq) && allow(w.wk) && allow(w.wv) &&
                                  same_fused_input(w.wq, w.wk) && same_fused_input(w.wq, w.wv);
    ok = qkv_ok && w.gate_up_fused() && allow(w.wo) && allow(w.gate_up) && allow(w.w_down) &&
         w.attn_norm != nullptr && w.ffn_norm != nullptr &&
         (!post_norm || (w.post_attn_norm != nullptr && w.post_ffn_norm != nullptr));
    norms_free = norms_free && w.q_norm == nullptr && w.k_norm == nullptr;
  }
  if (!ok) return;
  // RoPE and the K/V write in the q|k|v product's epilogue: layers without q/k norms (which need
  // a head's whole row) whose pairs are adjacent (normal style, or neox reordered at upload).
  rope_fused_ = norms_free && weights_.rope_style() == RopeStyle::kNormal && c.head_dim % 2 == 0 &&
                c.rope.num_rotary_dims % 2 == 0 && c.rope.num_rotary_dims <= c.head_dim &&
                c.v_width() % 2 == 0;
  if (post_norm) {
    post_norm_fused_rows_ = max_rows;
    return;
  }
  fused_max_rows_ = max_rows;
  // The handover: every product that hands over or takes the input Q8_0 / Q4_0 on int8
  // activations (kernels::decode_matmul_hands_over, decode_matmul_takes_handover).
  const auto takes = [](const kernels::DeviceWeight& w) {
    return kernels::decode_matmul_takes_handover(w);
  };
  bool handover = int8_activations_ && !int8_fold_ && takes(weights_.output());
  bool all_q8 = weights_.output().type == TensorType::kQ8_0;
  for (int32_t l = 0; handover && l < c.num_layers; ++l) {
    const CudaLayerWeights& w = weights_.layer(l);
    const bool qkv = w.qkv_fused() ? takes(w.qkv) : takes(w.wq) && takes(w.wk) && takes(w.wv);
    handover = qkv && takes(w.gate_up) && kernels::decode_matmul_hands_over(w.wo) &&
               kernels::decode_matmul_hands_over(w.w_down);
    all_q8 = all_q8 && w.wo.type == TensorType::kQ8_0 && w.w_down.type == TensorType::kQ8_0;
  }
  // By default where it measured faster (Llama-3.1-8B geometry, batch-1 step ms). H200 (none:
  // q8_0 2.508–2.524, q4_0 1.774–1.787): Q8_0 the output and down products (2.411–2.417), Q4_0
  // the down product alone (1.763–1.776; with the output product 1.789–1.796). H100 (three
  // alternating rounds, docs/perf/decode.md version 35): Q4_0 with the output product too,
  // 2.027–2.037 against down alone 2.078–2.092 (none 2.106; Phi-3.5-mini 1.424–1.430 against
  // 1.455–1.458, Qwen2.5-7B the same) — on the slower bus the quantize launch it saves weighs more
  // than its coarser blocks; so on a slow bus (kSlowBusBelowBytesPerS) Q4_0 hands it over too.
  // CELLM_CUDA_HANDOVER: 0 none, 1 (or unset) the default, o, down or o,down (for measurements).
  const bool o_by_default = all_q8 || slow_bus;
  const char* choice = std::getenv("CELLM_CUDA_HANDOVER");
  const std::string chosen = choice != nullptr ? choice : "1";
  handover_o_ =
      handover && (chosen == "o" || chosen == "o,down" || (chosen == "1" && o_by_default));
  handover_down_ = handover && (chosen == "down" || chosen == "o,down" || chosen == "1");

  // gate|up hands down its SwiGLU values per 16 where every layer's pair can.
  bool swiglu = int8_activations_ && !int8_fold_;
  for (int32_t l = 0; swiglu && l < c.num_layers; ++l) {
    const CudaLayerWeights& w = weights_.layer(l);
    swiglu = kernels::decode_matmul_hands_over_swiglu(w.gate_up) &&
             kernels::decode_matmul_takes_per_16(w.w_down);
  }
  const char* swiglu_choice = std::getenv("CELLM_CUDA_HANDOVER_SWIGLU");
  const bool swiglu_by_default = false;
  handover_swiglu_ = swiglu && (swiglu_choice != nullptr ? std::strcmp(swiglu_choice, "0") != 0
                                                         : swiglu_by_default);
}

kernels::DecodeMatmulParams CudaForward::fused_product(const kernels::DeviceWeight& w,
                                                       int32_t rows) const {
  kernels::DecodeMatmulParams p;
  p.w = w;
  p.num_tokens = rows;
  p.trigger = fused_trigger_;
  return p;
}

Status CudaForward::fused_qkv(const CudaLayerWeights& w, const kernels::DecodeMatmulParams& input,
                              const kernels::RopeKvOutput* rope, cudaStream_t stream) {
  const int64_t qkv_width = widths().qkv;
  if (w.qkv_fused()) {
    kernels::DecodeMatmulParams qkv = input;
    qkv.w = w.qkv;
    qkv.bias = w.qkv_bias;
    qkv.y = qkv_;
    qkv.y_stride = qkv_width;
    if (rope != nullptr) {
      qkv.output = kernels::DecodeOutput::kRopeKv;
      qkv.rope = *rope;
    }
    return kernels::launch_decode_matmul(qkv, stream);
  }
  // Three products on one input (same_fused_input), into qkv_'s columns.
  CELLM_CHECK(rope == nullptr) << "q, k and v apart cannot rotate in their epilogue";
  int64_t column = 0;
  for (const kernels::DeviceWeight* part : {&w.wq, &w.wk, &w.wv}) {
    kernels::DecodeMatmulParams p = input;  // the input fields
    p.w = *part;
    p.bias = w.qkv_bias != nullptr ? w.qkv_bias + column : nullptr;
    p.y = qkv_ + column;
    p.y_stride = qkv_width;
    CELLM_RETURN_IF_ERROR(kernels::launch_decode_matmul(p, stream));
    column += part->num_rows;
  }
  return ok_status();
}

StatusOr<bool> CudaForward::qkv_then_rope(const DeviceStep& step, int32_t layer, int32_t rows,
                                          const kernels::DecodeMatmulParams& input,
                                          cudaStream_t stream) {
  const CudaLayerWeights& w = weights_.layer(layer);
  const bool rope_in_product = rope_fused_ && w.qkv_fused();
  kernels::RopeKvOutput rope;
  if (rope_in_product) rope = rope_output(step, layer, rope_table_used_);
  CELLM_RETURN_IF_ERROR(fused_qkv(w, input, rope_in_product ? &rope : nullptr, stream));
  if (rope_in_product) return false;
  CELLM_RETURN_IF_ERROR(rope_kv(step, layer, rows, stream));
  return true;
}

Status CudaForward::attention_then_output_input(const DeviceStep& step, int32_t layer, int32_t rows,
                                                bool is_static, bool after_rope_kv,
                                                kernels::DecodeMatmulParams* o,
                                                cudaStream_t stream) {
  // The output product's int8 input straight from the attention where both can.
  const bool o_takes_q8 = int8_activations_ && !int8_fold_ &&
                          kernels::decode_matmul_takes_int8(o->w) && o_takes_attention_q8(o->w);
  bool attention_wrote_q8 = false;
  CELLM_RETURN_IF_ERROR(attention(step, layer, rows, is_static, after_rope_kv, stream,
                                  o_takes_q8 ? &attention_wrote_q8 : nullptr));
  if (!attention_wrote_q8) {
    return fused_input(o, attn_, widths().attn, nullptr, nullptr, rows, stream);
  }
  o->x_q8 = x_q8_;
  o->x_q8_scales = x_q8_scales_;
  return ok_status();
}

bool CudaForward::same_fused_input(const kernels::DeviceWeight& a,
                                   const kernels::DeviceWeight& b) const {
  const auto kind = [this](const kernels::DeviceWeight& w) {
    const bool int8 = int8_activations_ && kernels::decode_matmul_takes_int8(w);
    return std::array<bool, 3>{int8, int8 && int8_input_per_256(w),
                               int8 && int8_fold_ && kernels::decode_matmul_folds_int8(w, 1)};
  };
  return a.num_cols == b.num_cols && kind(a) == kind(b);
}

bool CudaForward::o_takes_attention_q8(const kernels::DeviceWeight& wo) const {
  return attention_q8_ && (!int8_input_per_256(wo) || kquant_o_from_attention_);
}

bool CudaForward::int8_input_per_256(const kernels::DeviceWeight& w) const {
  return kquant_per_256_ && (w.type == TensorType::kQ4_K || w.type == TensorType::kQ6_K) &&
         w.num_cols % 256 == 0;
}

Status CudaForward::fused_input(kernels::DecodeMatmulParams* p, const float* x, int64_t x_stride,
                                const int32_t* x_rows, const float* norm, int32_t rows,
                                cudaStream_t stream) {
  const bool int8 = int8_activations_ && kernels::decode_matmul_takes_int8(p->w);
  if (int8 && int8_fold_ && kernels::decode_matmul_folds_int8(p->w, rows)) {
    p->int8_activations = true;  // quantized inside the product, below: f32 x as given
  } else if (int8) {
    const bool per_256 = int8_input_per_256(p->w);
    CELLM_RETURN_IF_ERROR(quantize_input(x, x_stride, x_rows, norm, nullptr, rows, p->w.num_cols,
                                         stream, per_256, /*block_sums=*/per_256, fused_trigger_));
    p->x_q8 = x_q8_;
    p->x_q8_scales = x_q8_scales_;
    p->x_q8_per_256 = per_256;
    p->x_q8_sums = per_256 ? x_q8_sums_ : nullptr;
    return ok_status();
  }
  p->x = x;
  p->x_stride = x_stride;
  p->x_rows = x_rows;
  p->norm_weight = norm;
  p->norm_eps = config_.rms_norm_eps;
  return ok_status();
}

void CudaForward::handed_over_input(kernels::DecodeMatmulParams* p) const {
  p->x_q8 = hand_q_;
  p->x_q8_scales = hand_scales_;
  p->x_q8_sum_squares = hand_sum_squares_;
  p->norm_eps = config_.rms_norm_eps;
}

void CudaForward::hand_over(kernels::DecodeMatmulParams* p, const float* next_norm) const {
  p->output = kernels::DecodeOutput::kAddHandover;
  p->handover.norm_weight = next_norm;
  p->handover.q = hand_q_;
  p->handover.scales = hand_scales_;
  p->handover.sum_squares = hand_sum_squares_;
}

Status CudaForward::enqueue_fused(const DeviceStep& step, int32_t rows, int32_t kept,
                                  bool is_static, cudaStream_t stream) {
  const ModelConfig& c = config_;
  const auto [hidden, q_width, kv_width, qkv_width, attn_width, ffn] = widths();
  const auto product = [rows, this](const kernels::DeviceWeight& w) {
    return fused_product(w, rows);
  };

  // One token: the output and down products hand the next product its normed int8 input (into
  // hand_q_: they read x_q8_, which the quantize launches and the attention write).
  const bool handover_o = handover_o_ && rows == 1;
  const bool handover_down = handover_down_ && rows == 1;
  const bool handover_swiglu = handover_swiglu_ && rows == 1;
  CELLM_RETURN_IF_ERROR(embed(step, rows, stream));
  // The angles of the step's positions, once for every layer.
  if (rope_table_used_) CELLM_RETURN_IF_ERROR(rope_table(step, rows, stream));

  for (int32_t l = 0; l < c.num_layers; ++l) {
    const CudaLayerWeights& w = weights_.layer(l);

    // q | k | v of the normed residual (+ bias); RoPE and the K/V write in its epilogue.
    // Layer 0's input comes from the embedding; the others' from the down product before.
    kernels::DecodeMatmulParams qkv = product(w.qkv_fused() ? w.qkv : w.wq);
    if (handover_down && l > 0) {
      handed_over_input(&qkv);
    } else {
      CELLM_RETURN_IF_ERROR(fused_input(&qkv, x_, hidden, nullptr, w.attn_norm, rows, stream));
    }
    CELLM_ASSIGN_OR_RETURN(const bool after_rope_kv, qkv_then_rope(step, l, rows, qkv, stream));

    // The attention, then the output product added into the residual.
    kernels::DecodeMatmulParams o = product(w.wo);
    CELLM_RETURN_IF_ERROR(
        attention_then_output_input(step, l, rows, is_static, after_rope_kv, &o, stream));
    o.y = x_;
    o.y_stride = hidden;
    o.accumulate = true;
    if (handover_o) hand_over(&o, w.ffn_norm);
    CELLM_RETURN_IF_ERROR(kernels::launch_decode_matmul(o, stream));

    // gate | up of the normed residual, SwiGLU in the epilogue; the down product added in.
    kernels::DecodeMatmulParams gate_up = product(w.gate_up);
    if (handover_o) {
      handed_over_input(&gate_up);
    } else {
      CELLM_RETURN_IF_ERROR(fused_input(&gate_up, x_, hidden, nullptr, w.ffn_norm, rows, stream));
    }
    kernels::DecodeMatmulParams down = product(w.w_down);
    if (handover_swiglu) {  // int8 values per 16 straight to down, no quantize launch
      gate_up.output = kernels::DecodeOutput::kSwigluHandover;
      gate_up.handover.q = swiglu_q_;
      gate_up.handover.scales = swiglu_scales_;
      down.x_q8 = swiglu_q_;
      down.x_q8_scales = swiglu_scales_;
      down.x_q8_per_16 = true;
    } else {
      gate_up.output = kernels::DecodeOutput::kSwiglu;
      gate_up.y = act_;
      gate_up.y_stride = ffn;
    }
    CELLM_RETURN_IF_ERROR(kernels::launch_decode_matmul(gate_up, stream));

    if (!handover_swiglu) {
      CELLM_RETURN_IF_ERROR(fused_input(&down, act_, ffn, nullptr, nullptr, rows, stream));
    }
    down.y = x_;
    down.y_stride = hidden;
    down.accumulate = true;
    if (handover_down) {
      hand_over(&down,
                l + 1 < c.num_layers ? weights_.layer(l + 1).attn_norm : weights_.output_norm());
    }
    CELLM_RETURN_IF_ERROR(kernels::launch_decode_matmul(down, stream));
  }

  // The LM head over the kept rows, gathered and normed in its prologue.
  if (kept == 0) return ok_status();
  kernels::DecodeMatmulParams head = product(weights_.output());
  head.num_tokens = kept;
  if (handover_down) {  // the one row kept
    handed_over_input(&head);
  } else {
    CELLM_RETURN_IF_ERROR(
        fused_input(&head, x_, hidden, step.kept_rows, weights_.output_norm(), kept, stream));
  }
  head.y = logits_;
  head.y_stride = c.vocab_size;
  CELLM_RETURN_IF_ERROR(kernels::launch_decode_matmul(head, stream));
  return finish_logits(kept, stream);
}

}  // namespace cellm
