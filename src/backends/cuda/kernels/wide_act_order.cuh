// wide_act_order: the column order of the fused wide product's bf16 activations
// (matmul_wide.cuh), for the kernels that write that copy — the product's own permute launch, and
// RMSNorm, SwiGLU and the decode attention when the product after them takes their output in
// that form (RmsNormParams::y_wide, SwigluParams::out_wide, AttentionArgs::out_wide,
// MatmulParams::x_wide). Within each block of 32 columns, source column s = 8T + 4h + 2p + j
// (T < 4; h, p, j < 2) sits at column 16h + 8p + 2T + j, where the product's mma k-steps read it
// (matmul_wide_q.cu); pairs (s, s + 1) with s even stay adjacent. Knows nothing else of the
// product. Host-compatible; pure functions.
#pragma once

#include <cstdint>

#include "backends/cuda/kernels/kernel_common.cuh"

namespace cellm::kernels {

// Where source column s of a row sits in the row's bf16 copy in the wide product's order.
CELLM_HD_INLINE int64_t wide_act_column(int64_t s) {
  const int64_t c = s & 31;
  return (s - c) + 16 * ((c >> 2) & 1) + 8 * ((c >> 1) & 1) + 2 * (c >> 3) + (c & 1);
}

}  // namespace cellm::kernels
