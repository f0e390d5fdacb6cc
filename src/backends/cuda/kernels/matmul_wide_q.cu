// matmul_wide_q: the fused tensor-core product for interleaved Q8_0 / Q4_0 weights
// (matmul_wide.cuh); how a lane's weight bytes become mma B fragments, per type, is in
// matmul_wide_q_weight.cuh.
//
// One mma k-step takes half a block of 32 columns: step (b, h) gives mma lane t the elements of
// layout lane 2t + h — b0 = elements i = 0, 1, b1 = i = 2, 3 — so a k-step's logical column
// c = 8p + 2T + j is physical column 32b + 8T + 4h + 2p + j. The activations are permuted to
// match (column 32b + 16h + c of the copy holds that physical column), which lets ldmatrix load
// their A fragments from plainly staged rows.
#include <algorithm>
#include <string>
#include <type_traits>

#include "backends/cuda/kernels/kernel_common.cuh"
#include "backends/cuda/kernels/launch_status.h"
#include "backends/cuda/kernels/matmul_wide.cuh"
#include "backends/cuda/kernels/matmul_wide_q_weight.cuh"
#include "backends/cuda/kernels/mma_common.cuh"
#include "backends/cuda/kernels/pdl.cuh"
#include "backends/cuda/kernels/wide_act_order.cuh"

namespace cellm::kernels {
namespace {

using wide_q::FusedWeight;

constexpr int kThreads = 128;
constexpr int kBlockRows = 128;        // weight rows per block: 4 warps × 4 n-tiles of 8
constexpr int kMaxMTiles = 4;          // tokens per block: up to 4 m-tiles of 16
constexpr int kSpan = 256;             // columns per weight load
constexpr int kHalf = kSpan / 2;       // columns per shared-memory stage
constexpr int kActStride = kHalf + 8;  // staged bf16 row, padded: ldmatrix rows in distinct banks
constexpr int32_t kMaxSplits = 16;
constexpr size_t kPartialBudgetBytes = size_t{32} << 20;
constexpr size_t kAlign = 256;

size_t align_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

bool fused_type(TensorType type) { return type == TensorType::kQ4_0 || type == TensorType::kQ8_0; }

struct FusedArgs {
  const uint8_t* w = nullptr;  // [num_rows, row_bytes] interleaved
  int64_t num_rows = 0;        // N
  int64_t num_cols = 0;        // K
  uint64_t row_bytes = 0;
  const uint16_t* act = nullptr;  // [num_tokens, num_cols] bf16, permuted
  int32_t num_tokens = 0;         // M
  float* y = nullptr;             // [num_tokens, y_stride]
  int64_t y_stride = 0;
  bool accumulate = false;
  float* partial = nullptr;  // [splits, num_tokens, num_rows] when split
  int32_t num_spans = 0;
  int32_t spans_per_split = 0;
};

// One thread per pair of columns (s, s + 1), s even, of row r: rounded to bf16 and stored where
// the product reads them (wide_act_order.cuh).
__global__ void __launch_bounds__(256)
    permute_activations_kernel(const float* x, int64_t x_stride, int32_t num_tokens,
                               int64_t num_cols, uint16_t* out) {
  pdl_launch_dependents();
  pdl_wait();  // x comes from the kernel before; `out` may still be read by the one before it
  const int64_t pairs = num_cols / 2;
  const int64_t index = static_cast<int64_t>(blockIdx.x) * 256 + threadIdx.x;
  if (index >= num_tokens * pairs) return;
  const int64_t r = index / pairs;
  const int64_t s = 2 * (index - r * pairs);
  const float2 in = *reinterpret_cast<const float2*>(x + r * x_stride + s);
  const uint32_t packed = static_cast<uint32_t>(float_to_bf16_bits(in.x)) |
                          (static_cast<uint32_t>(float_to_bf16_bits(in.y)) << 16);
  *reinterpret_cast<uint32_t*>(out + r * num_cols + wide_act_column(s)) = packed;
}

// kMTiles m-tiles of 16 tokens per block: 1 or 2 for a few tokens (decode of a few sessions), so
// the block does no mma work for tokens it does not have.
template <TensorType kType, int kMTiles>
__global__ void __launch_bounds__(kThreads, FusedWeight<kType>::min_blocks(kMTiles))
    fused_quantized_kernel(const FusedArgs args) {
  pdl_launch_dependents();
  using W = FusedWeight<kType>;
  constexpr int kBlockTokens = 16 * kMTiles;
  constexpr int kStageElems = kBlockTokens * kActStride;
  __shared__ __align__(16) uint16_t act_s[2][kStageElems];  // [stage][token][column]
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int g = lane >> 2;
  const int t = lane & 3;
  const int64_t n_warp = static_cast<int64_t>(blockIdx.x) * kBlockRows + 32 * warp;
  const int m_block = static_cast<int>(blockIdx.y) * kBlockTokens;
  const int32_t span_begin = static_cast<int32_t>(blockIdx.z) * args.spans_per_split;
  const int32_t span_end = min(span_begin + args.spans_per_split, args.num_spans);
  const uint8_t* rows[4];  // this lane's weight row per n-tile (rows past N read the last row)
  CELLM_UNROLL
  for (int nt = 0; nt < 4; ++nt) {
    const int64_t n = min(n_warp + 8 * nt + g, args.num_rows - 1);
    rows[nt] = args.w + n * static_cast<int64_t>(args.row_bytes);
  }
  float acc[kMTiles][4][4];  // [m-tile][n-tile][c]
  CELLM_UNROLL
  for (int mt = 0; mt < kMTiles; ++mt) {
    CELLM_UNROLL
    for (int nt = 0; nt < 4; ++nt) {
      CELLM_UNROLL
      for (int c = 0; c < 4; ++c) acc[mt][nt][c] = 0.0f;
    }
  }

  // Stage q covers columns [128q, 128q + 128) of the split: kBlockTokens rows × 16 pieces of 16
  // bytes.
  const int num_stages = 2 * (span_end - span_begin);
  const auto stage = [&](int q) {
    const int64_t col0 = static_cast<int64_t>(span_begin) * kSpan + static_cast<int64_t>(q) * kHalf;
    CELLM_UNROLL
    for (int i = 0; i < kBlockTokens * 16 / kThreads; ++i) {
      const int index = static_cast<int>(threadIdx.x) + i * kThreads;
      const int r = index >> 4;
      const int piece = index & 15;
      const int m = m_block + r;
      const bool valid = m < args.num_tokens;
      const uint16_t* src =
          args.act + static_cast<int64_t>(valid ? m : 0) * args.num_cols + col0 + 8 * piece;
      cp_async_16_zfill(&act_s[q & 1][r * kActStride + 8 * piece], src, valid);
    }
    cp_async_commit();
  };

  // This lane's weight words and block scales of a span, per n-tile.
  const auto load_span = [&](int32_t span, uint32_t(&wq)[4][W::kWords], uint4(&sc)[4]) {
    CELLM_UNROLL
    for (int nt = 0; nt < 4; ++nt) {
      const uint8_t* quants = W::quants(rows[nt], span, t);
      CELLM_UNROLL
      for (int v = 0; v < W::kWords / 4; ++v) {
        const uint4 chunk = load_stream_u4(quants + 16 * v);
        wq[nt][4 * v] = chunk.x;
        wq[nt][4 * v + 1] = chunk.y;
        wq[nt][4 * v + 2] = chunk.z;
        wq[nt][4 * v + 3] = chunk.w;
      }
      sc[nt] = load_u4(W::scales(rows[nt], args.num_cols, span));
    }
  };
  // A span's weights are loaded a span ahead — before the current span's math — so the weight
  // stream does not wait for it (the register bound of two blocks per SM beyond one m-tile leaves
  // room for them).
  // At one m-tile (up to 16 tokens) the B fragments hold the weights' integers and each block's
  // sum is scaled after its two mmas (exact products); wider tiles scale the weights before, on
  // bf16 pairs (W::scaled_fragment: fewer instructions per weight and no separate block sums
  // beside 32 or 64 accumulators — on the H200 5–7% more 24–32-session decode than the integer
  // fragments at two m-tiles, which at four do not fit the registers).
  constexpr bool kIntegerFragments = kMTiles == 1;
  uint32_t next_wq[4][W::kWords];
  uint4 next_sc[4];
  if (span_begin < span_end) load_span(span_begin, next_wq, next_sc);  // weights: before the wait
  pdl_wait();  // the activations come from the permute launch

  if (num_stages > 0) stage(0);
  for (int32_t span = span_begin; span < span_end; ++span) {
    uint32_t wq[4][W::kWords];
    uint4 sc[4];
    CELLM_UNROLL
    for (int nt = 0; nt < 4; ++nt) {
      CELLM_UNROLL
      for (int v = 0; v < W::kWords; ++v) wq[nt][v] = next_wq[nt][v];
      sc[nt] = next_sc[nt];
    }
    if (span + 1 < span_end) load_span(span + 1, next_wq, next_sc);
    CELLM_UNROLL
    for (int half = 0; half < 2; ++half) {
      const int q = 2 * (span - span_begin) + half;
      if (q + 1 < num_stages) {
        stage(q + 1);  // its buffer was last read before the previous stage's closing barrier
        cp_async_wait<1>();
      } else {
        cp_async_wait<0>();
      }
      __syncthreads();
      const uint16_t* tile = act_s[q & 1];
      if constexpr (kIntegerFragments) {
        CELLM_UNROLL
        for (int bb = 0; bb < 4; ++bb) {
          const int b = 4 * half + bb;
          uint32_t bf[2][4][2];  // [k-step h][n-tile]: block b's integer weights
          CELLM_UNROLL
          for (int h = 0; h < 2; ++h) {
            CELLM_UNROLL
            for (int nt = 0; nt < 4; ++nt) W::fragment(wq[nt], b, h, bf[h][nt]);
          }
          // Block b's scales of the weight rows this lane's accumulators hold, 2t and 2t + 1 of
          // each n-tile: the lane loaded those of row g (its B column), lanes 8t and 8t + 4 have
          // them.
          float d[4][2];
          CELLM_UNROLL
          for (int nt = 0; nt < 4; ++nt) {
            const uint32_t pair = word_of(sc[nt], b >> 1);  // blocks b & ~1 and b | 1
            CELLM_UNROLL
            for (int j = 0; j < 2; ++j) {
              const uint32_t theirs = __shfl_sync(0xffffffffu, pair, 8 * t + 4 * j);
              d[nt][j] = f16_bits_to_float(static_cast<uint16_t>(theirs >> (16 * (b & 1))));
            }
          }
          CELLM_UNROLL
          for (int mt = 0; mt < kMTiles; ++mt) {
            uint32_t a[2][4];
            CELLM_UNROLL
            for (int h = 0; h < 2; ++h) {
              ldmatrix_x4(a[h], tile + (16 * mt + (lane & 15)) * kActStride + 32 * bb + 16 * h +
                                    (lane >> 4) * 8);
            }
            CELLM_UNROLL
            for (int nt = 0; nt < 4; ++nt) {
              // The block's 32 columns in f32 (products of integers and bf16 activations: exact
              // before the sum), then times the rows' block scales.
              float part[4] = {0.0f, 0.0f, 0.0f, 0.0f};
              mma_16816<false>(part, a[0], bf[0][nt][0], bf[0][nt][1]);
              mma_16816<false>(part, a[1], bf[1][nt][0], bf[1][nt][1]);
              CELLM_UNROLL
              for (int c = 0; c < 4; ++c) {
                acc[mt][nt][c] = fmaf(d[nt][c & 1], part[c], acc[mt][nt][c]);
              }
            }
          }
        }
      } else {
        CELLM_UNROLL
        for (int bb = 0; bb < 4; ++bb) {
          const int b = 4 * half + bb;
          uint32_t d2[4];  // block b's scale of each n-tile's row g, as a bf16 pair
          CELLM_UNROLL
          for (int nt = 0; nt < 4; ++nt) {
            const float d = f16_bits_to_float(half_of(sc[nt], b));
            d2[nt] = pack_pair<false>(d, d);
          }
          CELLM_UNROLL
          for (int h = 0; h < 2; ++h) {
            uint32_t bf[4][2];
            CELLM_UNROLL
            for (int nt = 0; nt < 4; ++nt) W::scaled_fragment(wq[nt], b, h, d2[nt], bf[nt]);
            CELLM_UNROLL
            for (int mt = 0; mt < kMTiles; ++mt) {
              uint32_t a[4];
              ldmatrix_x4(a, tile + (16 * mt + (lane & 15)) * kActStride + 32 * bb + 16 * h +
                                 (lane >> 4) * 8);
              CELLM_UNROLL
              for (int nt = 0; nt < 4; ++nt) mma_16816<false>(acc[mt][nt], a, bf[nt][0], bf[nt][1]);
            }
          }
        }
      }
      __syncthreads();
    }
  }

  const bool direct = gridDim.z == 1;
  CELLM_UNROLL
  for (int mt = 0; mt < kMTiles; ++mt) {
    CELLM_UNROLL
    for (int nt = 0; nt < 4; ++nt) {
      CELLM_UNROLL
      for (int c = 0; c < 4; ++c) {
        const int m = m_block + 16 * mt + g + 8 * (c >> 1);
        const int64_t n = n_warp + 8 * nt + 2 * t + (c & 1);
        if (m >= args.num_tokens || n >= args.num_rows) continue;
        if (direct) {
          float* out = args.y + m * args.y_stride + n;
          *out = args.accumulate ? *out + acc[mt][nt][c] : acc[mt][nt][c];
        } else {
          args.partial[(static_cast<int64_t>(blockIdx.z) * args.num_tokens + m) * args.num_rows +
                       n] = acc[mt][nt][c];
        }
      }
    }
  }
}

// y (+)= Σ over splits (in split order) of the partial sums.
__global__ void __launch_bounds__(256)
    reduce_splits_kernel(const float* partial, int32_t num_splits, int32_t num_tokens,
                         int64_t num_rows, float* y, int64_t y_stride, bool accumulate) {
  pdl_launch_dependents();
  pdl_wait();
  const int64_t index = static_cast<int64_t>(blockIdx.x) * 256 + threadIdx.x;
  const int64_t count = num_tokens * num_rows;
  if (index >= count) return;
  const int64_t m = index / num_rows;
  const int64_t n = index - m * num_rows;
  float sum = 0.0f;
  for (int32_t s = 0; s < num_splits; ++s) sum += partial[s * count + index];
  float* out = y + m * y_stride + n;
  *out = accumulate ? *out + sum : sum;
}

unsigned blocks_for(int64_t n, int threads) { return static_cast<unsigned>(ceil_div(n, threads)); }

std::string describe(const MatmulParams& p) {
  return std::string(tensor_type_name(p.w.type)) + " weight [" + std::to_string(p.w.num_rows) +
         ", " + std::to_string(p.w.num_cols) + "], " + std::to_string(p.num_tokens) + " tokens";
}

}  // namespace

bool matmul_wide_fused_applies(const DeviceWeight& w, int32_t num_tokens, bool has_bf16_copy) {
  const int32_t max_tokens = !has_bf16_copy                ? kFusedMaxTokens
                             : w.type == TensorType::kQ4_0 ? kFusedMaxTokensWithCopyQ4_0
                                                           : kFusedMaxTokensWithCopyQ8_0;
  return fused_type(w.type) && w.layout == WeightLayout::kInterleaved && num_tokens >= 1 &&
         num_tokens <= max_tokens && reinterpret_cast<uintptr_t>(w.data) % 16 == 0 &&
         w.row_bytes % 16 == 0 && w.num_cols % kSpan == 0;
}

bool matmul_wide_fused_applies(const MatmulParams& p) {
  return matmul_wide_fused_applies(p.w, p.num_tokens, p.w_bf16 != nullptr);
}

size_t matmul_wide_fused_scratch_bytes(const DeviceWeight& w, int32_t max_tokens) {
  if (!fused_type(w.type) || w.layout != WeightLayout::kInterleaved) return 0;
  const auto m = static_cast<size_t>(std::clamp(max_tokens, 1, kFusedMaxTokens));
  const size_t partials = std::min(
      static_cast<size_t>(kMaxSplits) * m * static_cast<size_t>(w.num_rows) * sizeof(float),
      kPartialBudgetBytes);
  return align_up(m * static_cast<size_t>(w.num_cols) * 2) + align_up(partials);
}

Status launch_matmul_wide_fused(const MatmulParams& p, cudaStream_t stream) {
  if (!matmul_wide_fused_applies(p)) {
    return invalid_argument("matmul_wide_fused: " + describe(p) +
                            ": not an interleaved Q8_0/Q4_0 weight at 1.." +
                            std::to_string(kFusedMaxTokens) + " tokens (fewer with a bf16 copy)");
  }
  const int64_t k = p.w.num_cols;
  const int64_t n = p.w.num_rows;
  const int32_t m = p.num_tokens;
  if ((p.x_wide == nullptr && (p.x == nullptr || p.x_stride < k)) || p.y == nullptr ||
      p.y_stride < n) {
    return invalid_argument("matmul_wide_fused: " + describe(p) + ": null x/y or short strides");
  }
  const size_t act_bytes = align_up(static_cast<size_t>(m) * static_cast<size_t>(k) * 2);
  if (p.scratch == nullptr || p.scratch_bytes < act_bytes ||
      reinterpret_cast<uintptr_t>(p.scratch) % kAlign != 0) {
    return invalid_argument("matmul_wide_fused: " + describe(p) + ": scratch of " +
                            std::to_string(p.scratch_bytes) + " bytes, need " +
                            std::to_string(act_bytes) + " (256-byte aligned)");
  }
  int device = 0;
  int num_sms = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&num_sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
    return launch_status("matmul_wide_fused: device attributes");
  }
  // Split the columns when the row × token blocks leave the GPU short of the blocks an SM holds
  // (FusedWeight::min_blocks: Q4_0 3 at one m-tile — at 8 tokens the better of 2, 3 and 4 per SM
  // on the H200 — else 2): into as many splits as one wave of those blocks holds, rounded down
  // (rounded up, the blocks spilled into a second wave and weights of more than half the slots'
  // rows split in two: 2–5% slower at 24–256 sessions; prefill_and_batch.md, version 3), as far
  // as the scratch holds the partial sums.
  const int m_tiles = m <= 16 ? 1 : m <= 32 ? 2 : kMaxMTiles;
  const int block_tokens = 16 * m_tiles;
  const int64_t blocks = ceil_div(n, kBlockRows) * ceil_div(m, block_tokens);
  const auto num_spans = static_cast<int32_t>(k / kSpan);
  const int64_t resident = p.w.type == TensorType::kQ4_0
                               ? FusedWeight<TensorType::kQ4_0>::min_blocks(m_tiles)
                               : FusedWeight<TensorType::kQ8_0>::min_blocks(m_tiles);
  int64_t splits = std::clamp<int64_t>(resident * static_cast<int64_t>(num_sms) / blocks, 1,
                                       std::min<int64_t>(num_spans, kMaxSplits));
  const size_t split_bytes = static_cast<size_t>(m) * static_cast<size_t>(n) * sizeof(float);
  if (splits > 1) {
    splits = std::min<int64_t>(splits,
                               static_cast<int64_t>((p.scratch_bytes - act_bytes) / split_bytes));
    splits = std::max<int64_t>(splits, 1);
  }
  const auto spans_per_split = static_cast<int32_t>(ceil_div(num_spans, splits));
  splits = ceil_div(num_spans, spans_per_split);

  const uint16_t* act = p.x_wide;  // written in the product's order by the kernel before
  if (act == nullptr) {
    auto* permuted = static_cast<uint16_t*>(p.scratch);
    CELLM_RETURN_IF_ERROR(
        pdl_launch_status(launch_pdl(permute_activations_kernel, dim3(blocks_for(m * (k / 2), 256)),
                                     dim3(256), 0, stream, p.x, p.x_stride, m, k, permuted),
                          "matmul_wide_fused: permute activations"));
    act = permuted;
  }
  FusedArgs args;
  args.w = static_cast<const uint8_t*>(p.w.data);
  args.num_rows = n;
  args.num_cols = k;
  args.row_bytes = p.w.row_bytes;
  args.act = act;
  args.num_tokens = m;
  args.y = p.y;
  args.y_stride = p.y_stride;
  args.accumulate = p.accumulate;
  args.partial =
      splits > 1 ? reinterpret_cast<float*>(static_cast<uint8_t*>(p.scratch) + act_bytes) : nullptr;
  args.num_spans = num_spans;
  args.spans_per_split = spans_per_split;
  const dim3 grid(static_cast<unsigned>(ceil_div(n, kBlockRows)),
                  static_cast<unsigned>(ceil_div(m, block_tokens)), static_cast<unsigned>(splits));
  const auto launch = [&](auto m_tiles_tag) {
    constexpr int kMTiles = decltype(m_tiles_tag)::value;
    return p.w.type == TensorType::kQ4_0
               ? launch_pdl(fused_quantized_kernel<TensorType::kQ4_0, kMTiles>, grid,
                            dim3(kThreads), 0, stream, args)
               : launch_pdl(fused_quantized_kernel<TensorType::kQ8_0, kMTiles>, grid,
                            dim3(kThreads), 0, stream, args);
  };
  const cudaError_t launched = m_tiles == 1   ? launch(std::integral_constant<int, 1>{})
                               : m_tiles == 2 ? launch(std::integral_constant<int, 2>{})
                                              : launch(std::integral_constant<int, kMaxMTiles>{});
  CELLM_RETURN_IF_ERROR(pdl_launch_status(launched, "matmul_wide_fused"));
  if (splits > 1) {
    CELLM_RETURN_IF_ERROR(pdl_launch_status(
        launch_pdl(reduce_splits_kernel, dim3(blocks_for(m * n, 256)), dim3(256), 0, stream,
                   static_cast<const float*>(args.partial), static_cast<int32_t>(splits), m, n, p.y,
                   p.y_stride, p.accumulate),
        "matmul_wide_fused: reduce splits"));
  }
  return ok_status();
}

}  // namespace cellm::kernels
