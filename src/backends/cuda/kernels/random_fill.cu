// random_fill: random bytes everywhere, then every block scale overwritten with a sane value
// (random_fill.cuh). Scales live where weight_layout.h / weight_decode.cuh put them.
#include <string>

#include "backends/cuda/kernels/kernel_common.cuh"
#include "backends/cuda/kernels/launch_status.h"
#include "backends/cuda/kernels/random_fill.cuh"

namespace cellm::kernels {
namespace {

constexpr int kThreads = 256;

__device__ uint64_t mix(uint64_t z) {  // splitmix64's finalizer
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

__device__ uint64_t random_at(uint64_t seed, uint64_t index) {
  return mix(seed * 0x9e3779b97f4a7c15ull + index + 1);
}

// Uniform in [0.5, 1].
__device__ float unit_half(uint64_t bits) {
  return 0.5f + 0.5f * static_cast<float>(bits >> 40) * (1.0f / 16777216.0f);
}

// Float types: one element per thread, uniform in ±scale, never zero.
__global__ void __launch_bounds__(kThreads) fill_float_kernel(const RandomFillParams p) {
  const int64_t index = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (index >= p.num_rows * p.num_cols) return;
  const uint64_t bits = random_at(p.seed, static_cast<uint64_t>(index));
  // An odd integer in (-2^24, 2^24), exact in f32, over 2^24: uniform in (-1, 1), never 0.
  const int32_t odd = static_cast<int32_t>((bits >> 40) * 2 + 1) - (1 << 24);
  const float value = p.scale * (static_cast<float>(odd) * (1.0f / 16777216.0f));
  switch (p.type) {
    case TensorType::kF32:
      static_cast<float*>(p.data)[index] = value;
      break;
    case TensorType::kF16:
      static_cast<uint16_t*>(p.data)[index] = float_to_f16_bits(value);
      break;
    default:
      static_cast<uint16_t*>(p.data)[index] = float_to_bf16_bits(value);
      break;
  }
}

// Quantized types, first pass: every byte of the buffer random, 4 bytes per thread.
__global__ void __launch_bounds__(kThreads)
    fill_bytes_kernel(uint8_t* bytes, int64_t count, uint64_t seed) {
  const int64_t index = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  const int64_t offset = 4 * index;
  if (offset >= count) return;
  const auto word = static_cast<uint32_t>(random_at(seed, static_cast<uint64_t>(index)));
  if (offset + 4 <= count) {
    *reinterpret_cast<uint32_t*>(bytes + offset) = word;  // the buffer is 16-byte aligned
  } else {
    for (int64_t i = offset; i < count; ++i)
      bytes[i] = static_cast<uint8_t>(word >> (8 * (i - offset)));
  }
}

// Block scales are written as whole, aligned 16-bit stores and kept at least 2^-13 (normal f16,
// far from the subnormal range).
constexpr float kMinScale = 1.0f / 8192.0f;

__device__ void put_half(uint8_t* at, float value) {
  *reinterpret_cast<uint16_t*>(at) = float_to_f16_bits(value);  // every scale is 2-byte aligned
}

// A uniform integer in [lo, hi] from the bits of `word`.
__device__ int uniform_int(uint64_t word, int lo, int hi) {
  return lo + static_cast<int>((word >> 32) % static_cast<uint64_t>(hi - lo + 1));
}

// Second pass: one thread per block (32 elements) or super-block (256) of a row.
__global__ void __launch_bounds__(kThreads)
    fix_scales_kernel(const RandomFillParams p, WeightLayout layout, uint64_t row_bytes) {
  const int64_t block_elems = p.type == TensorType::kQ4_K || p.type == TensorType::kQ6_K ? 256 : 32;
  const int64_t blocks_per_row = p.num_cols / block_elems;
  const int64_t index = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (index >= p.num_rows * blocks_per_row) return;
  const int64_t r = index / blocks_per_row;
  const int64_t b = index % blocks_per_row;
  uint8_t* row = static_cast<uint8_t*>(p.data) + r * static_cast<int64_t>(row_bytes);
  const uint64_t seed = p.seed ^ 0x5ca1ab1eull;
  const auto draw = [&](uint64_t j) {
    return random_at(seed, static_cast<uint64_t>(index) * 64 + j);
  };
  const float u = unit_half(draw(0));
  const bool interleaved = layout == WeightLayout::kInterleaved;
  const int64_t k = p.num_cols;
  switch (p.type) {
    case TensorType::kQ8_0:
      put_half(interleaved ? row + k + 2 * b : row + 34 * b,
               fmaxf(p.scale / 127.0f, kMinScale) * u);
      break;
    case TensorType::kQ4_0:
      put_half(interleaved ? row + k / 2 + 2 * b : row + 18 * b,
               fmaxf(p.scale / 8.0f, kMinScale) * u);
      break;
    case TensorType::kQ4_K: {
      // value = d·sc·q − d·m with q < 16: sub-block scales sc in [1, limit], mins m in
      // [1, limit / 2], limit chosen so that d·limit·15 ≤ scale.
      const float d = fmaxf(p.scale / 945.0f, kMinScale) * u;
      const int limit = max(1, min(63, static_cast<int>(p.scale / (d * 15.0f))));
      int sc[8];
      int mn[8];
      for (int j = 0; j < 8; ++j) {
        sc[j] = uniform_int(draw(1 + j), 1, limit);
        mn[j] = uniform_int(draw(9 + j), 1, max(1, limit / 2));
      }
      uint8_t* super = row + 144 * b;  // same header position in both layouts
      put_half(super, d);
      put_half(super + 2, d);
      uint8_t* packed = super + 4;  // the 12 scale/min bytes (weight_decode.cuh q4_k_scale_min)
      for (int j = 0; j < 4; ++j) {
        packed[j] = static_cast<uint8_t>(sc[j] | ((sc[j + 4] >> 4) << 6));
        packed[j + 4] = static_cast<uint8_t>(mn[j] | ((mn[j + 4] >> 4) << 6));
        packed[j + 8] = static_cast<uint8_t>((sc[j + 4] & 15) | ((mn[j + 4] & 15) << 4));
      }
      break;
    }
    case TensorType::kQ6_K: {
      // value = d·sc·(q − 32) with |q − 32| ≤ 32: sc in [−limit, limit] \ {0}.
      const float d = fmaxf(p.scale / 4096.0f, kMinScale) * u;
      const int limit = max(1, min(127, static_cast<int>(p.scale / (d * 32.0f))));
      uint8_t* scales = interleaved ? row + 3 * k / 4 + 16 * b : row + 210 * b + 192;
      for (int j = 0; j < 16; ++j) {
        const int magnitude = uniform_int(draw(1 + j), 1, limit);
        const int value = (draw(17 + j) >> 63) != 0 ? -magnitude : magnitude;
        scales[j] = static_cast<uint8_t>(static_cast<int8_t>(value));
      }
      put_half(interleaved ? row + 3 * k / 4 + k / 16 + 2 * b : row + 210 * b + 208, d);
      break;
    }
    default:
      break;
  }
}

unsigned blocks_for(int64_t n) { return static_cast<unsigned>(ceil_div(n, kThreads)); }

}  // namespace

Status launch_random_fill(const RandomFillParams& p, cudaStream_t stream) {
  CELLM_RETURN_IF_ERROR(check_device_weight(p.type, p.num_cols, "random_fill"));
  if (p.num_rows < 0 || !(p.scale > 0.0f) || (p.num_rows > 0 && p.data == nullptr) ||
      reinterpret_cast<uintptr_t>(p.data) % 16 != 0) {
    return invalid_argument("random_fill: " + std::to_string(p.num_rows) + " rows, scale " +
                            std::to_string(p.scale) + ", or a null or unaligned pointer");
  }
  if (p.num_rows == 0) return ok_status();
  if (p.type == TensorType::kF32 || p.type == TensorType::kF16 || p.type == TensorType::kBF16) {
    fill_float_kernel<<<blocks_for(p.num_rows * p.num_cols), kThreads, 0, stream>>>(p);
    return launch_status("random_fill");
  }
  const uint64_t row_bytes = device_row_bytes(p.type, p.num_cols);
  const auto total = static_cast<int64_t>(row_bytes) * p.num_rows;
  fill_bytes_kernel<<<blocks_for(ceil_div(total, 4)), kThreads, 0, stream>>>(
      static_cast<uint8_t*>(p.data), total, p.seed);
  const int64_t block_elems = p.type == TensorType::kQ4_K || p.type == TensorType::kQ6_K ? 256 : 32;
  fix_scales_kernel<<<blocks_for(p.num_rows * (p.num_cols / block_elems)), kThreads, 0, stream>>>(
      p, device_weight_layout(p.type, p.num_cols), row_bytes);
  return launch_status("random_fill");
}

}  // namespace cellm::kernels
