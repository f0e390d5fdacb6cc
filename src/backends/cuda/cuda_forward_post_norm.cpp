// CudaForward's paths for models whose blocks are normed again before they join the residual
// stream (ModelConfig::has_post_norms: gemma3).
//
// The fused path (slices of at most post_norm_fused_rows_ rows, every product on int8 activations
// quantized by launches): per layer one quantize launch joins the previous block's output, normed
// by its post norm, to the residual and quantizes the residual normed by the attention norm; the
// q|k|v decode products; q/k norms + RoPE + the K/V write (rope_kv); the attention, which
// quantizes the output product's input where it can; the output product into a scratch row; one
// quantize launch joining it (post-normed) and quantizing the MLP's normed input; gate|up with
// GeGLU (or SwiGLU) in its epilogue; a quantize launch; the down product into a scratch row. The
// last block's output joins the residual in the LM head's quantize launch (kept rows gathered,
// the final norm). Nine launches a layer where the plain path takes fifteen. The residual moves
// between x_ and xn_ at every join (the launch reads the whole old row in each of its CTAs).
//
// The plain path — the sequence of launches, none folded into another: per layer the attention norm
// (with the previous block's post-normed output added into the residual first), the q|k|v products,
// q/k norms + RoPE + the K/V write (rope_kv, the layer's own rope), the attention, the output
// product into a scratch row, its post norm, the add and the MLP norm, the gate|up products, the
// gated activation (SwiGLU or GeGLU), the down product into a scratch row and its post norm; then
// the last add with the final norm, the kept rows gathered and the LM head. A product of few rows
// whose weight takes int8 activations runs the fused decode product on a quantize launch's output;
// others go through matmul(), which picks the int8 tensor cores, the small-M kernels or the wide
// ones by width as on the main path.
#include <utility>

#include "backends/cuda/cuda_forward.h"
#include "backends/cuda/kernels/decode_matmul.cuh"
#include "backends/cuda/kernels/matmul.cuh"
#include "backends/cuda/kernels/swiglu.cuh"

namespace cellm {

Status CudaForward::enqueue_post_norm(const DeviceStep& step, int32_t rows, int32_t kept,
                                      bool is_static, cudaStream_t stream) {
  const ModelConfig& c = config_;
  const auto [hidden, q_width, kv_width, qkv_width, attn_width, ffn] = widths();
  CELLM_CHECK(ffn >= hidden) << "post-norm path: the MLP's scratch rows hold a block's output";
  // A block's output before it joins the residual: the output product's in act_ (free until the
  // activation), the down product's in gate_up_ (free after it). [rows, hidden] each.
  float* attn_out = act_;
  float* mlp_out = gate_up_;
  // Few rows of a weight that takes int8 activations (Q8_0, Q4_0, K-quants): the fused decode
  // product on a quantize launch's output, as the main path's small steps run; else matmul().
  const auto product = [&](const kernels::DeviceWeight& weight, const float* x, int64_t x_stride,
                           int32_t num_rows, float* y, int64_t y_stride) {
    if (int8_activations_ && num_rows <= kernels::small_m_max_tokens(weight.type) &&
        kernels::decode_matmul_supports(weight) && kernels::decode_matmul_takes_int8(weight) &&
        !int8_matmul_applies(weight, num_rows)) {
      return int8_decode_matmul(weight, x, x_stride, num_rows, y, y_stride, false, stream);
    }
    return matmul(weight, x, x_stride, num_rows, y, y_stride, false, stream);
  };
  CELLM_RETURN_IF_ERROR(embed(step, rows, stream));
  // The angles of the step's positions, once for every layer (one rope for all: gemma2).
  if (rope_table_used_) CELLM_RETURN_IF_ERROR(rope_table(step, rows, stream));
  for (int32_t l = 0; l < c.num_layers; ++l) {
    const CudaLayerWeights& w = weights_.layer(l);
    // The previous block's output joins the residual, then the attention norm.
    CELLM_RETURN_IF_ERROR(
        rms_norm(w.attn_norm, x_, xn_, rows, stream, std::nullopt, l == 0 ? nullptr : mlp_out));
    if (w.qkv_fused()) {
      CELLM_RETURN_IF_ERROR(product(w.qkv, xn_, hidden, rows, qkv_, qkv_width));
    } else {
      CELLM_RETURN_IF_ERROR(product(w.wq, xn_, hidden, rows, qkv_, qkv_width));
      CELLM_RETURN_IF_ERROR(product(w.wk, xn_, hidden, rows, qkv_ + q_width, qkv_width));
      CELLM_RETURN_IF_ERROR(product(w.wv, xn_, hidden, rows, qkv_ + q_width + kv_width, qkv_width));
    }
    CELLM_RETURN_IF_ERROR(rope_kv(step, l, rows, stream));
    CELLM_RETURN_IF_ERROR(attention(step, l, rows, is_static, /*after_rope_kv=*/true, stream));
    CELLM_RETURN_IF_ERROR(product(w.wo, attn_, attn_width, rows, attn_out, hidden));
    CELLM_RETURN_IF_ERROR(rms_norm(w.post_attn_norm, attn_out, attn_out, rows, stream));
    CELLM_RETURN_IF_ERROR(rms_norm(w.ffn_norm, x_, xn_, rows, stream, std::nullopt, attn_out));
    if (w.gate_up_fused()) {
      CELLM_RETURN_IF_ERROR(product(w.gate_up, xn_, hidden, rows, gate_up_, 2 * ffn));
    } else {
      CELLM_RETURN_IF_ERROR(product(w.w_gate, xn_, hidden, rows, gate_up_, 2 * ffn));
      CELLM_RETURN_IF_ERROR(product(w.w_up, xn_, hidden, rows, gate_up_ + ffn, 2 * ffn));
    }
    kernels::SwigluParams act = kernels::swiglu_fused_params(gate_up_, rows, ffn, act_);
    act.gelu_tanh = c.ffn_activation == FfnActivation::kGeluTanh;
    CELLM_RETURN_IF_ERROR(kernels::launch_swiglu(act, stream));
    CELLM_RETURN_IF_ERROR(product(w.w_down, act_, ffn, rows, mlp_out, hidden));
    CELLM_RETURN_IF_ERROR(rms_norm(w.post_ffn_norm, mlp_out, mlp_out, rows, stream));
  }
  // The last block's output joins the residual with the final norm; the kept rows, the LM head.
  CELLM_RETURN_IF_ERROR(
      rms_norm(weights_.output_norm(), x_, xn_, rows, stream, std::nullopt, mlp_out));
  if (kept == 0) return ok_status();
  CELLM_RETURN_IF_ERROR(gather_kept_rows(step, kept, xn_, rows, x_, stream));  // x_ is spent
  CELLM_RETURN_IF_ERROR(product(weights_.output(), x_, hidden, kept, logits_, c.vocab_size));
  return finish_logits(kept, stream);
}

Status CudaForward::post_norm_input(kernels::DecodeMatmulParams* p, float** residual, float** spare,
                                    const float* add, const float* add_norm, const float* norm,
                                    const int32_t* x_rows, int32_t rows, cudaStream_t stream) {
  const int64_t hidden = config_.hidden_size;
  const bool per_256 = int8_input_per_256(p->w);
  kernels::QuantizeActivationsParams q =
      quantize_params(*residual, hidden, x_rows, norm, nullptr, rows, p->w.num_cols, per_256,
                      per_256, fused_trigger_);
  if (add != nullptr) {
    q.add = add;
    q.add_stride = hidden;
    q.add_norm_weight = add_norm;
    q.x_out = *spare;
    std::swap(*residual, *spare);
  }
  CELLM_RETURN_IF_ERROR(kernels::launch_quantize_activations(q, stream));
  p->x_q8 = x_q8_;
  p->x_q8_scales = x_q8_scales_;
  p->x_q8_per_256 = per_256;
  p->x_q8_sums = per_256 ? x_q8_sums_ : nullptr;
  return ok_status();
}

Status CudaForward::enqueue_post_norm_fused(const DeviceStep& step, int32_t rows, int32_t kept,
                                            bool is_static, cudaStream_t stream) {
  const ModelConfig& c = config_;
  const auto [hidden, q_width, kv_width, qkv_width, attn_width, ffn] = widths();
  CELLM_CHECK(ffn >= hidden) << "post-norm path: gate_up_'s rows hold the down product's output";
  // The blocks' outputs before they join the residual: the output product's in attn_out (act_:
  // joined before gate|up writes act_), the down product's in mlp_out (gate_up_: unused here).
  // [rows, hidden] each.
  float* attn_out = act_;
  float* mlp_out = gate_up_;
  float* residual = x_;  // [rows, hidden]; moves to xn_ and back at every join
  float* spare = xn_;
  const auto product = [rows, this](const kernels::DeviceWeight& w) {
    return fused_product(w, rows);
  };
  CELLM_RETURN_IF_ERROR(embed(step, rows, stream));
  // The angles of the step's positions, once for every layer (one rope for all: gemma2).
  if (rope_table_used_) CELLM_RETURN_IF_ERROR(rope_table(step, rows, stream));
  for (int32_t l = 0; l < c.num_layers; ++l) {
    const CudaLayerWeights& w = weights_.layer(l);
    // q | k | v of the normed residual, the previous block's output joined to it first.
    kernels::DecodeMatmulParams qkv = product(w.qkv_fused() ? w.qkv : w.wq);
    const float* before_norm = l > 0 ? weights_.layer(l - 1).post_ffn_norm : nullptr;
    CELLM_RETURN_IF_ERROR(post_norm_input(&qkv, &residual, &spare, l > 0 ? mlp_out : nullptr,
                                          before_norm, w.attn_norm, nullptr, rows, stream));
    // RoPE and the K/V write in the product's epilogue where the layer has no q/k norms (gemma2),
    // else rope_kv (gemma3).
    CELLM_ASSIGN_OR_RETURN(const bool after_rope_kv, qkv_then_rope(step, l, rows, qkv, stream));

    kernels::DecodeMatmulParams o = product(w.wo);
    CELLM_RETURN_IF_ERROR(
        attention_then_output_input(step, l, rows, is_static, after_rope_kv, &o, stream));
    o.y = attn_out;
    o.y_stride = hidden;
    CELLM_RETURN_IF_ERROR(kernels::launch_decode_matmul(o, stream));

    // gate | up of the normed residual after the attention's output joined it; the gated
    // activation in the epilogue; the down product into mlp_out.
    kernels::DecodeMatmulParams gate_up = product(w.gate_up);
    CELLM_RETURN_IF_ERROR(post_norm_input(&gate_up, &residual, &spare, attn_out, w.post_attn_norm,
                                          w.ffn_norm, nullptr, rows, stream));
    gate_up.output = kernels::DecodeOutput::kSwiglu;
    gate_up.gelu_tanh = c.ffn_activation == FfnActivation::kGeluTanh;
    gate_up.y = act_;
    gate_up.y_stride = ffn;
    CELLM_RETURN_IF_ERROR(kernels::launch_decode_matmul(gate_up, stream));

    kernels::DecodeMatmulParams down = product(w.w_down);
    CELLM_RETURN_IF_ERROR(fused_input(&down, act_, ffn, nullptr, nullptr, rows, stream));
    down.y = mlp_out;
    down.y_stride = hidden;
    CELLM_RETURN_IF_ERROR(kernels::launch_decode_matmul(down, stream));
  }
  // The last block's output joins the kept rows of the residual, normed by the final norm, in
  // the LM head's quantize launch; a head without int8 activations (a tied bf16 embedding) takes
  // the plain path's tail: the post norm, the add with the final norm, the kept rows, matmul().
  if (kept == 0) return ok_status();
  const kernels::DeviceWeight& output = weights_.output();
  const float* last_post_norm = weights_.layer(c.num_layers - 1).post_ffn_norm;
  if (!kernels::decode_matmul_supports(output) || !kernels::decode_matmul_takes_int8(output)) {
    CELLM_RETURN_IF_ERROR(rms_norm(last_post_norm, mlp_out, mlp_out, rows, stream));
    CELLM_RETURN_IF_ERROR(
        rms_norm(weights_.output_norm(), residual, spare, rows, stream, std::nullopt, mlp_out));
    CELLM_RETURN_IF_ERROR(gather_kept_rows(step, kept, spare, rows, residual, stream));
    CELLM_RETURN_IF_ERROR(
        matmul(output, residual, hidden, kept, logits_, c.vocab_size, false, stream));
    return finish_logits(kept, stream);
  }
  kernels::DecodeMatmulParams head = product(output);
  head.num_tokens = kept;
  CELLM_RETURN_IF_ERROR(post_norm_input(&head, &residual, &spare, mlp_out, last_post_norm,
                                        weights_.output_norm(), step.kept_rows, kept, stream));
  head.y = logits_;
  head.y_stride = c.vocab_size;
  CELLM_RETURN_IF_ERROR(kernels::launch_decode_matmul(head, stream));
  return finish_logits(kept, stream);
}

}  // namespace cellm
