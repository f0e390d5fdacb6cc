// attention: causal attention of a step's tokens over their own sequences' cells on the GPU —
// the CPU oracle's cpu_attention, reading K/V through the step's CSR cell lists (cache/
// cell_step.h): token t of step sequence s = token_step_seq[t] at position token_pos[t] sees
// positions [max(0, pos − window + 1), pos] (window 0: [0, pos]) of s, i.e. cells
// seq_cells[seq_cell_offsets[s] + p] — never another sequence's cells, never the whole pool.
//
// Two kernels, same function:
//   decode (launch_decode_attention): one block per (token, kv head, context split); a block
//     reads each K/V row of its split once for all the query heads of its kv head (GQA), splits
//     long contexts into up to max_splits parts (flash-decoding: partial max / sum / output per
//     split in `scratch`, then a combine kernel). Any tokens; best for one token per sequence.
//   prefill (launch_prefill_attention): tiles of consecutive tokens of one sequence × 64-key
//     tiles in shared memory, online softmax; for runs of tokens of the same sequence. Head
//     sizes up to 256 (Gemma's: 210 KB of shared memory with an f32 cache).
// f16 / bf16 caches with key and value heads of 64, 96, 128 or 256 dims (CELLM_CUDA_TC_HEAD96=0:
// not 96) run both on tensor cores (mma.sync; the f32 query and probabilities split into two 16-bit
// parts, so results stay within about 1e-5 of f32: attention_tc.cuh) with K/V tiles gathered
// through the cell list into shared memory by cp.async, double-buffered; the decode kernel then
// takes 64-key tiles, a warp per 16 keys, and the prefill kernel 32 query rows per block. Other
// caches and head sizes use f32 CUDA cores. Softmax in f32 (max subtracted, exp in f32); K/V in
// f32, f16 or bf16; head sizes multiples of 8 up to 256. Every launch is stream-ordered and
// allocates nothing; call prepare_attention_kernels() once before capturing a graph (it raises
// shared-memory limits). Token positions, sequences and cells are device data the caller validated
// (CellCache did). Who calls it: the CUDA forward, the tests. Thread-safety: launches on a stream.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "backends/cuda/kernels/wide_act_order.cuh"
#include "core/status.h"
#include "program/program_spec.h"

namespace cellm::kernels {

inline constexpr int32_t kAttentionMaxHeadDim = 256;

// A step's CellStep arrays on the device (cache/cell_step.h).
struct AttentionCells {
  const int32_t* token_step_seq = nullptr;    // [num_tokens]
  const int32_t* token_pos = nullptr;         // [num_tokens]
  const int32_t* seq_cell_offsets = nullptr;  // [num_seqs + 1]
  const int32_t* seq_cells = nullptr;         // [seq_cell_offsets[num_seqs]]
  // Optional [num_tokens] seq_cell_offsets[token_step_seq[t]]: given, the decode kernels find a
  // token's cells with one dependent load fewer.
  const int32_t* token_cell_offsets = nullptr;
};

struct AttentionArgs {
  int32_t num_tokens = 0;
  int32_t num_heads = 0;  // query heads; head h reads kv head h / (num_heads / num_kv_heads)
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;        // multiple of 8, ≤ kAttentionMaxHeadDim
  int32_t value_head_dim = 0;  // multiple of 8, ≤ kAttentionMaxHeadDim
  float scale = 0.0f;          // scores are (q · k) · scale
  float softcap = 0.0f;        // > 0: scores then soft-capped, s → softcap · tanh(s / softcap)
  int32_t window = 0;          // 0: full attention
  const float* q = nullptr;    // [num_tokens, q_stride] f32; head h at h * head_dim
  int64_t q_stride = 0;
  const void* k_cache = nullptr;  // [rows, num_kv_heads, head_dim] cache_dtype, 16-byte aligned
  const void* v_cache = nullptr;  // [rows, num_kv_heads, value_head_dim] cache_dtype
  KvDtype cache_dtype = KvDtype::kF32;
  AttentionCells cells;
  float* out = nullptr;  // [num_tokens, out_stride] f32; head h at h * value_head_dim
  int64_t out_stride = 0;
  // Decode only, where decode_attention_writes_q8(): the output also quantized as
  // launch_quantize_activations would quantize it (no norm) — the int8 input of the next product.
  int8_t* out_q8 = nullptr;        // [num_tokens, num_heads * value_head_dim], interleaved order
  float* out_q8_scales = nullptr;  // [num_tokens, num_heads * value_head_dim / 32]
  // Decode only (any kernel), optional: the output also rounded to bf16 in the column order the
  // next product takes (wide_act_order.cuh) — its input (MatmulParams::x_wide), so it needs no
  // launch to round (and permute) out. kFused: num_heads · value_head_dim a multiple of 32.
  uint16_t* out_wide = nullptr;  // [num_tokens, num_heads * value_head_dim] bf16
  WideOrder out_wide_order = WideOrder::kFused;
};

// The longest context (cells of a token) a decode launch with cluster_merge should take.
inline constexpr int32_t kDecodeClusterMaxContext = 8192;

struct DecodeAttentionParams {
  AttentionArgs args;
  // A token's visible cells are split into ceil(n / ceil(n / k)) parts, k = min(max_splits,
  // ceil(n / min_cells_per_split)): short contexts use one block, long ones up to max_splits.
  int32_t max_splits = 1;
  int32_t min_cells_per_split = 256;
  float* scratch = nullptr;  // decode_attention_scratch_bytes(...) bytes when max_splits > 1
  size_t scratch_bytes = 0;
  // The caller's promise that no token sees more than kDecodeClusterMaxContext cells: then,
  // where the tensor-core kernel runs and every block fits the GPU at once, a (head batch,
  // token)'s splits — at most 8 — run as one thread-block cluster that merges them itself (no
  // combine launch, the scratch unused; docs/perf/decode.md, version 7). Longer contexts stay
  // correct but read slower (8 blocks per head: 1.5× the split kernel's time at 32K positions).
  // CELLM_CUDA_ATTENTION_CLUSTER=0 in the environment turns clusters off process-wide.
  bool cluster_merge = false;
  // The kernel before this launch has few blocks (rope_kv): the cluster-merged kernel then
  // launches early (programmatic dependent launch), its blocks taking the SMs the kernel before
  // leaves free and waiting for it in pdl_wait(). After a product it is launched plainly: its
  // blocks would crowd the product's (docs/perf/decode.md, versions 8 and 34: Gemma 3 4B batch 1
  // −2% step time after rope_kv, Llama-3.1-8B +2.8% after the q|k|v product).
  bool early_launch = false;
};

size_t decode_attention_scratch_bytes(int32_t num_tokens, int32_t num_heads, int32_t value_head_dim,
                                      int32_t max_splits);

// A split count that fills the GPU for `num_tokens` tokens of `num_kv_heads` heads whose contexts
// reach `max_context` cells: about four blocks per SM, or one per SM for contexts longer than
// kDecodeClusterMaxContext when the (token, kv head) pairs are fewer than the SMs (host
// arithmetic only).
int32_t decode_attention_default_splits(int32_t num_tokens, int32_t num_kv_heads,
                                        int32_t max_context, int32_t num_sms);

// Whether launch_decode_attention(params) can also write the int8 output (args.out_q8): it takes
// the cluster-merged kernel, and the output width is a multiple of 256.
bool decode_attention_writes_q8(const DecodeAttentionParams& params);

Status launch_decode_attention(const DecodeAttentionParams& params, cudaStream_t stream);
Status launch_prefill_attention(const AttentionArgs& args, cudaStream_t stream);

// Raises the dynamic shared-memory limit of every attention kernel (idempotent).
Status prepare_attention_kernels();

}  // namespace cellm::kernels
