#include "backends/cuda/kernels/kernel_test_support.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>

#include "backends/cuda/kernels/quantize_activations.cuh"
#include "core/check.h"
#include "core/float16.h"
#include "gguf/dequantize.h"
#include "gguf/quantize.h"

namespace cellm::kernels::testing {

void plant_edge_rows(std::vector<float>& logits, int64_t vocab, int64_t first) {
  CELLM_CHECK(vocab > 128000 && static_cast<int64_t>(logits.size()) >= (first + 4) * vocab)
      << "edge rows need four rows of a vocabulary above 128000";
  constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const auto row = [&](int64_t r) { return logits.begin() + (first + r) * vocab; };
  const auto at = [&](int64_t r, int64_t i) -> float& { return logits[(first + r) * vocab + i]; };
  at(0, 7) = kNan;
  at(0, 8) = kInf;
  at(0, 9) = -kInf;
  at(0, 1000) = kInf;
  at(0, vocab - 1) = 50.0f;
  std::fill(row(1), row(2), kNan);
  at(1, 5) = -kInf;
  std::fill(row(2), row(3), -kInf);
  at(2, 11) = 1.5f;
  at(2, 60000) = -2.0f;
  at(2, 128000) = 1.5f;
  std::fill(row(3), row(4), 0.25f);
}

void plant_tie_and_sparse_rows(std::vector<float>& logits, int64_t vocab, int64_t first) {
  CELLM_CHECK(vocab >= 3 && static_cast<int64_t>(logits.size()) >= (first + 2) * vocab)
      << "two rows of at least three logits";
  const auto row = [&](int64_t r) { return logits.begin() + (first + r) * vocab; };
  std::fill(row(0), row(1), 0.25f);
  std::fill(row(1), row(2), -std::numeric_limits<float>::infinity());
  row(1)[1] = 1.5f;
  row(1)[vocab / 2] = -2.0f;
  row(1)[vocab - 1] = 1.5f;
}

std::vector<float> random_floats(size_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> magnitude(scale / 64.0f, scale);
  std::bernoulli_distribution negative(0.5);
  std::vector<float> values(n);
  for (float& v : values) v = negative(rng) ? -magnitude(rng) : magnitude(rng);
  return values;
}

std::vector<int32_t> random_ints(size_t n, uint32_t seed, int32_t lo, int32_t hi) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> dist(lo, hi);
  std::vector<int32_t> values(n);
  for (int32_t& v : values) v = dist(rng);
  return values;
}

std::vector<uint8_t> random_gguf_rows(TensorType type, int64_t num_rows, int64_t num_cols,
                                      uint32_t seed) {
  const TensorTypeTraits& traits = tensor_type_traits(type);
  const size_t row_bytes = static_cast<size_t>(num_cols) / traits.block_size * traits.block_bytes;
  std::vector<uint8_t> bytes(row_bytes * static_cast<size_t>(num_rows));
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> unit(0.5f, 1.0f);
  switch (type) {
    case TensorType::kF32:
    case TensorType::kF16:
    case TensorType::kBF16:
    case TensorType::kQ8_0:
    case TensorType::kQ4_0: {
      const std::vector<float> values =
          random_floats(static_cast<size_t>(num_rows * num_cols), seed, 1.0f);
      for (int64_t r = 0; r < num_rows; ++r) {
        const Status status = quantize_row(
            type,
            std::span<const float>(values.data() + r * num_cols, static_cast<size_t>(num_cols)),
            std::span<uint8_t>(bytes.data() + static_cast<size_t>(r) * row_bytes, row_bytes));
        CELLM_CHECK(status.ok()) << status.to_string();
      }
      break;
    }
    case TensorType::kQ4_K:
      for (size_t b = 0; b < bytes.size() / 144; ++b) {
        uint8_t* block = bytes.data() + b * 144;
        for (size_t i = 0; i < 144; ++i) block[i] = static_cast<uint8_t>(byte(rng));
        const uint16_t d = f32_to_f16(0.01f * unit(rng));
        const uint16_t dmin = f32_to_f16(0.005f * unit(rng));
        std::memcpy(block, &d, 2);
        std::memcpy(block + 2, &dmin, 2);
      }
      break;
    case TensorType::kQ6_K:
      for (size_t b = 0; b < bytes.size() / 210; ++b) {
        uint8_t* block = bytes.data() + b * 210;
        for (size_t i = 0; i < 208; ++i) block[i] = static_cast<uint8_t>(byte(rng));
        const uint16_t d = f32_to_f16(0.002f * unit(rng));
        std::memcpy(block + 208, &d, 2);
      }
      break;
    default:
      CELLM_CHECK(false) << "random_gguf_rows: no generator for " << tensor_type_name(type);
  }
  return bytes;
}

std::vector<float> dequantize_rows(TensorType type, int64_t num_rows, int64_t num_cols,
                                   std::span<const uint8_t> gguf) {
  auto values = dequantize_tensor(type, gguf, static_cast<uint64_t>(num_rows * num_cols));
  CELLM_CHECK(values.ok()) << values.status().to_string();
  return std::move(values).value();
}

WeightView weight_view(TensorType type, int64_t num_rows, int64_t num_cols,
                       std::span<const uint8_t> gguf) {
  WeightView view;
  view.name = "test.weight";
  view.type = type;
  view.num_rows = num_rows;
  view.num_cols = num_cols;
  view.row_bytes = gguf.size() / static_cast<size_t>(num_rows);
  view.bytes = gguf;
  return view;
}

std::vector<float> compact_rows(std::span<const float> values, int64_t num_rows, int64_t stride,
                                int64_t num_cols) {
  CELLM_CHECK(num_rows == 0 || (num_rows - 1) * stride + num_cols <= std::ssize(values))
      << "compact_rows: " << num_rows << " rows of " << num_cols << " at stride " << stride
      << " over " << values.size() << " values";
  std::vector<float> out;
  out.reserve(static_cast<size_t>(num_rows * num_cols));
  for (int64_t r = 0; r < num_rows; ++r) {
    out.insert(out.end(), values.begin() + r * stride, values.begin() + r * stride + num_cols);
  }
  return out;
}

double HostQ8Rows::value(int64_t row, int64_t e) const {
  return static_cast<double>(q[static_cast<size_t>(row * num_cols + interleaved_q8_offset(e))]) *
         scales[static_cast<size_t>(row * (num_cols / 32) + e / 32)];
}

std::vector<uint16_t> bf16_in_order(std::span<const float> values, int64_t num_rows,
                                    int64_t num_cols, int64_t stride, WideOrder order) {
  CELLM_CHECK(order == WideOrder::kNatural || num_cols % 32 == 0)
      << "the fused order needs whole blocks of 32 columns, not " << num_cols;
  std::vector<uint16_t> out(static_cast<size_t>(num_rows * num_cols));
  for (int64_t r = 0; r < num_rows; ++r) {
    for (int64_t column = 0; column < num_cols; ++column) {
      const int64_t i = column % 32;
      const int64_t T = i / 8, h = (i / 4) % 2, p = (i / 2) % 2, j = i % 2;
      const int64_t at =
          order == WideOrder::kNatural ? column : column - i + 16 * h + 8 * p + 2 * T + j;
      out[static_cast<size_t>(r * num_cols + at)] =
          f32_to_bf16(values[static_cast<size_t>(r * stride + column)]);
    }
  }
  return out;
}

HostQ8Rows quantize_rows_q8(std::span<const float> x, int64_t num_rows, int64_t num_cols,
                            int64_t stride, bool per_256) {
  CELLM_CHECK(num_cols % (per_256 ? 256 : 32) == 0) << "quantize_rows_q8: " << num_cols;
  HostQ8Rows out;
  out.num_cols = num_cols;
  out.q.resize(static_cast<size_t>(num_rows * num_cols));
  out.scales.resize(static_cast<size_t>(num_rows * (num_cols / 32)));
  out.sums.resize(out.scales.size());
  for (int64_t t = 0; t < num_rows; ++t) {
    const float* row = x.data() + t * stride;
    for (int64_t b = 0; b < num_cols / 32; ++b) {
      // The block's values, or with per_256 its super-block's (all eight blocks of 256 alike).
      const int64_t first = per_256 ? 256 * (b / 8) : 32 * b;
      const int64_t count = per_256 ? 256 : 32;
      float amax = 0.0f;
      for (int64_t i = 0; i < count; ++i) amax = std::max(amax, std::fabs(row[first + i]));
      const float scale = q8_block_scale(amax);
      out.scales[static_cast<size_t>(t * (num_cols / 32) + b)] = scale;
      int32_t sum = 0;
      for (int i = 0; i < 32; ++i) {
        const int64_t e = 32 * b + i;
        const int8_t q = q8_quantize(row[e], scale);
        out.q[static_cast<size_t>(t * num_cols + interleaved_q8_offset(e))] = q;
        sum += q;
      }
      out.sums[static_cast<size_t>(t * (num_cols / 32) + b)] = sum;
    }
  }
  return out;
}

float kv_stored(float value, KvDtype dtype) {
  switch (dtype) {
    case KvDtype::kF16:
      return f16_to_f32(f32_to_f16(value));
    case KvDtype::kBF16:
      return bf16_to_f32(f32_to_bf16(value));
    default:
      return value;
  }
}

std::vector<float> read_kv_cache(std::span<const uint8_t> bytes, KvDtype dtype) {
  std::vector<float> values;
  if (dtype == KvDtype::kF32) {
    values.resize(bytes.size() / 4);
    std::memcpy(values.data(), bytes.data(), values.size() * 4);
  } else {
    values.resize(bytes.size() / 2);
    for (size_t i = 0; i < values.size(); ++i) {
      uint16_t bits;
      std::memcpy(&bits, bytes.data() + 2 * i, 2);
      values[i] = dtype == KvDtype::kF16 ? f16_to_f32(bits) : bf16_to_f32(bits);
    }
  }
  return values;
}

void expect_kv_cache_rows(std::span<const uint8_t> k_bytes, std::span<const uint8_t> v_bytes,
                          KvDtype dtype, int32_t kv_width, int32_t v_width,
                          std::span<const int32_t> cells, std::span<const float> k_ref,
                          std::span<const float> v_ref) {
  const std::vector<float> k_cached = read_kv_cache(k_bytes, dtype);
  const std::vector<float> v_cached = read_kv_cache(v_bytes, dtype);
  std::vector<float> k_got, v_got, k_want, v_want;
  for (size_t t = 0; t < cells.size(); ++t) {
    for (int32_t i = 0; i < kv_width; ++i) {
      k_got.push_back(k_cached[static_cast<size_t>(cells[t]) * kv_width + i]);
      k_want.push_back(kv_stored(k_ref[t * kv_width + i], dtype));
    }
    for (int32_t i = 0; i < v_width; ++i) {
      v_got.push_back(v_cached[static_cast<size_t>(cells[t]) * v_width + i]);
      v_want.push_back(kv_stored(v_ref[t * v_width + i], dtype));
    }
  }
  const double tolerance = dtype == KvDtype::kF32 ? 1e-5 : 5e-3;
  EXPECT_TRUE(near_relative("k cache", k_got, k_want, tolerance));
  EXPECT_TRUE(near_relative("v cache", v_got, v_want, tolerance));
  const size_t elem = dtype == KvDtype::kF32 ? 4 : 2;
  const size_t k_row = static_cast<size_t>(kv_width) * elem;
  const size_t v_row = static_cast<size_t>(v_width) * elem;
  for (size_t row = 0; row < k_bytes.size() / k_row; ++row) {
    if (std::find(cells.begin(), cells.end(), static_cast<int32_t>(row)) != cells.end()) continue;
    for (size_t b = 0; b < k_row; ++b) {
      if (k_bytes[row * k_row + b] != 0xff) {
        ADD_FAILURE() << "k row " << row << " written, though no token's cell";
        return;
      }
    }
    for (size_t b = 0; b < v_row; ++b) {
      if (v_bytes[row * v_row + b] != 0xff) {
        ADD_FAILURE() << "v row " << row << " written, though no token's cell";
        return;
      }
    }
  }
}

double relative_error(std::span<const float> out, std::span<const float> ref) {
  if (out.size() != ref.size()) return std::nan("");
  double diff = 0.0;
  double norm = 0.0;
  for (size_t i = 0; i < out.size(); ++i) {
    if (std::isnan(out[i])) return std::nan("");
    const double d = static_cast<double>(out[i]) - static_cast<double>(ref[i]);
    diff += d * d;
    norm += static_cast<double>(ref[i]) * static_cast<double>(ref[i]);
  }
  return norm > 0.0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

::testing::AssertionResult near_relative(std::string_view what, std::span<const float> out,
                                         std::span<const float> ref, double tolerance) {
  if (out.size() != ref.size()) {
    return ::testing::AssertionFailure()
           << what << ": " << out.size() << " outputs, " << ref.size() << " reference values";
  }
  const double error = relative_error(out, ref);
  if (error <= tolerance) return ::testing::AssertionSuccess();
  size_t worst = 0;
  double worst_diff = -1.0;
  for (size_t i = 0; i < out.size(); ++i) {
    const double d = std::isnan(out[i]) ? INFINITY : std::fabs(out[i] - ref[i]);
    if (d > worst_diff) {
      worst_diff = d;
      worst = i;
    }
    if (std::isnan(out[i])) break;
  }
  return ::testing::AssertionFailure()
         << what << ": relative error " << error << " > " << tolerance << " over " << out.size()
         << " values; worst at " << worst << ": " << out[worst] << " vs " << ref[worst];
}

void require_device() {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  ASSERT_TRUE(error == cudaSuccess && count > 0)
      << "CUDA kernel tests need a GPU: " << cudaGetErrorString(error);
}

void expect_parity(std::string_view what, DeviceArray<float>& out, const std::function<void()>& run,
                   std::span<const float> ref, double tolerance) {
  out.poison();
  run();
  const cudaError_t error = cudaDeviceSynchronize();
  ASSERT_EQ(error, cudaSuccess) << what << ": " << cudaGetErrorString(error);
  const std::vector<float> values = out.download();
  EXPECT_TRUE(near_relative(what, values, ref, tolerance));
}

}  // namespace cellm::kernels::testing
