// rope_kv_test_case: the q|k|v shape, angles and tokens the tests of a product's RoPE / K-V
// epilogue (rope_kv_output.h) share — decode_matmul_test and matmul_int8_test — and their CPU
// reference: a product's rows split into q, k and v, q and k rotated by cpu_rope. Header-only:
// it calls into the CPU backend each of those tests links. Tests only. Thread-safety:
// single-threaded test code.
#pragma once

#include <cmath>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "backends/cpu/cpu_ops.h"
#include "backends/cuda/kernels/kernel_test_support.h"
#include "backends/cuda/kernels/rope_kv.cuh"
#include "backends/cuda/kernels/rope_kv_output.h"

namespace cellm::kernels::testing {

// 4 query heads and 2 kv heads of 64 dims (the leading 48 rotate: base 500000, scale 0.5,
// llama3-like divisors), value heads of 32; the tokens' positions and the cache rows they write,
// on the host and the device.
struct RopeKvCase {
  static constexpr int32_t kHeads = 4;
  static constexpr int32_t kKvHeads = 2;
  static constexpr int32_t kHeadDim = 64;
  static constexpr int32_t kRotaryDims = 48;
  static constexpr int32_t kValueDim = 32;
  static constexpr int32_t kQWidth = kHeads * kHeadDim;
  static constexpr int32_t kKvWidth = kKvHeads * kHeadDim;
  static constexpr int32_t kVWidth = kKvHeads * kValueDim;
  static constexpr int64_t kRows = kQWidth + kKvWidth + kVWidth;  // N of the q|k|v product

  RopeKvCase(std::vector<int32_t> token_positions, std::vector<int32_t> token_cells, uint32_t seed)
      : positions(std::move(token_positions)),
        cells(std::move(token_cells)),
        factors(divisors(seed)),
        positions_dev(positions),
        cells_dev(cells),
        factors_dev(factors) {
    rope.style = RopeStyle::kNormal;
    rope.head_dim = kHeadDim;
    rope.num_rotary_dims = kRotaryDims;
    rope.freq_base = 500000.0f;
    rope.freq_scale = 0.5f;
    rope.freq_factors = factors.data();
  }

  int32_t num_tokens() const { return static_cast<int32_t>(positions.size()); }

  // The epilogue's arguments for caches of `dtype` (the angles computed per pair).
  RopeKvOutput output(void* k_cache, void* v_cache, KvDtype dtype) const {
    RopeKvOutput r;
    r.positions = positions_dev.get();
    r.cells = cells_dev.get();
    r.q_width = kQWidth;
    r.kv_width = kKvWidth;
    r.v_width = kVWidth;
    r.head_dim = kHeadDim;
    r.num_rotary_dims = kRotaryDims;
    r.freq_base = rope.freq_base;
    r.freq_scale = rope.freq_scale;
    r.freq_factors = factors_dev.get();
    r.k_cache = k_cache;
    r.v_cache = v_cache;
    r.cache_dtype = dtype;
    return r;
  }

  // launch_rope_table's arguments for the same angles into `table`: [num_tokens, kRotaryDims / 2].
  RopeTableParams table_params(float2* table) const {
    RopeTableParams p;
    p.num_tokens = num_tokens();
    p.positions = positions_dev.get();
    p.num_rotary_dims = kRotaryDims;
    p.freq_base = rope.freq_base;
    p.freq_scale = rope.freq_scale;
    p.freq_factors = factors_dev.get();
    p.table = table;
    return p;
  }

  // `product`'s rows ([num_tokens, kRows], bias added) as the epilogue must leave them: q and k
  // rotated (CPU), v as they are.
  struct Reference {
    std::vector<float> q, k, v;
  };
  Reference reference(std::span<const float> product) const {
    Reference ref;
    for (int32_t t = 0; t < num_tokens(); ++t) {
      const float* row = product.data() + t * kRows;
      ref.q.insert(ref.q.end(), row, row + kQWidth);
      ref.k.insert(ref.k.end(), row + kQWidth, row + kQWidth + kKvWidth);
      ref.v.insert(ref.v.end(), row + kQWidth + kKvWidth, row + kRows);
    }
    cpu_rope(ref.q.data(), positions.data(), num_tokens(), kHeads, rope);
    cpu_rope(ref.k.data(), positions.data(), num_tokens(), kKvHeads, rope);
    return ref;
  }

  std::vector<int32_t> positions;
  std::vector<int32_t> cells;
  std::vector<float> factors;  // [kRotaryDims / 2] divisors ≥ 1
  RopeParams rope;             // the CPU's view of the same angles
  DeviceArray<int32_t> positions_dev;
  DeviceArray<int32_t> cells_dev;
  DeviceArray<float> factors_dev;

 private:
  static std::vector<float> divisors(uint32_t seed) {
    std::vector<float> values = random_floats(kRotaryDims / 2, seed, 4.0f);
    for (float& f : values) f = 1.0f + std::fabs(f);
    return values;
  }
};

}  // namespace cellm::kernels::testing
