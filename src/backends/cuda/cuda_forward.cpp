#include "backends/cuda/cuda_forward.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/kernels/argmax.cuh"
#include "backends/cuda/kernels/attention.cuh"
#include "backends/cuda/kernels/matmul.cuh"
#include "backends/cuda/kernels/matmul_int8.cuh"
#include "backends/cuda/kernels/matmul_wide.cuh"
#include "backends/cuda/kernels/quantize_activations.cuh"
#include "backends/cuda/kernels/rms_norm.cuh"
#include "backends/cuda/kernels/rope_kv.cuh"
#include "backends/cuda/kernels/row_gather.cuh"
#include "backends/cuda/kernels/swiglu.cuh"

namespace cellm {
namespace {

constexpr size_t kAlignment = 256;

size_t aligned(size_t bytes) { return (bytes + kAlignment - 1) / kAlignment * kAlignment; }

}  // namespace

CudaForward::CudaForward(const ModelConfig& config, const CudaWeights& weights, KvPool& pool,
                         const CudaForwardConfig& forward_config, cublasHandle_t cublas)
    : config_(config),
      weights_(weights),
      pool_(pool),
      forward_config_(forward_config),
      cublas_(cublas) {}

CudaForward::~CudaForward() = default;

StatusOr<std::unique_ptr<CudaForward>> CudaForward::create(const ModelConfig& config,
                                                           const CudaWeights& weights, KvPool& pool,
                                                           const CudaForwardConfig& fc,
                                                           cublasHandle_t cublas) {
  if (fc.max_width < 1 || fc.max_session_tokens < 1 ||
      static_cast<int32_t>(fc.layer_windows.size()) != config.num_layers) {
    return invalid_argument("cuda forward: max width " + std::to_string(fc.max_width) +
                            ", max session tokens " + std::to_string(fc.max_session_tokens) + ", " +
                            std::to_string(fc.layer_windows.size()) + " layer windows for " +
                            std::to_string(config.num_layers) + " layers");
  }
  std::unique_ptr<CudaForward> forward(new CudaForward(config, weights, pool, fc, cublas));
  const ModelConfig& c = config;
  const size_t w = static_cast<size_t>(fc.max_width);
  const size_t qkv_width = static_cast<size_t>(c.q_width() + c.kv_width() + c.v_width());
  const size_t attn_width = static_cast<size_t>(c.num_heads) * c.value_head_dim;
  const size_t f = sizeof(float);
  CELLM_RETURN_IF_ERROR(kernels::prepare_attention_kernels());
  int device = 0;
  CELLM_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  CELLM_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&forward->num_sms_, cudaDevAttrMultiProcessorCount, device));
  // The peak memory bandwidth: two transfers per memory clock over the bus.
  int memory_clock_khz = 0;
  int bus_width_bits = 0;
  if (cudaDeviceGetAttribute(&memory_clock_khz, cudaDevAttrMemoryClockRate, device) ==
          cudaSuccess &&
      cudaDeviceGetAttribute(&bus_width_bits, cudaDevAttrGlobalMemoryBusWidth, device) ==
          cudaSuccess) {
    forward->peak_bandwidth_bytes_per_s_ =
        2.0 * memory_clock_khz * 1e3 * static_cast<double>(bus_width_bits) / 8.0;
  } else {
    (void)cudaGetLastError();  // not an error here: left 0, the fast bus's defaults apply
  }
  // Split-context partials of the decode attention: the most any width up to W asks for at the
  // longest context (enqueue never asks for more than this holds).
  size_t attention_scratch = 0;
  for (int32_t t = 1;; t = std::min(2 * t, fc.max_width)) {
    const int32_t splits = kernels::decode_attention_default_splits(
        t, c.num_kv_heads, fc.max_session_tokens, forward->num_sms_);
    attention_scratch = std::max(attention_scratch, kernels::decode_attention_scratch_bytes(
                                                        t, c.num_heads, c.value_head_dim, splits));
    if (t == fc.max_width) break;
  }
  forward->attention_scratch_bytes_ = attention_scratch;
  // The wide matmul path's dequantization tiles: the largest any weight needs at W rows.
  size_t matmul_scratch = 0;
  const auto consider = [&](const kernels::DeviceWeight& m) {
    if (m.data != nullptr) {
      matmul_scratch =
          std::max(matmul_scratch, kernels::matmul_wide_scratch_bytes(m, fc.max_width));
    }
  };
  consider(weights.output());
  for (int32_t l = 0; l < c.num_layers; ++l) {
    const CudaLayerWeights& lw = weights.layer(l);
    for (const kernels::DeviceWeight* m :
         {&lw.qkv, &lw.wq, &lw.wk, &lw.wv, &lw.wo, &lw.gate_up, &lw.w_gate, &lw.w_up, &lw.w_down}) {
      consider(*m);
    }
  }
  forward->matmul_scratch_bytes_ = matmul_scratch;
  forward->argmax_scratch_bytes_ = kernels::argmax_scratch_bytes(fc.max_width);
  // int8 activations of the fused path (up to kDecodeMatmulMaxTokens rows) and of the int8
  // tensor-core products (up to kInt8MatmulMaxTokens) of the widest input.
  const size_t max_k = static_cast<size_t>(
      std::max({static_cast<int64_t>(c.hidden_size), static_cast<int64_t>(attn_width),
                static_cast<int64_t>(c.ffn_size)}));
  const size_t q8_rows = static_cast<size_t>(std::max(
      kernels::kDecodeMatmulMaxTokens, std::min(kernels::kInt8MatmulMaxTokens, fc.max_width)));
  const size_t sizes[] = {
      w * static_cast<size_t>(c.hidden_size) * f,   // x
      w * static_cast<size_t>(c.hidden_size) * f,   // xn
      w * qkv_width * f,                            // qkv
      w * attn_width * f,                           // attn
      w * 2 * static_cast<size_t>(c.ffn_size) * f,  // gate_up
      w * static_cast<size_t>(c.ffn_size) * f,      // act
      w * static_cast<size_t>(c.vocab_size) * f,    // logits
      forward->attention_scratch_bytes_,            // attention partials
      matmul_scratch,                               // matmul tiles
      w * sizeof(int32_t),                          // zero rows (bias broadcast)
      w * sizeof(int32_t),                          // argmax tokens
      forward->argmax_scratch_bytes_,               // argmax partials and counters
      q8_rows * max_k,                              // int8 activations
      q8_rows * (max_k / 32 + 1) * sizeof(float),   // their scales
      w * static_cast<size_t>(std::max(c.rope.num_rotary_dims, 0) / 2) * sizeof(float2),  // RoPE
      w * max_k * sizeof(uint16_t),                                                       // x wide
      static_cast<size_t>(c.hidden_size),                        // handed-over int8 input
      static_cast<size_t>(c.hidden_size / 32) * sizeof(float),   // its scales
      static_cast<size_t>(c.hidden_size / 32) * sizeof(double),  // its sums of squares
      q8_rows * (max_k / 32) * sizeof(int32_t),                  // int8 activations' block sums
      static_cast<size_t>(c.ffn_size),                           // handed-over SwiGLU values
      static_cast<size_t>(c.ffn_size / 16 + 1) * sizeof(float),  // their scales
  };
  size_t total = 0;
  for (const size_t s : sizes) total += aligned(s);
  CELLM_ASSIGN_OR_RETURN(forward->scratch_, DeviceBuffer::allocate(total));
  uint8_t* at = forward->scratch_.as<uint8_t>();
  const auto take = [&at](size_t bytes) {
    uint8_t* p = at;
    at += aligned(bytes);
    return p;
  };
  forward->x_ = reinterpret_cast<float*>(take(sizes[0]));
  forward->xn_ = reinterpret_cast<float*>(take(sizes[1]));
  forward->qkv_ = reinterpret_cast<float*>(take(sizes[2]));
  forward->attn_ = reinterpret_cast<float*>(take(sizes[3]));
  forward->gate_up_ = reinterpret_cast<float*>(take(sizes[4]));
  forward->act_ = reinterpret_cast<float*>(take(sizes[5]));
  forward->logits_ = reinterpret_cast<float*>(take(sizes[6]));
  forward->attention_scratch_ = sizes[7] > 0 ? take(sizes[7]) : nullptr;
  forward->matmul_scratch_ = sizes[8] > 0 ? take(sizes[8]) : nullptr;
  forward->zero_rows_ = reinterpret_cast<int32_t*>(take(sizes[9]));
  forward->argmax_tokens_ = reinterpret_cast<int32_t*>(take(sizes[10]));
  forward->argmax_scratch_ = take(sizes[11]);
  forward->x_q8_ = reinterpret_cast<int8_t*>(take(sizes[12]));
  forward->x_q8_scales_ = reinterpret_cast<float*>(take(sizes[13]));
  forward->rope_table_ = reinterpret_cast<float2*>(take(sizes[14]));
  forward->x_wide_ = reinterpret_cast<uint16_t*>(take(sizes[15]));
  forward->hand_q_ = reinterpret_cast<int8_t*>(take(sizes[16]));
  forward->hand_scales_ = reinterpret_cast<float*>(take(sizes[17]));
  forward->hand_sum_squares_ = reinterpret_cast<double*>(take(sizes[18]));
  forward->x_q8_sums_ = reinterpret_cast<int32_t*>(take(sizes[19]));
  forward->swiglu_q_ = reinterpret_cast<int8_t*>(take(sizes[20]));
  forward->swiglu_scales_ = reinterpret_cast<float*>(take(sizes[21]));
  CELLM_CUDA_RETURN_IF_ERROR(cudaMemset(forward->zero_rows_, 0, sizes[9]));
  CELLM_CUDA_RETURN_IF_ERROR(cudaMemset(forward->argmax_scratch_, 0, sizes[11]));
  forward->plan_fused_path();
  CELLM_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  return forward;
}

Status CudaForward::matmul(const kernels::DeviceWeight& w, const float* x, int64_t x_stride,
                           int32_t rows, float* y, int64_t y_stride, bool accumulate,
                           cudaStream_t stream, WideInput wide) {
  if (int8_matmul_applies(w, rows)) {
    return int8_matmul(w, x, x_stride, nullptr, nullptr, nullptr, rows, y, y_stride, accumulate,
                       stream);
  }
  if (int8_decode_applies(w, rows)) {
    return int8_decode_matmul(w, x, x_stride, rows, y, y_stride, accumulate, stream);
  }
  kernels::MatmulParams p;
  p.w = w;
  p.x = wide.has_value() ? nullptr : x;
  p.x_stride = x_stride;
  if (wide.has_value()) {
    p.x_wide = x_wide_;
    p.x_wide_order = *wide;
  }
  p.num_tokens = rows;
  p.y = y;
  p.y_stride = y_stride;
  p.accumulate = accumulate;
  p.w_bf16 = weights_.bf16_copy(w);
  p.cublas = cublas_;
  p.scratch = matmul_scratch_;
  p.scratch_bytes = matmul_scratch_bytes_;
  return kernels::launch_matmul(p, stream);
}

Status CudaForward::int8_decode_matmul(const kernels::DeviceWeight& w, const float* x,
                                       int64_t x_stride, int32_t rows, float* y, int64_t y_stride,
                                       bool accumulate, cudaStream_t stream) {
  const bool per_256 = int8_input_per_256(w);
  CELLM_RETURN_IF_ERROR(quantize_input(x, x_stride, nullptr, nullptr, nullptr, rows, w.num_cols,
                                       stream, per_256, /*block_sums=*/per_256));
  kernels::DecodeMatmulParams d;
  d.w = w;
  d.num_tokens = rows;
  d.x_q8 = x_q8_;
  d.x_q8_scales = x_q8_scales_;
  d.x_q8_per_256 = per_256;
  d.x_q8_sums = per_256 ? x_q8_sums_ : nullptr;
  d.y = y;
  d.y_stride = y_stride;
  d.accumulate = accumulate;
  return kernels::launch_decode_matmul(d, stream);
}

CudaForward::WideInput CudaForward::wide_input(const kernels::DeviceWeight& w, int32_t rows) const {
  if (!wide_input_ || w.data == nullptr || int8_matmul_applies(w, rows) ||
      int8_decode_applies(w, rows)) {
    return std::nullopt;
  }
  return kernels::matmul_wide_input_order(w, rows, weights_.bf16_copy(w) != nullptr);
}

bool CudaForward::int8_decode_applies(const kernels::DeviceWeight& w, int32_t rows) const {
  return int8_activations_ && rows <= kquant_fused_rows_ &&
         (w.type == TensorType::kQ4_K || w.type == TensorType::kQ6_K) &&
         kernels::decode_matmul_takes_int8(w) && !int8_matmul_applies(w, rows);
}

bool CudaForward::int8_matmul_applies(const kernels::DeviceWeight& w, int32_t rows) const {
  return rows <= int8_matmul_rows_ && kernels::int8_matmul_supports(w) &&
         rows >= kernels::int8_matmul_min_tokens(w.type);
}

Status CudaForward::int8_matmul(const kernels::DeviceWeight& w, const float* x, int64_t x_stride,
                                const int32_t* x_rows, const float* norm, const float* bias,
                                int32_t rows, float* y, int64_t y_stride, bool accumulate,
                                cudaStream_t stream, const kernels::RopeKvOutput* rope) {
  const bool per_256 = int8_input_per_256(w);  // the quantize and the product agree
  CELLM_RETURN_IF_ERROR(
      quantize_input(x, x_stride, x_rows, norm, nullptr, rows, w.num_cols, stream, per_256));
  return int8_product(w, bias, rows, y, y_stride, accumulate, per_256, stream, rope);
}

Status CudaForward::quantize_input(const float* x, int64_t x_stride, const int32_t* x_rows,
                                   const float* norm, const float* up, int32_t rows,
                                   int64_t num_cols, cudaStream_t stream, bool per_256,
                                   bool block_sums, kernels::PdlTrigger trigger) {
  return kernels::launch_quantize_activations(
      quantize_params(x, x_stride, x_rows, norm, up, rows, num_cols, per_256, block_sums, trigger),
      stream);
}

kernels::QuantizeActivationsParams CudaForward::quantize_params(const float* x, int64_t x_stride,
                                                                const int32_t* x_rows,
                                                                const float* norm, const float* up,
                                                                int32_t rows, int64_t num_cols,
                                                                bool per_256, bool block_sums,
                                                                kernels::PdlTrigger trigger) const {
  kernels::QuantizeActivationsParams q;
  q.num_tokens = rows;
  q.num_cols = num_cols;
  q.x = x;
  q.x_stride = x_stride;
  q.x_rows = x_rows;
  q.norm_weight = norm;
  q.norm_eps = config_.rms_norm_eps;
  q.up = up;
  q.q = x_q8_;
  q.scales = x_q8_scales_;
  q.per_256 = per_256;
  q.sums = block_sums ? x_q8_sums_ : nullptr;
  q.trigger = trigger;
  return q;
}

Status CudaForward::int8_product(const kernels::DeviceWeight& w, const float* bias, int32_t rows,
                                 float* y, int64_t y_stride, bool accumulate, bool per_256,
                                 cudaStream_t stream, const kernels::RopeKvOutput* rope) {
  kernels::Int8MatmulParams p;
  p.w = w;
  p.num_tokens = rows;
  p.x_q8 = x_q8_;
  p.x_q8_scales = x_q8_scales_;
  p.x_q8_per_256 = per_256;
  p.bias = bias;
  p.y = y;
  p.y_stride = y_stride;
  p.accumulate = accumulate;
  if (rope != nullptr) {
    p.rope_kv = true;
    p.rope = *rope;
  }
  return kernels::launch_int8_matmul(p, stream);
}

Status CudaForward::rms_norm(const float* weight, float* x, float* y, int32_t rows,
                             cudaStream_t stream, WideInput wide, const float* add) {
  kernels::RmsNormParams p;
  p.num_rows = rows;
  p.dim = config_.hidden_size;
  p.eps = config_.rms_norm_eps;
  p.weight = weight;
  p.x = x;
  p.x_stride = config_.hidden_size;
  p.add = add;
  p.add_stride = config_.hidden_size;
  p.y = wide.has_value() ? nullptr : y;
  p.y_stride = config_.hidden_size;
  if (wide.has_value()) {
    p.y_wide = x_wide_;
    p.y_wide_order = *wide;
  }
  return kernels::launch_rms_norm(p, stream);
}

Status CudaForward::enqueue(const DeviceStep& step, ForwardShape shape, cudaStream_t stream) {
  const ModelConfig& c = config_;
  const bool is_static = shape == ForwardShape::kStatic;
  const int32_t rows = is_static ? step.width : step.num_tokens;
  const int32_t kept = is_static ? step.width : step.num_kept;
  if (rows < 1 || rows > forward_config_.max_width || step.num_tokens > step.width || kept > rows) {
    return invalid_argument(
        "cuda forward: " + std::to_string(rows) + " rows (" + std::to_string(step.num_tokens) +
        " tokens, width " + std::to_string(step.width) + ", " + std::to_string(kept) +
        " kept) outside [1, " + std::to_string(forward_config_.max_width) + "]");
  }
  const auto [hidden, q_width, kv_width, qkv_width, attn_width, ffn] = widths();
  if (c.has_post_norms) {
    return rows <= post_norm_fused_rows_
               ? enqueue_post_norm_fused(step, rows, kept, is_static, stream)
               : enqueue_post_norm(step, rows, kept, is_static, stream);
  }
  if (rows <= fused_max_rows_) return enqueue_fused(step, rows, kept, is_static, stream);

  CELLM_RETURN_IF_ERROR(embed(step, rows, stream));
  // The angles of the step's positions, once for every layer: the int8 q|k|v products read them
  // where they do RoPE and the K/V write in their epilogue (rope_fused_), rope_kv elsewhere.
  if (rope_table_used_) CELLM_RETURN_IF_ERROR(rope_table(step, rows, stream));

  for (int32_t l = 0; l < c.num_layers; ++l) {
    const CudaLayerWeights& w = weights_.layer(l);
    // q | k | v of the normed residual (+ bias): on the int8 tensor cores with the norm folded
    // into the quantize launch (and RoPE + the K/V write in the product where rope_fused_), or
    // normed into xn_ first.
    const bool int8_qkv = w.qkv_fused() && int8_matmul_applies(w.qkv, rows);
    const bool rope_in_product = int8_qkv && rope_fused_;
    if (int8_qkv) {
      kernels::RopeKvOutput rope;
      if (rope_in_product) rope = rope_output(step, l, rope_table_used_);
      CELLM_RETURN_IF_ERROR(int8_matmul(w.qkv, x_, hidden, nullptr, w.attn_norm, w.qkv_bias, rows,
                                        qkv_, qkv_width, false, stream,
                                        rope_in_product ? &rope : nullptr));
    } else {
      CELLM_RETURN_IF_ERROR(unfused_qkv(w, rows, stream));
    }

    // q/k norms, RoPE on q and k, K and V into the tokens' rows.
    if (!rope_in_product) CELLM_RETURN_IF_ERROR(rope_kv(step, l, rows, stream));

    // The output product's int8 input, or its bf16 input in the order it takes, straight from
    // the decode attention where both can.
    const bool o_int8 = int8_matmul_applies(w.wo, rows) && o_takes_attention_q8(w.wo);
    const WideInput o_wide = wide_input(w.wo, rows);
    bool attention_wrote_q8 = false;
    bool attention_wrote_wide = false;
    CELLM_RETURN_IF_ERROR(attention(step, l, rows, is_static, !rope_in_product, stream,
                                    o_int8 ? &attention_wrote_q8 : nullptr, o_wide,
                                    &attention_wrote_wide));
    if (attention_wrote_q8) {
      CELLM_RETURN_IF_ERROR(int8_product(w.wo, nullptr, rows, x_, hidden, true, false, stream));
    } else {
      CELLM_RETURN_IF_ERROR(matmul(w.wo, attn_, attn_width, rows, x_, hidden, true, stream,
                                   attention_wrote_wide ? o_wide : std::nullopt));
    }

    // gate | up of the normed residual (the norm folded as above), SwiGLU (folded into the int8
    // down product's quantize launch), the down product.
    if (w.gate_up_fused() && int8_matmul_applies(w.gate_up, rows)) {
      CELLM_RETURN_IF_ERROR(int8_matmul(w.gate_up, x_, hidden, nullptr, w.ffn_norm, nullptr, rows,
                                        gate_up_, 2 * ffn, false, stream));
    } else {
      const WideInput wide = w.gate_up_fused() ? wide_input(w.gate_up, rows)
                                               : shared_wide_input(wide_input(w.w_gate, rows),
                                                                   wide_input(w.w_up, rows));
      CELLM_RETURN_IF_ERROR(rms_norm(w.ffn_norm, x_, xn_, rows, stream, wide));
      if (w.gate_up_fused()) {
        CELLM_RETURN_IF_ERROR(
            matmul(w.gate_up, xn_, hidden, rows, gate_up_, 2 * ffn, false, stream, wide));
      } else {
        CELLM_RETURN_IF_ERROR(
            matmul(w.w_gate, xn_, hidden, rows, gate_up_, 2 * ffn, false, stream, wide));
        CELLM_RETURN_IF_ERROR(
            matmul(w.w_up, xn_, hidden, rows, gate_up_ + ffn, 2 * ffn, false, stream, wide));
      }
    }
    if (int8_matmul_applies(w.w_down, rows)) {  // SwiGLU folded into the down input's quantize
      const bool per_256 = int8_input_per_256(w.w_down);
      CELLM_RETURN_IF_ERROR(quantize_input(gate_up_, 2 * ffn, nullptr, nullptr, gate_up_ + ffn,
                                           rows, ffn, stream, per_256));
      CELLM_RETURN_IF_ERROR(
          int8_product(w.w_down, nullptr, rows, x_, hidden, true, per_256, stream));
    } else {
      kernels::SwigluParams swiglu = kernels::swiglu_fused_params(gate_up_, rows, ffn, act_);
      const WideInput wide = wide_input(w.w_down, rows);
      if (wide.has_value()) {
        swiglu.out = nullptr;
        swiglu.out_wide = x_wide_;
        swiglu.out_wide_order = *wide;
      }
      CELLM_RETURN_IF_ERROR(kernels::launch_swiglu(swiglu, stream));
      CELLM_RETURN_IF_ERROR(matmul(w.w_down, act_, ffn, rows, x_, hidden, true, stream, wide));
    }
  }

  // The kept rows only: gathered and normed (folded into the quantize launch of the int8 product,
  // or a gather and a norm launch), the LM head.
  if (kept == 0) return ok_status();
  if (int8_matmul_applies(weights_.output(), kept)) {
    CELLM_RETURN_IF_ERROR(int8_matmul(weights_.output(), x_, hidden, step.kept_rows,
                                      weights_.output_norm(), nullptr, kept, logits_, c.vocab_size,
                                      false, stream));
    return finish_logits(kept, stream);
  }
  CELLM_RETURN_IF_ERROR(gather_kept_rows(step, kept, x_, rows, xn_, stream));
  const WideInput wide = wide_input(weights_.output(), kept);
  CELLM_RETURN_IF_ERROR(rms_norm(weights_.output_norm(), xn_, xn_, kept, stream, wide));
  CELLM_RETURN_IF_ERROR(
      matmul(weights_.output(), xn_, hidden, kept, logits_, c.vocab_size, false, stream, wide));
  return finish_logits(kept, stream);
}

Status CudaForward::unfused_qkv(const CudaLayerWeights& w, int32_t rows, cudaStream_t stream) {
  const auto [hidden, q_width, kv_width, qkv_width, attn_width, ffn] = widths();
  // q, k and v apart (Q4_K_M's Q6_K v), each on the int8 tensor cores with one kind of input:
  // one quantize launch with the norm folded in, then the three products into their columns.
  const bool int8_apart = int8_qkv_apart_ && !w.qkv_fused() && int8_matmul_applies(w.wq, rows) &&
                          int8_matmul_applies(w.wk, rows) && int8_matmul_applies(w.wv, rows) &&
                          int8_input_per_256(w.wq) == int8_input_per_256(w.wk) &&
                          int8_input_per_256(w.wq) == int8_input_per_256(w.wv);
  if (int8_apart) {
    const bool per_256 = int8_input_per_256(w.wq);
    CELLM_RETURN_IF_ERROR(
        quantize_input(x_, hidden, nullptr, w.attn_norm, nullptr, rows, hidden, stream, per_256));
    int64_t column = 0;
    for (const kernels::DeviceWeight* part : {&w.wq, &w.wk, &w.wv}) {
      const float* bias = w.qkv_bias != nullptr ? w.qkv_bias + column : nullptr;
      CELLM_RETURN_IF_ERROR(
          int8_product(*part, bias, rows, qkv_ + column, qkv_width, false, per_256, stream));
      column += part->num_rows;
    }
    return ok_status();
  }
  const WideInput wide =
      w.qkv_fused()
          ? wide_input(w.qkv, rows)
          : shared_wide_input(shared_wide_input(wide_input(w.wq, rows), wide_input(w.wk, rows)),
                              wide_input(w.wv, rows));
  CELLM_RETURN_IF_ERROR(rms_norm(w.attn_norm, x_, xn_, rows, stream, wide));
  const bool bias = w.qkv_bias != nullptr;
  if (bias) {
    kernels::RowGatherParams g;
    g.num_rows = rows;
    g.dim = qkv_width;
    g.rows = zero_rows_;
    g.src = w.qkv_bias;
    g.src_stride = qkv_width;
    g.num_src_rows = 1;
    g.dst = qkv_;
    g.dst_stride = qkv_width;
    CELLM_RETURN_IF_ERROR(kernels::launch_row_gather(g, stream));
  }
  if (w.qkv_fused()) {
    return matmul(w.qkv, xn_, hidden, rows, qkv_, qkv_width, bias, stream, wide);
  }
  CELLM_RETURN_IF_ERROR(matmul(w.wq, xn_, hidden, rows, qkv_, qkv_width, bias, stream, wide));
  CELLM_RETURN_IF_ERROR(
      matmul(w.wk, xn_, hidden, rows, qkv_ + q_width, qkv_width, bias, stream, wide));
  return matmul(w.wv, xn_, hidden, rows, qkv_ + q_width + kv_width, qkv_width, bias, stream, wide);
}

CudaForward::Widths CudaForward::widths() const {
  const ModelConfig& c = config_;
  const int64_t q_width = c.q_width();
  const int64_t kv_width = c.kv_width();
  return Widths{c.hidden_size,
                q_width,
                kv_width,
                q_width + kv_width + c.v_width(),
                static_cast<int64_t>(c.num_heads) * c.value_head_dim,
                c.ffn_size};
}

}  // namespace cellm
