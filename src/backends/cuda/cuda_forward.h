// CudaForward: the forward of one slice on the GPU — the function CpuForward computes
// (cpu_forward.h), enqueued as kernels on a stream: (tokens, positions, kept rows) → logits of
// the kept rows, with K/V written into a KvPool at the rows a DeviceStep names.
//
// Per layer: RMSNorm; one q/k/v product (fused weights) or three; biases, q/k norms and RoPE on
// q and k with K/V written to each token's row; attention of each token over its own sequence's
// rows; the output product added into the residual; RMSNorm; one gate/up product or two; SwiGLU;
// the down product added into the residual. Then the kept rows are gathered, normed and sent
// through the LM head into a device logits buffer. Two shapes:
//   kStatic (decode): every kernel runs `step.width` rows and reads every per-step size from the
//     step's device arrays, so the same launches replay from a CUDA graph for any step of that
//     width; the LM head runs all `width` rows (kept rows padded), the caller copies num_kept.
//   kDynamic (prefill): `step.num_tokens` rows, sizes taken from the host copy; LM head over
//     step.num_kept rows.
// Slices of at most kDecodeMatmulMaxTokens rows (decode, short prefill chunks) run the fused
// kernels of decode_matmul.cuh when every layer allows it: RMSNorm inside the q|k|v and gate|up
// products (q|k|v one product, or three on one input where their types differ — Q4_K_M's Q6_K v —
// then the rope_kv kernel), RoPE and the K/V write in the q|k|v product's epilogue (normal-style
// RoPE without q/k norms, its angles from a table computed once per step; else rope_kv), SwiGLU in
// the gate|up epilogue, the residual adds in the output and down products' epilogues, the kept-row
// gather and final norm inside the LM head — four product launches per layer plus attention, each
// allowed to overlap the one before (pdl.cuh), one kernel ahead at most (the products and quantize
// launches trigger after their wait: PdlTrigger::kAfterWait). Q8_0 / Q4_0 / Q4_K / Q6_K products
// there take int8 activations unless int8_activations is off (K-quants with one scale per 256
// columns): one quantize launch per input, the norm folded in — the output product's input is the
// decode attention's int8 output (per 32 columns) instead (CELLM_CUDA_INT8_FOLD=1: each product
// quantizes its input itself where the rows fit its shared memory — measured slower on the H200,
// docs/perf/decode.md). Quantized weights use this path up to 4 rows, F32 up to 8, F16 / BF16 at
// one row (kernels::small_m_max_tokens and plan_fused_path say why); wider slices run the unfused
// sequence.
// Models with post norms (gemma2, gemma3) run their own sequences (cuda_forward_post_norm.cpp):
// fused as far as the main path's would on int8 activations — the quantize launch before q|k|v
// and before gate|up also joins the post-normed block output to the residual, GeGLU in the gate|up
// epilogue, RoPE and the K/V write in the q|k|v epilogue (gemma2) or, with the q/k norms, in
// rope_kv (gemma3) — else plain launches.
// CELLM_CUDA_FUSED=0 / CELLM_CUDA_INT8=0 / CELLM_CUDA_ROPE_TABLE=0 in the environment turn the
// fused path / int8 activations / the angle table off (to measure what they bring).
// It owns its activation scratch (sized for max_width rows), not the weights, pool or step.
// Thread-safety: one enqueue at a time (scratch is shared by every call).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "backends/cuda/cuda_weights.h"
#include "backends/cuda/device_memory.h"
#include "backends/cuda/device_step.h"
#include "backends/cuda/kernels/decode_matmul.cuh"
#include "backends/cuda/kernels/quantize_activations.cuh"
#include "backends/cuda/kernels/weight_layout.h"
#include "backends/cuda/kernels/wide_act_order.cuh"
#include "backends/cuda/kv_pool.h"
#include "core/status.h"
#include "model/model_config.h"

namespace cellm {

enum class ForwardShape { kStatic, kDynamic };

struct CudaForwardConfig {
  int32_t max_width = 0;               // widest slice (W)
  int32_t max_session_tokens = 0;      // longest context (sizes split attention scratch)
  std::vector<int32_t> layer_windows;  // [num_layers] 0 = full attention
  bool argmax = false;                 // also write each kept row's greedy token (argmax_tokens())
  bool fused_decode = true;            // slices of ≤ 8 rows run the fused kernels (see above)
  // Q8_0 / Q4_0 products of fused slices (dp4a) and of 2/3–8-row slices (int8 tensor cores) take
  // int8 activations (about 3e-3 relative error); false keeps them in f32 / bf16.
  bool int8_activations = true;
};

class CudaForward {
 public:
  // `weights` and `pool` must outlive the forward. `cublas` is the caller's handle with a
  // workspace set (capture-safe); the forward sets its stream on every launch.
  static StatusOr<std::unique_ptr<CudaForward>> create(const ModelConfig& config,
                                                       const CudaWeights& weights, KvPool& pool,
                                                       const CudaForwardConfig& forward_config,
                                                       cublasHandle_t cublas);
  CudaForward(const CudaForward&) = delete;
  CudaForward& operator=(const CudaForward&) = delete;
  ~CudaForward();

  // Enqueues one slice. Pool rows for every row the step names must exist (KvPool::reserve_rows
  // before). Errors: a launch refused (Internal), sizes outside the configured limits
  // (InvalidArgument).
  Status enqueue(const DeviceStep& step, ForwardShape shape, cudaStream_t stream);

  // [max_width, vocab] f32 on the device: row i is the logits of kept row i after an enqueue.
  const float* logits() const { return logits_; }
  // The same rows for a caller that rewrites them in place after an enqueue (the executor's row
  // rewrites, before their candidates), stream-ordered after it.
  float* mutable_logits() { return logits_; }
  // [max_width] int32 on the device: the argmax of logits row i (when configured with argmax).
  const int32_t* argmax_tokens() const { return argmax_tokens_; }
  // Static (graph-shaped) steps size their attention for a context bound: the longest session
  // (max_session_tokens), or, when that exceeds it, the short bound this returns (else 0) for
  // steps whose sequences all fit it — those take the cluster-merged decode attention
  // (kernels::kDecodeClusterMaxContext). The executor captures a decode graph per width for
  // each bound and replays the one a step's longest sequence fits.
  int32_t short_context_bound() const;
  // The bound a static step whose longest sequence has max_seq_len cells is shaped for.
  int32_t static_context_bound(int32_t max_seq_len) const;
  int32_t vocab_size() const { return config_.vocab_size; }

 private:
  CudaForward(const ModelConfig& config, const CudaWeights& weights, KvPool& pool,
              const CudaForwardConfig& forward_config, cublasHandle_t cublas);

  // A product's input as bf16 in x_wide_, written by the kernel before it (RMSNorm, SwiGLU, the
  // decode attention) in the order the product takes (wide_act_order.cuh), or none.
  using WideInput = std::optional<kernels::WideOrder>;
  // y[rows, N] (+)= x[rows, K] · wᵀ (strides in floats).
  // With `wide` (only as wide_input() answers), the product reads x_wide_ instead of x.
  Status matmul(const kernels::DeviceWeight& w, const float* x, int64_t x_stride, int32_t rows,
                float* y, int64_t y_stride, bool accumulate, cudaStream_t stream,
                WideInput wide = std::nullopt);
  // Whether matmul() of `rows` rows of w takes its input from the kernel before it, and in which
  // order (kernels::matmul_wide_input_order): the fused wide product's, or as is for cuBLAS on
  // bf16 operands — one launch fewer per product that rounds (and permutes) x.
  // CELLM_CUDA_WIDE_INPUT=0 in the environment turns it off.
  WideInput wide_input(const kernels::DeviceWeight& w, int32_t rows) const;
  // The input two products reading the same x can share: theirs where they agree, else none.
  static WideInput shared_wide_input(WideInput a, WideInput b) { return a == b ? a : std::nullopt; }
  // Whether a product of `rows` rows of w runs on the int8 tensor cores (int8_matmul_rows_).
  bool int8_matmul_applies(const kernels::DeviceWeight& w, int32_t rows) const;
  // Whether it runs the fused decode product on int8 activations instead: K-quants the int8
  // tensor cores do not take at this width (their products turned off, CELLM_CUDA_INT8_MMA=0, or
  // started later, CELLM_CUDA_Q4K_MMA_FROM / CELLM_CUDA_Q6K_MMA_FROM) at up to kquant_fused_rows_
  // rows — in a wide step of a model whose other weights leave the fused layer sooner.
  bool int8_decode_applies(const kernels::DeviceWeight& w, int32_t rows) const;
  // y[rows, N] (+)= x · wᵀ by the fused decode product on int8 activations: one quantize launch
  // (per 32 or 256 columns as w takes them), then the product.
  Status int8_decode_matmul(const kernels::DeviceWeight& w, const float* x, int64_t x_stride,
                            int32_t rows, float* y, int64_t y_stride, bool accumulate,
                            cudaStream_t stream);
  // y[rows, N] (+)= x · wᵀ (+ bias) there: x rows (gathered by x_rows, RMS-normed with norm when
  // given) quantized by one launch into x_q8_, then the int8 product.
  // With `rope`, w is [q; k; v] and the product does RoPE and the K/V write (y: q only).
  Status int8_matmul(const kernels::DeviceWeight& w, const float* x, int64_t x_stride,
                     const int32_t* x_rows, const float* norm, const float* bias, int32_t rows,
                     float* y, int64_t y_stride, bool accumulate, cudaStream_t stream,
                     const kernels::RopeKvOutput* rope = nullptr);
  // x_q8_ / x_q8_scales_ = `rows` rows of num_cols f32 values quantized (gathered by x_rows,
  // RMS-normed with norm, or SwiGLU of x and up — quantize_activations.cuh), one launch; with
  // per_256 one scale per 256 columns; with block_sums also each block's Σ q into x_q8_sums_ (what
  // a decode product of Q4_K on per-256 input needs); `trigger` as
  // kernels::QuantizeActivationsParams.
  Status quantize_input(const float* x, int64_t x_stride, const int32_t* x_rows, const float* norm,
                        const float* up, int32_t rows, int64_t num_cols, cudaStream_t stream,
                        bool per_256 = false, bool block_sums = false,
                        kernels::PdlTrigger trigger = kernels::PdlTrigger::kAtStart);
  // quantize_input's launch parameters (into x_q8_ / x_q8_scales_ / x_q8_sums_).
  kernels::QuantizeActivationsParams quantize_params(const float* x, int64_t x_stride,
                                                     const int32_t* x_rows, const float* norm,
                                                     const float* up, int32_t rows,
                                                     int64_t num_cols, bool per_256,
                                                     bool block_sums,
                                                     kernels::PdlTrigger trigger) const;
  // Whether w's int8 products (decode and tensor-core) take their input quantized with one scale
  // per 256 columns (K-quants, where kquant_per_256_): every quantize launch for them asks this
  // (an output product may take the attention's per-32 output instead: o_takes_attention_q8).
  bool int8_input_per_256(const kernels::DeviceWeight& w) const;
  // *p takes the one token's normed int8 input an output or down product handed over.
  void handed_over_input(kernels::DecodeMatmulParams* p) const;
  // *p (an output or down product of one token) hands the next product, normed by next_norm, its
  // int8 input.
  void hand_over(kernels::DecodeMatmulParams* p, const float* next_norm) const;
  // The int8 product of x_q8_'s `rows` rows (written by a quantize launch or the attention),
  // quantized with one scale per 256 columns where per_256 says so.
  Status int8_product(const kernels::DeviceWeight& w, const float* bias, int32_t rows, float* y,
                      int64_t y_stride, bool accumulate, bool per_256, cudaStream_t stream,
                      const kernels::RopeKvOutput* rope = nullptr);
  // Whether an int8 output product may take the decode attention's int8 output (per 32
  // columns): where attention_q8_, and its activations are per 32 or kquant_o_from_attention_
  // prefers the attention's per-32 output to a quantize launch per 256.
  bool o_takes_attention_q8(const kernels::DeviceWeight& wo) const;
  // qkv_ = RMSNorm(x_) · attn_norm · [wq; wk; wv]ᵀ (+ bias): the norm into xn_, then the products;
  // q, k and v apart on the int8 tensor cores: one quantize launch with the norm, three products.
  Status unfused_qkv(const CudaLayerWeights& w, int32_t rows, cudaStream_t stream);
  // y = RMSNorm(x) · weight over `rows` rows of hidden_size (y may be x); with `wide`, that
  // written into x_wide_ as bf16 in that order instead (y untouched). With `add` ([rows,
  // hidden_size]), x += add first (written back to x).
  Status rms_norm(const float* weight, float* x, float* y, int32_t rows, cudaStream_t stream,
                  WideInput wide = std::nullopt, const float* add = nullptr);
  // attn_ = attention of the step's `rows` tokens in layer l: the decode kernel (split contexts)
  // for static shapes and for slices of mostly one token per sequence, else the prefill kernel.
  // With `q8` (may be null), where the decode kernel can (kernels::decode_attention_writes_q8),
  // the output is also quantized into x_q8_ / x_q8_scales_ and *q8 set true (else false). With
  // `wide`, where the decode kernel runs, it also writes x_wide_ (the output as bf16 in that
  // order) and sets *wrote_wide true. `after_rope_kv`: the launch before is rope_kv's, few
  // blocks, so the decode kernel may launch early (kernels::DecodeAttentionParams::early_launch).
  Status attention(const DeviceStep& step, int32_t layer, int32_t rows, bool is_static,
                   bool after_rope_kv, cudaStream_t stream, bool* q8 = nullptr,
                   WideInput wide = std::nullopt, bool* wrote_wide = nullptr);
  // Context splits of the decode kernel for `tokens` rows reaching `max_context` cells, no more
  // than the scratch holds.
  int32_t decode_splits(int32_t tokens, int32_t max_context) const;
  // The forward with the fused small-M kernels (cuda_forward_fused.cpp); rows ≤ fused_max_rows_.
  Status enqueue_fused(const DeviceStep& step, int32_t rows, int32_t kept, bool is_static,
                       cudaStream_t stream);
  // The forward of a model with post norms (gemma2, gemma3: cuda_forward_post_norm.cpp): the plain
  // sequence of launches, every slice wider than post_norm_fused_rows_ ...
  Status enqueue_post_norm(const DeviceStep& step, int32_t rows, int32_t kept, bool is_static,
                           cudaStream_t stream);
  // ... and the fused one up to it: the decode products on int8 inputs, each quantize launch
  // also joining the post-normed block output before it to the residual, GeGLU in the gate|up
  // epilogue, RoPE in the q|k|v epilogue where rope_fused_.
  Status enqueue_post_norm_fused(const DeviceStep& step, int32_t rows, int32_t kept, bool is_static,
                                 cudaStream_t stream);
  // Points fused product *p's input at the residual *residual normed by `norm` (rows gathered by
  // x_rows), quantized into x_q8_ by one launch; with `add` ([rows, hidden]: a block's output),
  // that output normed by add_norm joins the residual first, written into *spare, and the two
  // pointers swap (the launch reads the old residual whole in every CTA, so it writes apart).
  Status post_norm_input(kernels::DecodeMatmulParams* p, float** residual, float** spare,
                         const float* add, const float* add_norm, const float* norm,
                         const int32_t* x_rows, int32_t rows, cudaStream_t stream);
  // A fused decode product of `rows` rows over w, its input and output left to the caller.
  kernels::DecodeMatmulParams fused_product(const kernels::DeviceWeight& w, int32_t rows) const;
  // Launches layer w's q|k|v products on `input`'s input fields (weight, bias and output set
  // here): the fused weight's one product (with `rope`, RoPE and the K/V write in its epilogue),
  // or q, k and v apart into qkv_'s columns (rope must be null).
  Status fused_qkv(const CudaLayerWeights& w, const kernels::DecodeMatmulParams& input,
                   const kernels::RopeKvOutput* rope, cudaStream_t stream);
  // Layer `layer`'s q|k|v products on `input` (fused_qkv) with RoPE and the K/V write in the
  // epilogue where rope_fused_ and the weight is fused, else followed by rope_kv; returns whether
  // rope_kv ran (the attention after it may launch early).
  StatusOr<bool> qkv_then_rope(const DeviceStep& step, int32_t layer, int32_t rows,
                               const kernels::DecodeMatmulParams& input, cudaStream_t stream);
  // The attention of layer `layer` (attention()), then fused output product *o's input: the
  // attention's int8 output where both can, else attn_ through fused_input.
  Status attention_then_output_input(const DeviceStep& step, int32_t layer, int32_t rows,
                                     bool is_static, bool after_rope_kv,
                                     kernels::DecodeMatmulParams* o, cudaStream_t stream);
  // Points a fused product's input at x rows [rows, K] (gathered by x_rows, normed by norm when
  // given): f32, or int8 through one quantize launch when the weight takes int8 activations.
  Status fused_input(kernels::DecodeMatmulParams* p, const float* x, int64_t x_stride,
                     const int32_t* x_rows, const float* norm, int32_t rows, cudaStream_t stream);
  // Decides fused_max_rows_, post_norm_fused_rows_ and rope_fused_ from the weights and the
  // config.
  void plan_fused_path();
  // Whether the fused path gives products of a and b one input the same way (f32, or int8 per 32
  // or per 256 columns, quantized by a launch or in the product): q, k and v apart take one.
  bool same_fused_input(const kernels::DeviceWeight& a, const kernels::DeviceWeight& b) const;
  // Row widths of the activations (columns).
  struct Widths {
    int64_t hidden;
    int64_t q;
    int64_t kv;
    int64_t qkv;   // q + kv + v
    int64_t attn;  // num_heads · value_head_dim
    int64_t ffn;
  };
  Widths widths() const;
  // The per-layer operations other than the products, attention() above included
  // (cuda_forward_ops.cpp).
  // x_ = the embeddings of the step's `rows` tokens.
  Status embed(const DeviceStep& step, int32_t rows, cudaStream_t stream);
  // q/k norms and RoPE on the q and k columns of qkv_ (`rows` rows of layer `layer`), k and v
  // written into the pool at the step's write rows (the rope_kv kernel; the angles from
  // rope_table_ where rope_table_used_).
  Status rope_kv(const DeviceStep& step, int32_t layer, int32_t rows, cudaStream_t stream);
  // rope_table_ = the angles of the step's `rows` positions (once per step, for every layer).
  Status rope_table(const DeviceStep& step, int32_t rows, cudaStream_t stream);
  // The RoPE / K/V write a q|k|v product of layer `layer` does in its epilogue (rope_fused_):
  // q into qkv_, the angles from rope_table_ when `table` (else computed per pair).
  kernels::RopeKvOutput rope_output(const DeviceStep& step, int32_t layer, bool table) const;
  // dst [kept, hidden] = the step's kept rows of src [num_src_rows, hidden] (step.kept_rows).
  Status gather_kept_rows(const DeviceStep& step, int32_t kept, const float* src,
                          int32_t num_src_rows, float* dst, cudaStream_t stream);
  // The LM head's `kept` logits rows soft-capped where the model caps them (gemma2), then
  // argmax(): what every enqueue path ends with.
  Status finish_logits(int32_t kept, cudaStream_t stream);
  // The greedy token of each of `kept` logits rows into argmax_tokens_.
  Status argmax(int32_t kept, cudaStream_t stream);

  ModelConfig config_;
  const CudaWeights& weights_;
  KvPool& pool_;
  CudaForwardConfig forward_config_;
  cublasHandle_t cublas_;
  DeviceBuffer scratch_;               // every activation buffer below, carved from one allocation
  float* x_ = nullptr;                 // [W, hidden] residual stream
  float* xn_ = nullptr;                // [W, hidden] normed input of a block
  float* qkv_ = nullptr;               // [W, q_width + kv_width + v_width] projections (q | k | v)
  float* attn_ = nullptr;              // [W, num_heads * value_head_dim] attention output
  float* gate_up_ = nullptr;           // [W, 2 * ffn] (gate | up)
  float* act_ = nullptr;               // [W, ffn] SwiGLU output
  float* logits_ = nullptr;            // [W, vocab]
  void* attention_scratch_ = nullptr;  // split-context partial results
  size_t attention_scratch_bytes_ = 0;
  void* matmul_scratch_ = nullptr;  // the wide matmul path's dequantization tiles
  size_t matmul_scratch_bytes_ = 0;
  int32_t* zero_rows_ = nullptr;      // [W] zeros: gathers a bias vector into every row
  int32_t* argmax_tokens_ = nullptr;  // [W] greedy token of each kept row
  void* argmax_scratch_ = nullptr;    // kernels::argmax_scratch_bytes(W), zeroed
  size_t argmax_scratch_bytes_ = 0;
  // [W, widest product input] bf16: a product's input in the order it takes, written by the
  // kernel before it (wide_input).
  uint16_t* x_wide_ = nullptr;
  int8_t* x_q8_ = nullptr;        // [8, max K] int8 activations of the fused path
  float* x_q8_scales_ = nullptr;  // [8, max K / 32]
  int32_t* x_q8_sums_ = nullptr;  // [8, max K / 32] block sums of x_q8_ (per-256 quantizations)
  float2* rope_table_ = nullptr;  // [W, num_rotary_dims / 2] (cos, sin) of the step's positions
  // One token's normed int8 input handed over by an output or down product (DecodeHandover):
  // never x_q8_, which those products read.
  int8_t* hand_q_ = nullptr;            // [hidden] interleaved order
  float* hand_scales_ = nullptr;        // [hidden / 32]
  double* hand_sum_squares_ = nullptr;  // [hidden / 32]
  // One token's SwiGLU values handed to the down product by gate|up (kSwigluHandover): never
  // x_q8_ or hand_q_, which gate|up may read.
  int8_t* swiglu_q_ = nullptr;      // [ffn] interleaved order
  float* swiglu_scales_ = nullptr;  // [ffn / 16] at kernels::per16_scale_index
  int32_t fused_max_rows_ = 0;      // slices of at most this many rows run enqueue_fused (0: none)
  // A model with post norms runs enqueue_post_norm_fused up to this many rows (0: never; its
  // products must all take int8 activations quantized by launches, CELLM_CUDA_POST_NORM_FUSED=0
  // turns it off).
  int32_t post_norm_fused_rows_ = 0;
  bool rope_fused_ = false;        // the q|k|v product's epilogue does RoPE and the K/V write
  bool rope_table_used_ = false;   // products' epilogues and rope_kv read rope_table_
                                   // (CELLM_CUDA_ROPE_TABLE=0: each block computes its angles)
  bool int8_activations_ = false;  // config (and CELLM_CUDA_INT8) allow int8 activations
  bool int8_fold_ = false;         // products quantize their input (CELLM_CUDA_INT8_FOLD=1)
  bool attention_q8_ = true;       // decode attention quantizes the output product's input
                                   // where it can (CELLM_CUDA_ATTENTION_Q8=0: a quantize launch)
  // The cluster decode attention launches early after the q|k|v product too, not only after
  // rope_kv (CELLM_CUDA_ATTENTION_EARLY=1; for measurements: +2.8% on the H200, version 34).
  bool attention_early_after_product_ = false;
  bool wide_input_ = true;  // wide_input() may answer
  // Products of more rows than the small-M path takes and at most this many run on the int8
  // tensor cores (kernels::launch_int8_matmul, their input quantized by one launch) where the
  // weight allows; 0: never (exact activations, or CELLM_CUDA_INT8_MMA=0 in the environment).
  int32_t int8_matmul_rows_ = 0;
  // The int8 decode products of K-quants (fused path, int8_decode_applies) take activations
  // quantized with one scale per 256 columns (their groups summed in integers; q4_k batch 1 on
  // the H200 2.245–2.250 → 2.101–2.109 ms; CELLM_CUDA_KQUANT_PER256=0: per 32).
  bool kquant_per_256_ = true;
  // K-quant output products take the attention's per-32 int8 output rather than a quantize
  // launch per 256 columns: H200, Llama-3.1-8B geometry, batch-1 ms (twice) q4_k 2.101–2.106 →
  // 2.088–2.092, q6_k 2.420–2.427 → 2.394, q4_k_m 2.245–2.249 → 2.230–2.233; 8 sessions +1–2%
  // (CELLM_CUDA_KQUANT_O_FROM_ATTENTION=0: the quantize launch).
  bool kquant_o_from_attention_ = true;
  // q, k and v apart on the int8 tensor cores share one quantize launch with the norm folded in
  // (CELLM_CUDA_INT8_QKV_APART=0: the norm into xn_, then a quantize launch per product; q4_k_m
  // 8 / 16 sessions on the H200 +0.2–1.4% / +0.7–1.5%).
  bool int8_qkv_apart_ = true;
  // One-token fused steps hand the normed int8 input of gate|up over from the output product
  // (handover_o_), that of q|k|v and the LM head from the down product (handover_down_)
  // (kernels::DecodeOutput::kAddHandover): a quantize launch fewer each per layer. Q8_0 / Q4_0
  // products with int8 activations only; plan_fused_path says where it is on.
  bool handover_o_ = false;
  bool handover_down_ = false;
  // One-token fused steps hand the down product its int8 input from gate|up, one scale per 16
  // SwiGLU values (kernels::DecodeOutput::kSwigluHandover): the layer's last quantize launch gone.
  // Q8_0 / Q4_0 gate|up and down products with int8 activations; CELLM_CUDA_HANDOVER_SWIGLU 0 / 1
  // forces it off or on.
  bool handover_swiglu_ = false;
  // The fused layer's products and quantize launches let the next kernel launch once they have
  // passed their wait (kernels/pdl.cuh says why), or at their start on a device of a slower bus
  // (the H100; cuda_forward_fused.cpp's kSlowBusBelowBytesPerS). CELLM_CUDA_TRIGGER_AFTER_WAIT
  // 0 / 1 forces either.
  kernels::PdlTrigger fused_trigger_ = kernels::PdlTrigger::kAfterWait;
  // The widest step whose K-quant products without an int8 tensor-core product run the fused
  // decode product on int8 activations (cuda_forward_fused.cpp: 4 with resident copies, else 8).
  int32_t kquant_fused_rows_ = 0;
  int32_t num_sms_ = 0;
  // The device's peak memory bandwidth from its memory clock and bus width (0 where unreadable):
  // which one-token defaults pay depends on it (plan_fused_path: the handovers, the trigger).
  double peak_bandwidth_bytes_per_s_ = 0.0;
};

}  // namespace cellm
