// decode_fused_mlp_bench: the batch-1 Q4_0 MLP as one launch and a partials' sum (see the header).
#include "backends/cuda/kernels/decode_block_major_bench.h"
#include "backends/cuda/kernels/decode_fused_mlp_bench.h"
#include "backends/cuda/kernels/gemv_decode.cuh"
#include "backends/cuda/kernels/gemv_decode_inputs.cuh"
#include "backends/cuda/kernels/kernel_common.cuh"
#include "backends/cuda/kernels/pdl.cuh"

namespace cellm::kernels {
namespace {

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;
constexpr int kHalf = 16;  // intermediate columns per half-unit: one gate and one up row per warp
static_assert(kWarps == kHalf);
constexpr int kHidden = 4096;
constexpr int kLaneChunks = kHidden / 32 / 32;  // blocks of 32 per lane and row
constexpr int kDownRows = kHidden / kThreads;   // down rows per thread
constexpr uint32_t kLowNibbles = 0x0f0f0f0fu;

__global__ void repack_kernel(const uint8_t* src, uint8_t* dst, int64_t rows, int64_t cols) {
  const int64_t units = cols / kHalf;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= units * rows) return;
  const int64_t unit = i / rows, row = i % rows;
  const int64_t block = unit / 2;
  const uint8_t* b = src + row * (cols / 2 + cols / 16) + 16 * block;  // byte k: k low, k + 16 high
  uint8_t* q = dst + 8 * i;
  for (int j = 0; j < 8; ++j) {
    q[j] = (unit & 1) == 0 ? static_cast<uint8_t>((b[j] & 0x0f) | ((b[j + 8] & 0x0f) << 4))
                           : static_cast<uint8_t>((b[j] >> 4) | (b[j + 8] & 0xf0));
  }
  const uint8_t* scale = src + row * (cols / 2 + cols / 16) + cols / 2 + 2 * block;
  uint8_t* d = dst + 8 * units * rows + 2 * i;
  d[0] = scale[0];
  d[1] = scale[1];
}

__global__ void __launch_bounds__(kThreads, 1) fused_mlp_kernel(const FusedMlpArgs a) {
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int64_t num_units = a.ffn / kHalf;
  const int64_t first = blockIdx.x * num_units / gridDim.x;
  const int64_t last = (blockIdx.x + 1) * num_units / gridDim.x;
  constexpr int64_t kRowBytes = kHidden / 2 + kHidden / 16;
  const uint8_t* down_q = a.down_units;
  const uint8_t* down_d = a.down_units + 8 * num_units * kHidden;

  // This warp's gate and up rows of half-unit u, lane's blocks of 32: lane, lane + 32, ….
  uint4 gw[2][kLaneChunks];
  uint16_t gd[2][kLaneChunks];
  const auto load_gate_up = [&](int64_t u) {
    CELLM_UNROLL
    for (int r = 0; r < 2; ++r) {
      const uint8_t* row = a.gate_up + (r * a.ffn + kHalf * u + warp) * kRowBytes;
      CELLM_UNROLL
      for (int j = 0; j < kLaneChunks; ++j) {
        const int c = lane + 32 * j;
        gw[r][j] = load_stream_u4(row + 16 * c);
        gd[r][j] = __ldcs(reinterpret_cast<const unsigned short*>(row + kHidden / 2 + 2 * c));
      }
    }
  };
  // Down's 16 columns of half-unit u for rows threadIdx.x + kThreads · k.
  uint2 dw[kDownRows];
  uint16_t dd[kDownRows];
  const auto load_down = [&](int64_t u) {
    CELLM_UNROLL
    for (int k = 0; k < kDownRows; ++k) {
      const int64_t row = threadIdx.x + kThreads * k;
      dw[k] = load_stream_u2(down_q + 8 * (u * kHidden + row));
      dd[k] = __ldcs(reinterpret_cast<const unsigned short*>(down_d + 2 * (u * kHidden + row)));
    }
  };
  if (first < last) {  // weights first: nothing earlier writes them
    load_gate_up(first);
    load_down(first);
  }
  pdl_wait();
  pdl_launch_dependents();

  // The input, [kHidden / 32] blocks: elements 0 … 15 and 16 … 31 apart, so lanes read 16
  // consecutive bytes each; its scale and its sum (the − 8 of the nibbles).
  __shared__ uint4 x_lo[kHidden / 32], x_hi[kHidden / 32];
  __shared__ float x_d[kHidden / 32];
  __shared__ int x_sum[kHidden / 32];
  __shared__ float swiglu[kHalf];
  __shared__ uint4 h_q;  // the half-unit's 16 SwiGLU values as int8
  __shared__ float h_d;
  for (int c = static_cast<int>(threadIdx.x); c < kHidden / 32; c += kThreads) {
    const uint4 lo = load_u4(a.x_q8 + 32 * c), hi = load_u4(a.x_q8 + 32 * c + 16);
    int sum = 0;
    CELLM_UNROLL
    for (int j = 0; j < 4; ++j) {
      sum = dp4a(0x01010101u, word_of(lo, j), sum);
      sum = dp4a(0x01010101u, word_of(hi, j), sum);
    }
    x_lo[c] = lo, x_hi[c] = hi, x_d[c] = a.x_q8_scales[c], x_sum[c] = sum;
  }
  __syncthreads();

  float acc[kDownRows];
  CELLM_UNROLL
  for (int k = 0; k < kDownRows; ++k) acc[k] = 0.0f;
  for (int64_t u = first; u < last; ++u) {
    float g[2] = {0.0f, 0.0f};
    CELLM_UNROLL
    for (int j = 0; j < kLaneChunks; ++j) {
      const int c = lane + 32 * j;
      const uint4 lo = x_lo[c], hi = x_hi[c];
      const float dx = x_d[c];
      const int base = -8 * x_sum[c];
      CELLM_UNROLL
      for (int r = 0; r < 2; ++r) {
        int sum = base;
        CELLM_UNROLL
        for (int q = 0; q < 4; ++q) {  // byte i of the block: elements i (low) and i + 16 (high)
          const uint32_t nibbles = word_of(gw[r][j], q);
          sum = dp4a(nibbles & kLowNibbles, word_of(lo, q), sum);
          sum = dp4a((nibbles >> 4) & kLowNibbles, word_of(hi, q), sum);
        }
        g[r] = fmaf(f16_bits_to_float(gd[r][j]) * dx, static_cast<float>(sum), g[r]);
      }
    }
    if (u + 1 < last) load_gate_up(u + 1);
    CELLM_UNROLL
    for (int r = 0; r < 2; ++r) {
      CELLM_UNROLL
      for (int s = 16; s > 0; s /= 2) g[r] += __shfl_xor_sync(0xffffffffu, g[r], s);
    }
    if (lane == 0) swiglu[warp] = silu_mul(g[0], g[1]);
    __syncthreads();
    if (warp == 0) {  // the 16 values quantized as one int8 block of their own
      const float v = lane < kHalf ? swiglu[lane] : 0.0f;
      float amax = fabsf(v);
      CELLM_UNROLL
      for (int s = 8; s > 0; s /= 2) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, s));
      const float scale = q8_block_scale(amax);
      const uint32_t byte = static_cast<uint8_t>(q8_quantize(v, scale));
      uint32_t word = byte << (8 * (lane & 3));
      word |= __shfl_xor_sync(0xffffffffu, word, 1);
      word |= __shfl_xor_sync(0xffffffffu, word, 2);
      if (lane < kHalf && (lane & 3) == 0) reinterpret_cast<uint32_t*>(&h_q)[lane / 4] = word;
      if (lane == 0) h_d = scale;
    }
    __syncthreads();
    const uint4 hq = h_q;
    const float hd = h_d;
    int h_sum = 0;
    CELLM_UNROLL
    for (int j = 0; j < 4; ++j) h_sum = dp4a(0x01010101u, word_of(hq, j), h_sum);
    CELLM_UNROLL
    for (int k = 0; k < kDownRows; ++k) {  // byte j: column j (low) and j + 8 (high)
      int sum = -8 * h_sum;
      sum = dp4a(dw[k].x & kLowNibbles, hq.x, sum);
      sum = dp4a((dw[k].x >> 4) & kLowNibbles, hq.z, sum);
      sum = dp4a(dw[k].y & kLowNibbles, hq.y, sum);
      sum = dp4a((dw[k].y >> 4) & kLowNibbles, hq.w, sum);
      acc[k] = fmaf(f16_bits_to_float(dd[k]) * hd, static_cast<float>(sum), acc[k]);
    }
    if (u + 1 < last) load_down(u + 1);
  }
  CELLM_UNROLL
  for (int k = 0; k < kDownRows; ++k) {
    a.partials[static_cast<int64_t>(blockIdx.x) * kHidden + threadIdx.x + kThreads * k] = acc[k];
  }
}

constexpr int kSumGroups = 8;

// Block b: outputs [32 b, 32 b + 32); thread (g, o) sums partials g, g + 8, … of output o, then
// the eight groups in order.
__global__ void __launch_bounds__(32 * kSumGroups)
    partials_sum_kernel(float* x, const float* partials, int num_partials, int64_t hidden) {
  pdl_wait();
  pdl_launch_dependents();
  const int o = static_cast<int>(threadIdx.x) % 32, group = static_cast<int>(threadIdx.x) / 32;
  const int64_t i = 32 * static_cast<int64_t>(blockIdx.x) + o;
  float sum = 0.0f;
  for (int p = group; p < num_partials; p += kSumGroups) sum += partials[p * hidden + i];
  __shared__ float sums[kSumGroups][32];
  sums[group][o] = sum;
  __syncthreads();
  if (group == 0) {
    float total = 0.0f;
    CELLM_UNROLL
    for (int g = 0; g < kSumGroups; ++g) total += sums[g][o];
    x[i] += total;
  }
}

}  // namespace

int64_t down_half_units_bytes(int64_t rows, int64_t cols) { return (cols / kHalf) * rows * 10; }

cudaError_t repack_down_half_units(const uint8_t* block_major, uint8_t* dst, int64_t rows,
                                   int64_t cols, cudaStream_t stream) {
  if (cols % 32 != 0 || rows <= 0) return cudaErrorInvalidValue;
  const int64_t n = cols / kHalf * rows;
  repack_kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, stream>>>(block_major, dst, rows,
                                                                            cols);
  return cudaGetLastError();
}

cudaError_t launch_fused_mlp(const FusedMlpArgs& args, cudaStream_t stream) {
  if (args.hidden != kHidden || args.ffn <= 0 || args.ffn % kHalf != 0) {
    return cudaErrorInvalidValue;
  }
  FusedMlpArgs a = args;
  if (a.num_blocks <= 0) {
    int device = 0, sms = 0;
    cudaError_t error = cudaGetDevice(&device);
    if (error == cudaSuccess) {
      error = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    }
    if (error != cudaSuccess) return error;
    a.num_blocks = sms;
  }
  cudaError_t error = launch_pdl(fused_mlp_kernel, dim3(static_cast<unsigned>(a.num_blocks)),
                                 dim3(kThreads), 0, stream, a);
  if (error != cudaSuccess) return error;
  return launch_pdl(partials_sum_kernel, dim3(static_cast<unsigned>(a.hidden / 32)),
                    dim3(32 * kSumGroups), 0, stream, a.x, static_cast<const float*>(a.partials),
                    a.num_blocks, a.hidden);
}

FusedMlpChain::FusedMlpChain(const std::vector<PersistentChainLayer>& layers, int64_t hidden,
                             int64_t ffn, cudaStream_t stream)
    : layers_(layers), hidden_(hidden), ffn_(ffn) {
  for (const PersistentChainLayer& layer : layers_) {
    uint8_t* units = nullptr;
    if (cudaMalloc(&units, down_half_units_bytes(hidden, ffn)) != cudaSuccess ||
        repack_down_half_units(layer.down, units, hidden, ffn, stream) != cudaSuccess) {
      units = nullptr;  // launch() refuses
    }
    down_units_.push_back(units);
  }
  if (cudaMalloc(&partials_, sizeof(float) * 1024 * hidden) != cudaSuccess) partials_ = nullptr;
}

FusedMlpChain::~FusedMlpChain() {
  for (uint8_t* units : down_units_) (void)cudaFree(units);
  (void)cudaFree(partials_);
}

cudaError_t FusedMlpChain::launch(const PersistentChainArgs& a, int stages, bool fused, int8_t* q,
                                  float* scales, cudaStream_t stream) const {
  if (a.num_layers > static_cast<int>(layers_.size()) || partials_ == nullptr) {
    return cudaErrorInvalidValue;
  }
  for (int l = 0; l < a.num_layers; ++l) {
    for (int kind = 0; kind < kBlockMajorStagesPerLayer; ++kind) {
      if ((stages & (kind < 2 ? kFront : kMlp)) == 0 || (fused && kind == 3)) continue;
      if (!fused || kind < 2) {
        const cudaError_t error =
            launch_block_major_stage(a, layers_[l], kind, 4, q, scales, stream);
        if (error != cudaSuccess) return error;
        continue;
      }
      if (down_units_[l] == nullptr) return cudaErrorInvalidValue;
      cudaError_t error = launch_natural_quantize(a, kind, q, scales, stream);
      if (error != cudaSuccess) return error;
      FusedMlpArgs f;
      f.gate_up = layers_[l].gate_up;
      f.down_units = down_units_[l];
      f.x_q8 = q;
      f.x_q8_scales = scales;
      f.partials = partials_;
      f.x = a.x;
      f.hidden = hidden_;
      f.ffn = ffn_;
      error = launch_fused_mlp(f, stream);
      if (error != cudaSuccess) return error;
    }
  }
  return cudaSuccess;
}

}  // namespace cellm::kernels
