// wide_act_order: the column orders of a wide product's bf16 activations as the kernel before
// it writes them (RmsNormParams::y_wide, SwigluParams::out_wide, AttentionArgs::out_wide →
// MatmulParams::x_wide), so that the product needs no launch of its own to round (and permute)
// its f32 input. kFused: the fused Q8_0 / Q4_0 product's order (matmul_wide.cuh) — within each
// block of 32 columns, source column s = 8T + 4h + 2p + j (T < 4; h, p, j < 2) sits at column
// 16h + 8p + 2T + j, where its mma k-steps read it (matmul_wide_q.cu); pairs (s, s + 1) with s
// even stay adjacent. kNatural: the columns as they are — the bf16 operand of the cuBLAS path.
// Which order a product takes: matmul_wide_input_order (matmul.cuh). Knows nothing else of the
// products. Host-compatible; pure functions.
#pragma once

#include <cstdint>

#include "backends/cuda/kernels/kernel_common.cuh"

namespace cellm::kernels {

enum class WideOrder : uint8_t { kFused, kNatural };

// Where source column s of a row sits in the row's bf16 copy in the fused wide product's order.
CELLM_HD_INLINE int64_t wide_act_column(int64_t s) {
  const int64_t c = s & 31;
  return (s - c) + 16 * ((c >> 2) & 1) + 8 * ((c >> 1) & 1) + 2 * (c >> 3) + (c & 1);
}

// Where source column s sits in a copy of the given order.
CELLM_HD_INLINE int64_t wide_act_index(WideOrder order, int64_t s) {
  return order == WideOrder::kFused ? wide_act_column(s) : s;
}

}  // namespace cellm::kernels
