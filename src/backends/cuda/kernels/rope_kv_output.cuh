// rope_kv_output (device side): a q|k|v product's epilogue doing rope_kv.cuh's op for one pair of
// its output rows (rope_kv_output.h). Device code; include only from .cu files. Who calls it: the
// epilogues of gemv_decode.cuh and matmul_int8.cu. Thread-safety: each call writes its own pair.
#pragma once

#include "backends/cuda/kernels/op_math.cuh"
#include "backends/cuda/kernels/rope_kv_output.h"

namespace cellm::kernels {

// Token t's product rows `row` and row + 1 (row even: a pair of one head, as head_dim and the
// widths are even), values y0 and y1 (bias added): q and k pairs rotated by the token's angle
// (the leading num_rotary_dims of a head), q into y, k and v into the caches at row cells[t].
__device__ __forceinline__ void rope_kv_store_pair(const RopeKvOutput& rope, int t, int64_t row,
                                                   float y0, float y1, float* y, int64_t y_stride) {
  const int64_t k_begin = rope.q_width;
  const int64_t v_begin = k_begin + rope.kv_width;
  if (row < v_begin) {
    const int64_t d = (row < k_begin ? row : row - k_begin) % rope.head_dim;
    if (d < rope.num_rotary_dims) {
      float c = 0.0f;
      float s = 0.0f;
      if (rope.cos_sin != nullptr) {
        const float2 cs = rope.cos_sin[t * (rope.num_rotary_dims / 2) + d / 2];
        c = cs.x;
        s = cs.y;
      } else {
        rope_cos_sin(rope.positions[t], static_cast<int32_t>(d / 2), rope.num_rotary_dims,
                     rope.freq_base, rope.freq_scale, rope.freq_factors, rope.attn_factor, &c, &s);
      }
      const float x0 = y0;
      const float x1 = y1;
      rope_rotate(x0, x1, c, s, &y0, &y1);
    }
  }
  if (row < k_begin) {
    y[t * y_stride + row] = y0;
    y[t * y_stride + row + 1] = y1;
    return;
  }
  const int64_t cell = rope.cells[t];
  if (row < v_begin) {
    const int64_t index = cell * rope.kv_width + (row - k_begin);
    store_cache_value(rope.k_cache, rope.cache_dtype, index, y0);
    store_cache_value(rope.k_cache, rope.cache_dtype, index + 1, y1);
  } else {
    const int64_t index = cell * rope.v_width + (row - v_begin);
    store_cache_value(rope.v_cache, rope.cache_dtype, index, y0);
    store_cache_value(rope.v_cache, rope.cache_dtype, index + 1, y1);
  }
}

}  // namespace cellm::kernels
