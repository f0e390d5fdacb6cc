// rope_kv: rotary position embedding on the GPU, fused with the write of each token's K and V
// into its cell of the layer's cache — the CPU oracle's cpu_rope (normal and neox pairs, linear
// freq_scale, llama3 per-pair freq_factors) plus, for qwen3, the per-head q/k RMSNorm that comes
// before it (cpu_rms_norm over head_dim). Q is rotated in place; K is rotated and written with V
// to rows cells[t] of the cache arrays [rows, num_kv_heads, head_dim] in the cache dtype
// (f32, f16 or bf16, rounded to nearest even). Either part may be left out (q-only: k = null;
// kv-only: q = null). Angles in double, rotation in f32 without FMAs, as the CPU; the angles are
// computed by each block, or read from the step's table (launch_rope_table) when given one.
// Stream-ordered, capturable; positions and cells are device data the caller validated.
// Also the per-step table of cos / sin that the fused q|k|v product reads (launch_rope_table).
// Who calls it: the CUDA forward's attention block, the tests. Thread-safety: launches on a stream.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/status.h"
#include "model/model_config.h"
#include "program/program_spec.h"

namespace cellm::kernels {

inline constexpr int32_t kRopeMaxHeadDim = 512;

struct RopeKvParams {
  int32_t num_tokens = 0;
  // [num_tokens] device, read before pdl_wait() (pdl.cuh): not written by the kernel before.
  const int32_t* positions = nullptr;
  int32_t head_dim = 0;  // q and k heads; ≤ kRopeMaxHeadDim

  RopeStyle style = RopeStyle::kNormal;
  int32_t num_rotary_dims = 0;  // even, ≤ head_dim; leading dims that rotate
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;
  const float* freq_factors = nullptr;  // [num_rotary_dims / 2] device divisors, or null
  float attn_factor = 1.0f;             // cos and sin multiplied by this (LongRoPE)
  // The same positions' (cos, sin) from launch_rope_table with the same rotary parameters (read
  // after pdl_wait()), or null: each block computes its token's angles.
  const float2* cos_sin = nullptr;  // [num_tokens, num_rotary_dims / 2]
  float norm_eps = 0.0f;            // for q_norm / k_norm

  // Q, rotated in place (null: no Q).
  float* q = nullptr;  // [num_tokens, q_stride] f32; head h at h * head_dim
  int64_t q_stride = 0;
  int32_t num_heads = 0;
  const float* q_norm = nullptr;  // [head_dim] f32, or null: no norm

  // K and V, written into the cache (k null: no K/V).
  const float* k = nullptr;  // [num_tokens, k_stride] f32; head h at h * head_dim
  int64_t k_stride = 0;
  const float* v = nullptr;  // [num_tokens, v_stride] f32; head h at h * value_head_dim
  int64_t v_stride = 0;
  int32_t num_kv_heads = 0;
  int32_t value_head_dim = 0;
  const float* k_norm = nullptr;   // [head_dim] f32, or null
  const int32_t* cells = nullptr;  // [num_tokens] device: the row each token's K/V goes to
  void* k_cache = nullptr;         // [rows, num_kv_heads, head_dim] in cache_dtype
  void* v_cache = nullptr;         // [rows, num_kv_heads, value_head_dim] in cache_dtype
  KvDtype cache_dtype = KvDtype::kF32;
};

Status launch_rope_kv(const RopeKvParams& params, cudaStream_t stream);

// The cos and sin of every rotary pair at each token's position, as rope_cos_sin (op_math.cuh)
// computes them — for the fused q|k|v product's epilogue (RopeKvOutput::cos_sin in
// decode_matmul.cuh) and rope_kv (RopeKvParams::cos_sin) read, so the double-precision angles are
// computed once per step, not once per layer and block. Launched with programmatic dependent
// launch (pdl.cuh).
struct RopeTableParams {
  int32_t num_tokens = 0;
  const int32_t* positions = nullptr;  // [num_tokens] device
  int32_t num_rotary_dims = 0;         // even, ≤ kRopeMaxHeadDim
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;
  const float* freq_factors = nullptr;  // [num_rotary_dims / 2] device divisors, or null
  float attn_factor = 1.0f;             // cos and sin multiplied by this (LongRoPE)
  float2* table = nullptr;              // [num_tokens, num_rotary_dims / 2]: (cos, sin)
};

Status launch_rope_table(const RopeTableParams& params, cudaStream_t stream);

}  // namespace cellm::kernels
