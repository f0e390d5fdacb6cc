// CudaForward's per-layer operations other than the products (cuda_forward.h): the embedding
// gather, the RoPE table and RoPE + K/V write, the attention (prefill tiles or the decode kernel,
// its split shape and context bound), argmax. Both enqueue paths (cuda_forward.cpp,
// cuda_forward_fused.cpp) call them.
#include <algorithm>
#include <cmath>

#include "backends/cuda/cuda_forward.h"
#include "backends/cuda/kernels/argmax.cuh"
#include "backends/cuda/kernels/attention.cuh"
#include "backends/cuda/kernels/embedding.cuh"
#include "backends/cuda/kernels/logit_softcap.cuh"
#include "backends/cuda/kernels/rope_kv.cuh"
#include "backends/cuda/kernels/row_gather.cuh"

namespace cellm {

int32_t CudaForward::short_context_bound() const {
  return forward_config_.max_session_tokens > kernels::kDecodeClusterMaxContext
             ? kernels::kDecodeClusterMaxContext
             : 0;
}

int32_t CudaForward::static_context_bound(int32_t max_seq_len) const {
  const int32_t short_bound = short_context_bound();
  return short_bound > 0 && max_seq_len <= short_bound ? short_bound
                                                       : forward_config_.max_session_tokens;
}

int32_t CudaForward::decode_splits(int32_t tokens, int32_t max_context) const {
  int32_t splits =
      kernels::decode_attention_default_splits(tokens, config_.num_kv_heads, max_context, num_sms_);
  while (splits > 1 &&
         kernels::decode_attention_scratch_bytes(tokens, config_.num_heads, config_.value_head_dim,
                                                 splits) > attention_scratch_bytes_) {
    --splits;
  }
  return std::max(splits, 1);
}

Status CudaForward::attention(const DeviceStep& step, int32_t layer, int32_t rows, bool is_static,
                              bool after_rope_kv, cudaStream_t stream, bool* q8, WideInput wide,
                              bool* wrote_wide) {
  if (q8 != nullptr) *q8 = false;
  if (wrote_wide != nullptr) *wrote_wide = false;
  const ModelConfig& c = config_;
  kernels::AttentionArgs args;
  args.num_tokens = rows;
  args.num_heads = c.num_heads;
  args.num_kv_heads = c.num_kv_heads;
  args.head_dim = c.head_dim;
  args.value_head_dim = c.value_head_dim;
  args.scale = c.query_scale();
  args.softcap = c.attn_logit_softcap;
  args.window = forward_config_.layer_windows[static_cast<size_t>(layer)];
  args.q = qkv_;
  args.q_stride = c.q_width() + c.kv_width() + c.v_width();
  args.k_cache = pool_.k_data(layer);
  args.v_cache = pool_.v_data(layer);
  args.cache_dtype = pool_.geometry().dtype;
  args.cells.token_step_seq = step.token_seq;
  args.cells.token_pos = step.positions;
  args.cells.seq_cell_offsets = step.seq_row_offsets;
  args.cells.seq_cells = step.seq_rows;
  args.cells.token_cell_offsets = step.token_row_offsets;
  args.out = attn_;
  args.out_stride = static_cast<int64_t>(c.num_heads) * c.value_head_dim;
  // Prefill tiles pay off when sequences bring several tokens each.
  const bool runs = !is_static && step.num_tokens >= 4 * std::max(1, step.num_seqs);
  if (runs) return kernels::launch_prefill_attention(args, stream);
  kernels::DecodeAttentionParams decode;
  decode.args = args;
  const int32_t context = is_static ? static_context_bound(step.max_seq_len) : step.max_seq_len;
  decode.max_splits = decode_splits(rows, context);
  decode.cluster_merge = context <= kernels::kDecodeClusterMaxContext;
  decode.early_launch = after_rope_kv || attention_early_after_product_;
  // Few (token, kv head) pairs: split contexts finer so enough blocks share the reads.
  decode.min_cells_per_split = rows * c.num_kv_heads < num_sms_ ? 64 : 256;
  decode.scratch = static_cast<float*>(attention_scratch_);
  decode.scratch_bytes = attention_scratch_bytes_;
  if (wide.has_value() && wrote_wide != nullptr) {
    decode.args.out_wide = x_wide_;
    decode.args.out_wide_order = *wide;
    *wrote_wide = true;
  }
  if (q8 != nullptr && kernels::decode_attention_writes_q8(decode)) {
    decode.args.out_q8 = x_q8_;
    decode.args.out_q8_scales = x_q8_scales_;
    *q8 = true;
  }
  return kernels::launch_decode_attention(decode, stream);
}

Status CudaForward::embed(const DeviceStep& step, int32_t rows, cudaStream_t stream) {
  kernels::EmbeddingParams p;
  p.table = weights_.token_embd();
  p.num_tokens = rows;
  p.tokens = step.tokens;
  p.out = x_;
  p.out_stride = config_.hidden_size;
  p.scale = config_.embedding_scale;
  return kernels::launch_embedding(p, stream);
}

Status CudaForward::rope_kv(const DeviceStep& step, int32_t layer, int32_t rows,
                            cudaStream_t stream) {
  const ModelConfig& c = config_;
  const Widths width = widths();
  const CudaLayerWeights& w = weights_.layer(layer);
  kernels::RopeKvParams rope;
  rope.num_tokens = rows;
  rope.positions = step.positions;
  rope.head_dim = c.head_dim;
  rope.style = weights_.rope_style();  // normal when the upload made neox pairs adjacent
  const RopeConfig& layer_rope = c.layer_rope(layer);  // gemma3: windowed layers' own
  rope.num_rotary_dims = layer_rope.num_rotary_dims;
  rope.freq_base = layer_rope.freq_base;
  rope.freq_scale = layer_rope.freq_scale;
  rope.freq_factors = weights_.rope_freqs();
  rope.attn_factor = layer_rope.attn_factor;
  rope.cos_sin = rope_table_used_ ? rope_table_ : nullptr;
  rope.norm_eps = c.rms_norm_eps;
  rope.q = qkv_;
  rope.q_stride = width.qkv;
  rope.num_heads = c.num_heads;
  rope.q_norm = w.q_norm;
  rope.k = qkv_ + width.q;
  rope.k_stride = width.qkv;
  rope.v = qkv_ + width.q + width.kv;
  rope.v_stride = width.qkv;
  rope.num_kv_heads = c.num_kv_heads;
  rope.value_head_dim = c.value_head_dim;
  rope.k_norm = w.k_norm;
  rope.cells = step.write_rows;
  rope.k_cache = pool_.k_data(layer);
  rope.v_cache = pool_.v_data(layer);
  rope.cache_dtype = pool_.geometry().dtype;
  return kernels::launch_rope_kv(rope, stream);
}

Status CudaForward::rope_table(const DeviceStep& step, int32_t rows, cudaStream_t stream) {
  const ModelConfig& c = config_;
  kernels::RopeTableParams table;
  table.num_tokens = rows;
  table.positions = step.positions;
  table.num_rotary_dims = c.rope.num_rotary_dims;
  table.freq_base = c.rope.freq_base;
  table.freq_scale = c.rope.freq_scale;
  table.freq_factors = weights_.rope_freqs();
  table.attn_factor = c.rope.attn_factor;
  table.table = rope_table_;
  return kernels::launch_rope_table(table, stream);
}

kernels::RopeKvOutput CudaForward::rope_output(const DeviceStep& step, int32_t layer,
                                               bool table) const {
  const ModelConfig& c = config_;
  const Widths width = widths();
  kernels::RopeKvOutput r;
  r.positions = step.positions;
  r.cells = step.write_rows;
  r.q_width = static_cast<int32_t>(width.q);
  r.kv_width = static_cast<int32_t>(width.kv);
  r.v_width = c.v_width();
  r.head_dim = c.head_dim;
  const RopeConfig& layer_rope = c.layer_rope(layer);
  r.num_rotary_dims = layer_rope.num_rotary_dims;
  r.freq_base = layer_rope.freq_base;
  r.freq_scale = layer_rope.freq_scale;
  r.freq_factors = weights_.rope_freqs();
  r.attn_factor = layer_rope.attn_factor;
  r.cos_sin = table ? rope_table_ : nullptr;
  r.k_cache = pool_.k_data(layer);
  r.v_cache = pool_.v_data(layer);
  r.cache_dtype = pool_.geometry().dtype;
  return r;
}

Status CudaForward::gather_kept_rows(const DeviceStep& step, int32_t kept, const float* src,
                                     int32_t num_src_rows, float* dst, cudaStream_t stream) {
  kernels::RowGatherParams gather;
  gather.num_rows = kept;
  gather.dim = config_.hidden_size;
  gather.rows = step.kept_rows;
  gather.src = src;
  gather.src_stride = config_.hidden_size;
  gather.num_src_rows = num_src_rows;
  gather.dst = dst;
  gather.dst_stride = config_.hidden_size;
  return kernels::launch_row_gather(gather, stream);
}

Status CudaForward::finish_logits(int32_t kept, cudaStream_t stream) {
  if (config_.final_logit_softcap > 0.0f && kept > 0) {
    kernels::LogitSoftcapParams p;
    p.logits = logits_;
    p.num_rows = kept;
    p.num_cols = config_.vocab_size;
    p.stride = config_.vocab_size;
    p.cap = config_.final_logit_softcap;
    CELLM_RETURN_IF_ERROR(kernels::launch_logit_softcap(p, stream));
  }
  return argmax(kept, stream);
}

Status CudaForward::argmax(int32_t kept, cudaStream_t stream) {
  if (!forward_config_.argmax || kept == 0) return ok_status();
  kernels::ArgmaxParams p;
  p.num_rows = kept;
  p.vocab = config_.vocab_size;
  p.logits = logits_;
  p.stride = config_.vocab_size;
  p.out = argmax_tokens_;
  p.scratch = argmax_scratch_;
  p.scratch_bytes = argmax_scratch_bytes_;
  return kernels::launch_argmax(p, stream);
}

}  // namespace cellm
