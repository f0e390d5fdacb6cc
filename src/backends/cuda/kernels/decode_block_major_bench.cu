// decode_block_major_bench: a natural-order quantize launch and a one-token Q4_0 product over
// block-major weights (see the header).
#include "backends/cuda/kernels/decode_block_major_bench.h"
#include "backends/cuda/kernels/decode_chain_bench.cuh"
#include "backends/cuda/kernels/gemv_decode.cuh"
#include "backends/cuda/kernels/gemv_reduce.cuh"
#include "backends/cuda/kernels/weight_layout.h"

static_assert(cellm::kernels::kBlockMajorStagesPerLayer ==
              cellm::kernels::chain_bench::kStagesPerLayer);

namespace cellm::kernels {
namespace {

constexpr int kQuantizeThreads = 1024;

// The stage's input quantized in natural order by one block (chain_bench::prepare_input: the
// values the ring chain's blocks quantize), a.hidden ≤ 4 · kQuantizeThreads.
__global__ void __launch_bounds__(kQuantizeThreads)
    quantize_natural_kernel(const PersistentChainArgs a, int kind, int8_t* q, float* scales) {
  pdl_launch_dependents();
  pdl_wait();
  __shared__ double norm_partial[kQuantizeThreads / 32];
  chain_bench::prepare_input<kQuantizeThreads, 1>(a, kind, q, scales, norm_partial, false,
                                                  [] { __syncthreads(); });
}

// One token, R block-major Q4_0 rows per block (decode_group_rows: SwiGLU's R / 2 gate rows and
// their up rows), thread t taking blocks of 32 columns t, t + 128, …; the next block's weights
// loaded while this one is multiplied. Per block of 32 and row: Σ (q − 8) · x in integers (eight
// dp4a, the − 8 through the input's sum), then one multiply by d_w · d_x.
template <int R>
__global__ void __launch_bounds__(kDecodeThreads) block_major_q4_0_kernel(const DecodeGemvArgs a) {
  pdl_trigger_at_start(a.trigger);
  const int64_t num_chunks = a.num_cols / 32;
  const int64_t group = blockIdx.x;
  const uint8_t* rows[R];
  decode_group_rows<R>(a, group, rows);
  const int64_t scales_at = a.num_cols / 2;  // the row's f16 block scales follow its nibbles
  uint4 w[R];
  uint16_t d[R];
  const auto load = [&](int64_t c) {
    CELLM_UNROLL
    for (int r = 0; r < R; ++r) {
      w[r] = load_stream_u4(rows[r] + 16 * c);
      d[r] = __ldcs(reinterpret_cast<const unsigned short*>(rows[r] + scales_at + 2 * c));
    }
  };
  int64_t c = threadIdx.x;
  if (c < num_chunks) load(c);  // weights first: nothing earlier writes them
  pdl_wait_then_trigger(a.trigger);
  float acc[R][1];
  CELLM_UNROLL
  for (int r = 0; r < R; ++r) acc[r][0] = 0.0f;
  for (; c < num_chunks; c += kDecodeThreads) {
    const uint4 x_lo = load_u4(a.x_q8 + 32 * c);  // elements 0 … 15 of the block
    const uint4 x_hi = load_u4(a.x_q8 + 32 * c + 16);
    const float dx = a.x_q8_scales[c];
    int x_sum = 0;
    CELLM_UNROLL
    for (int j = 0; j < 4; ++j) {
      x_sum = dp4a(0x01010101u, word_of(x_lo, j), x_sum);
      x_sum = dp4a(0x01010101u, word_of(x_hi, j), x_sum);
    }
    uint4 cur[R];
    uint16_t cur_d[R];
    CELLM_UNROLL
    for (int r = 0; r < R; ++r) {
      cur[r] = w[r];
      cur_d[r] = d[r];
    }
    if (c + kDecodeThreads < num_chunks) load(c + kDecodeThreads);
    CELLM_UNROLL
    for (int r = 0; r < R; ++r) {
      int sum = -8 * x_sum;
      CELLM_UNROLL
      for (int j = 0; j < 4; ++j) {  // byte i of the block: elements i (low) and i + 16 (high)
        const uint32_t nibbles = word_of(cur[r], j);
        sum = dp4a(nibbles & 0x0f0f0f0fu, word_of(x_lo, j), sum);
        sum = dp4a((nibbles >> 4) & 0x0f0f0f0fu, word_of(x_hi, j), sum);
      }
      acc[r][0] = fmaf(f16_bits_to_float(cur_d[r]) * dx, static_cast<float>(sum), acc[r][0]);
    }
  }
  __shared__ float partial[kDecodeWarps][R];
  __shared__ float sums[R];
  warp_partials<R, 1>(acc, partial);
  __syncthreads();
  if (threadIdx.x < R) sums[threadIdx.x] = block_sum(partial, static_cast<int>(threadIdx.x));
  __syncthreads();
  decode_epilogue<R, 1>(a, group, sums);
}

template <int R>
cudaError_t launch_product(const DecodeGemvArgs& g, cudaStream_t stream) {
  return launch_pdl(block_major_q4_0_kernel<R>,
                    dim3(static_cast<unsigned>(decode_row_groups<R>(g))), dim3(kDecodeThreads), 0,
                    stream, g);
}

}  // namespace

cudaError_t launch_natural_quantize(const PersistentChainArgs& a, int kind, int8_t* q,
                                    float* scales, cudaStream_t stream) {
  if (a.hidden > 4 * kQuantizeThreads || kind < 0 || kind >= chain_bench::kStagesPerLayer ||
      q == nullptr || scales == nullptr) {
    return cudaErrorInvalidValue;
  }
  return launch_pdl(quantize_natural_kernel, dim3(1), dim3(kQuantizeThreads), 0, stream, a, kind, q,
                    scales);
}

cudaError_t launch_block_major_stage(const PersistentChainArgs& a,
                                     const PersistentChainLayer& layer, int kind,
                                     int rows_per_block, int8_t* q, float* scales,
                                     cudaStream_t stream) {
  if (a.type != TensorType::kQ4_0 || a.hidden > 4 * kQuantizeThreads || a.hidden % 256 != 0 ||
      a.ffn % 256 != 0 || kind < 0 || kind >= chain_bench::kStagesPerLayer || q == nullptr ||
      scales == nullptr || (rows_per_block != 4 && rows_per_block != 8)) {
    return cudaErrorInvalidValue;
  }
  cudaError_t error = launch_natural_quantize(a, kind, q, scales, stream);
  if (error != cudaSuccess) return error;
  DecodeGemvArgs g;
  g.num_tokens = 1;
  g.x_q8 = q;
  g.x_q8_scales = scales;
  switch (kind) {
    case chain_bench::kQkvStage:
      g.w = layer.qkv, g.num_rows = a.qkv_rows, g.num_cols = a.hidden, g.y = a.qkv;
      break;
    case chain_bench::kOutputStage:
      g.w = layer.o, g.num_rows = a.hidden, g.num_cols = a.hidden, g.y = a.x, g.accumulate = true;
      break;
    case chain_bench::kGateUpStage:
      g.w = layer.gate_up, g.num_rows = 2 * a.ffn, g.num_cols = a.hidden, g.y = a.act;
      g.output = DecodeOutput::kSwiglu;
      break;
    default:
      g.w = layer.down, g.num_rows = a.hidden, g.num_cols = a.ffn, g.y = a.x, g.accumulate = true;
      break;
  }
  g.row_bytes = device_row_bytes(TensorType::kQ4_0, g.num_cols);
  g.y_stride = g.output == DecodeOutput::kSwiglu ? g.num_rows / 2 : g.num_rows;
  return rows_per_block == 8 ? launch_product<8>(g, stream) : launch_product<4>(g, stream);
}

}  // namespace cellm::kernels
