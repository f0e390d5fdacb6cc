// Host-only tests of the device weight layouts and of the decoders the kernels run (compiled
// here as plain C++): repacking round trips, element decoders bit-exact against the CPU
// dequantization, and the small-M product's per-chunk arithmetic emulated over whole rows.
#include "backends/cuda/kernels/weight_layout.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <type_traits>
#include <vector>

#include "backends/cuda/kernels/block_major_q4_0.cuh"
#include "backends/cuda/kernels/gemv_chunk.cuh"
#include "backends/cuda/kernels/kernel_test_support.h"
#include "backends/cuda/kernels/quantize_activations.cuh"
#include "backends/cuda/kernels/weight_decode.cuh"

namespace cellm::kernels {
namespace {

using testing::dequantize_rows;
using testing::random_floats;
using testing::random_gguf_rows;

struct Shape {
  TensorType type;
  int64_t num_cols;
};

std::string shape_name(TensorType type, int64_t num_cols) {
  return std::string(tensor_type_name(type)) + " x" + std::to_string(num_cols);
}

// Random GGUF rows and their repacking to the device layout (on the host).
struct HostWeight {
  std::vector<uint8_t> gguf;    // [rows, GGUF row bytes]
  std::vector<uint8_t> device;  // [rows, device_row_bytes]
};

HostWeight random_weight(TensorType type, int64_t rows, int64_t cols, uint32_t seed) {
  HostWeight w{random_gguf_rows(type, rows, cols, seed), {}};
  w.device.assign(device_row_bytes(type, cols) * static_cast<size_t>(rows), 0xaa);
  const Status status = repack_rows_for_device(type, cols, rows, w.gguf, w.device);
  EXPECT_TRUE(status.ok()) << status.to_string();
  return w;
}

// The GEMV kernels' loop over rows [row0, row0 + R) of a device-layout matrix: every chunk of
// every row loaded with Decoder::load and handed to `accumulate(chunks, chunk_index)`.
template <class Decoder, int R, class Accumulate>
void for_each_chunk(TensorType type, const std::vector<uint8_t>& device, int64_t num_cols,
                    int64_t row0, Accumulate accumulate) {
  const uint64_t row_bytes = device_row_bytes(type, num_cols);
  for (int64_t c = 0; c < num_cols / Decoder::kChunkElems; ++c) {
    typename Decoder::Chunk chunk[R];
    for (int r = 0; r < R; ++r) {
      chunk[r] = Decoder::load(device.data() + (row0 + r) * row_bytes, num_cols, c);
    }
    accumulate(chunk, c);
  }
}

const Shape kShapes[] = {
    {TensorType::kF32, 36},    {TensorType::kF16, 40},   {TensorType::kBF16, 260},
    {TensorType::kQ8_0, 96},   {TensorType::kQ8_0, 512}, {TensorType::kQ8_0, 768},
    {TensorType::kQ4_0, 160},  {TensorType::kQ4_0, 256}, {TensorType::kQ4_0, 1280},
    {TensorType::kQ4_K, 768},  {TensorType::kQ4_K, 256}, {TensorType::kQ6_K, 512},
    {TensorType::kQ6_K, 1792},
};

TEST(WeightLayoutTest, RepackThenUnpackGivesBackTheGgufBytes) {
  for (const Shape& shape : kShapes) {
    SCOPED_TRACE(shape_name(shape.type, shape.num_cols));
    const int64_t rows = 3;
    const HostWeight w = random_weight(shape.type, rows, shape.num_cols, 7);
    std::vector<uint8_t> back(w.gguf.size(), 0x55);
    ASSERT_TRUE(unpack_rows_from_device(shape.type, shape.num_cols, rows, w.device, back).ok());
    EXPECT_EQ(back, w.gguf);
  }
}

TEST(WeightLayoutTest, InterleavedLayoutOnlyForQuantizedRowsOf256Multiples) {
  EXPECT_EQ(device_weight_layout(TensorType::kQ4_0, 4096), WeightLayout::kInterleaved);
  EXPECT_EQ(device_weight_layout(TensorType::kQ6_K, 3584), WeightLayout::kInterleaved);
  EXPECT_EQ(device_weight_layout(TensorType::kQ4_0, 96), WeightLayout::kGguf);
  EXPECT_EQ(device_weight_layout(TensorType::kBF16, 4096), WeightLayout::kGguf);
  // Q6_K rows are padded to 16 bytes (210 · 14 = 2940 → 2944); the others keep GGUF's size.
  EXPECT_EQ(device_row_bytes(TensorType::kQ6_K, 3584), 2944u);
  EXPECT_EQ(device_row_bytes(TensorType::kQ4_0, 4096), 2304u);
  EXPECT_EQ(device_row_bytes(TensorType::kQ8_0, 4096), 4352u);
}

TEST(WeightLayoutTest, QuantizedTypesAreTheBlockTypesTheDeviceSupports) {
  for (const TensorType type :
       {TensorType::kQ8_0, TensorType::kQ4_0, TensorType::kQ4_K, TensorType::kQ6_K}) {
    EXPECT_TRUE(is_quantized_type(type)) << tensor_type_name(type);
    EXPECT_TRUE(cuda_supports_weight_type(type)) << tensor_type_name(type);
  }
  for (const TensorType type : {TensorType::kF32, TensorType::kF16, TensorType::kBF16}) {
    EXPECT_FALSE(is_quantized_type(type)) << tensor_type_name(type);
  }
}

TEST(WeightLayoutTest, RefusesUnsupportedTypesAndPartialBlocks) {
  EXPECT_EQ(check_device_weight(TensorType::kQ5_K, 256, "w").code(), StatusCode::kUnimplemented);
  EXPECT_EQ(check_device_weight(TensorType::kQ4_0, 48, "w").code(), StatusCode::kInvalidArgument);
  std::vector<uint8_t> small(10);
  EXPECT_FALSE(repack_rows_for_device(TensorType::kQ4_0, 256, 1, small, small).ok());
}

// Every element through the decoders the kernels use equals the CPU dequantization exactly.
TEST(WeightLayoutTest, ElementDecodersMatchTheCpuDequantizationBitForBit) {
  for (const Shape& shape : kShapes) {
    SCOPED_TRACE(shape_name(shape.type, shape.num_cols));
    const int64_t rows = 2;
    const HostWeight w = random_weight(shape.type, rows, shape.num_cols, 11);
    const std::vector<uint8_t>& gguf = w.gguf;
    const std::vector<uint8_t>& device = w.device;
    const std::vector<float> ref = dequantize_rows(shape.type, rows, shape.num_cols, gguf);
    const uint64_t gguf_row = gguf.size() / rows;
    const uint64_t device_row = device_row_bytes(shape.type, shape.num_cols);
    const bool interleaved =
        device_weight_layout(shape.type, shape.num_cols) == WeightLayout::kInterleaved;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t e = 0; e < shape.num_cols; ++e) {
        const float want = ref[r * shape.num_cols + e];
        ASSERT_EQ(gguf_element(shape.type, gguf.data() + r * gguf_row, e), want) << "gguf " << e;
        if (!interleaved) continue;
        const uint8_t* row = device.data() + r * device_row;
        float got = 0.0f;
        switch (shape.type) {
          case TensorType::kQ8_0:
            got = interleaved_element<DecodeQ8_0>(row, shape.num_cols, e);
            break;
          case TensorType::kQ4_0:
            got = interleaved_element<DecodeQ4_0>(row, shape.num_cols, e);
            break;
          case TensorType::kQ4_K:
            got = interleaved_element<DecodeQ4_K>(row, shape.num_cols, e);
            break;
          case TensorType::kQ6_K:
            got = interleaved_element<DecodeQ6_K>(row, shape.num_cols, e);
            break;
          default:
            FAIL() << "no interleaved decoder";
        }
        ASSERT_EQ(got, want) << "interleaved element " << e << " of row " << r;
      }
    }
  }
}

// Emulates the GEMV kernel's loop (every chunk of every row through accumulate_chunk) and
// compares with a double-precision dot of the CPU dequantization.
template <class Decoder, int R = 2, int M = 4>
void expect_emulated_gemv_matches(TensorType type, int64_t num_cols, int num_tokens = 3) {
  SCOPED_TRACE(shape_name(type, num_cols) + " R=" + std::to_string(R) + " M=" + std::to_string(M));
  const int64_t rows = 2 * R;
  const HostWeight weight = random_weight(type, rows, num_cols, 21);
  const std::vector<float> w = dequantize_rows(type, rows, num_cols, weight.gguf);
  const int64_t x_stride = num_cols + 4;
  const std::vector<float> x = random_floats(static_cast<size_t>(num_tokens * x_stride), 5);
  for (int64_t row0 = 0; row0 < rows; row0 += R) {
    float acc[R][M] = {};
    for_each_chunk<Decoder, R>(
        type, weight.device, num_cols, row0, [&](const auto& chunk, int64_t c) {
          accumulate_chunk<Decoder, R, M>(chunk, x.data(), x_stride, num_tokens, c, acc);
        });
    for (int r = 0; r < R; ++r) {
      for (int t = 0; t < num_tokens; ++t) {
        double want = 0.0;
        double scale = 0.0;
        for (int64_t e = 0; e < num_cols; ++e) {
          const double p = static_cast<double>(w[(row0 + r) * num_cols + e]) * x[t * x_stride + e];
          want += p;
          scale += std::fabs(p);
        }
        EXPECT_NEAR(acc[r][t], want, 1e-6 * scale) << "row " << row0 + r << " token " << t;
      }
      for (int t = num_tokens; t < M; ++t) EXPECT_EQ(acc[r][t], 0.0f) << "unused token slot";
    }
  }
}

TEST(WeightLayoutTest, EmulatedSmallMProductMatchesTheCpuForEveryFastLayout) {
  expect_emulated_gemv_matches<DecodeF32>(TensorType::kF32, 72);
  expect_emulated_gemv_matches<DecodeF16>(TensorType::kF16, 72);
  expect_emulated_gemv_matches<DecodeBF16>(TensorType::kBF16, 72);
  expect_emulated_gemv_matches<DecodeQ8_0>(TensorType::kQ8_0, 768);
  expect_emulated_gemv_matches<DecodeQ4_0>(TensorType::kQ4_0, 1280);
  expect_emulated_gemv_matches<DecodeQ4_K>(TensorType::kQ4_K, 512);
  expect_emulated_gemv_matches<DecodeQ6_K>(TensorType::kQ6_K, 768);
  // The M = 1 shapes the launches use for matrices of few rows.
  expect_emulated_gemv_matches<DecodeQ8_0, 1, 1>(TensorType::kQ8_0, 512, 1);
  expect_emulated_gemv_matches<DecodeQ4_0, 1, 1>(TensorType::kQ4_0, 256, 1);
  expect_emulated_gemv_matches<DecodeQ4_K, 4, 8>(TensorType::kQ4_K, 256, 8);
}

// Emulates the dp4a kernels (int8 activations) and compares with (a) the same product computed
// in double from the quantized activations — tight: the integer sums are exact — and (b) the
// f32 CPU product — loose: the activations were rounded to int8.
// per_256: activations with one scale per 256 columns, K-quants summed in integers
// (accumulate_chunk_int8_k256).
template <class Decoder, int R, int M>
void expect_emulated_dp4a_matches(TensorType type, int64_t num_cols, int num_tokens,
                                  bool per_256 = false) {
  SCOPED_TRACE(shape_name(type, num_cols) + " dp4a" + (per_256 ? " per 256" : ""));
  const int64_t rows = 2 * R;
  const HostWeight weight = random_weight(type, rows, num_cols, 23);
  const std::vector<float> w = dequantize_rows(type, rows, num_cols, weight.gguf);
  const std::vector<float> x = random_floats(static_cast<size_t>(num_tokens * num_cols), 6);
  const testing::HostQ8Rows xq =
      testing::quantize_rows_q8(x, num_tokens, num_cols, num_cols, per_256);
  std::vector<float> got;
  std::vector<float> want_f32;
  for (int64_t row0 = 0; row0 < rows; row0 += R) {
    float acc[R][M] = {};
    for_each_chunk<Decoder, R>(
        type, weight.device, num_cols, row0, [&](const auto& chunk, int64_t c) {
          if constexpr (std::is_same_v<Decoder, DecodeQ4_K> ||
                        std::is_same_v<Decoder, DecodeQ6_K>) {
            const int8_t* rows_q[M];
            const float* rows_scales[M];
            const int32_t* rows_sums[M];
            for (int t = 0; t < M; ++t) {
              const int row = t < num_tokens ? t : 0;
              rows_q[t] = xq.q.data() + row * num_cols;
              rows_scales[t] = xq.scales.data() + row * (num_cols / 32);
              rows_sums[t] = xq.sums.data() + row * (num_cols / 32);
            }
            if (per_256) {
              accumulate_chunk_int8_k256<Decoder, R, M>(chunk, rows_q, rows_scales, rows_sums,
                                                        num_tokens, c, acc);
            } else {
              accumulate_chunk_int8_k<Decoder, R, M>(chunk, rows_q, rows_scales, num_tokens, c,
                                                     acc);
            }
          } else {
            accumulate_chunk_q8<Decoder, R, M>(chunk, xq.q.data(), xq.scales.data(), num_cols,
                                               num_tokens, c, acc);
          }
        });
    for (int r = 0; r < R; ++r) {
      for (int t = 0; t < num_tokens; ++t) {
        double exact = 0.0;
        double scale = 0.0;
        double f32 = 0.0;
        for (int64_t e = 0; e < num_cols; ++e) {
          const double wv = w[(row0 + r) * num_cols + e];
          const double xv = xq.value(t, e);
          exact += wv * xv;
          scale += std::fabs(wv * xv);
          f32 += wv * x[t * num_cols + e];
        }
        EXPECT_NEAR(acc[r][t], exact, 1e-6 * scale) << "row " << row0 + r << " token " << t;
        got.push_back(acc[r][t]);
        want_f32.push_back(static_cast<float>(f32));
      }
    }
  }
  EXPECT_TRUE(testing::near_relative("dp4a vs f32", got, want_f32, 1e-2));
}

TEST(WeightLayoutTest, EmulatedInt8ActivationProductMatchesTheCpu) {
  expect_emulated_dp4a_matches<DecodeQ8_0, 2, 4>(TensorType::kQ8_0, 768, 3);
  expect_emulated_dp4a_matches<DecodeQ4_0, 4, 2>(TensorType::kQ4_0, 1280, 2);
  expect_emulated_dp4a_matches<DecodeQ4_0, 1, 1>(TensorType::kQ4_0, 256, 1);
  // K-quants: scales (and Q4_K's mins) per sub-block applied to the integer sums.
  expect_emulated_dp4a_matches<DecodeQ4_K, 4, 1>(TensorType::kQ4_K, 1280, 1);
  expect_emulated_dp4a_matches<DecodeQ4_K, 2, 8>(TensorType::kQ4_K, 512, 5);
  expect_emulated_dp4a_matches<DecodeQ6_K, 2, 4>(TensorType::kQ6_K, 768, 3);
  // One activation scale per 256 columns: the groups' sums, scales and mins in integers.
  expect_emulated_dp4a_matches<DecodeQ4_K, 4, 1>(TensorType::kQ4_K, 1280, 1, true);
  expect_emulated_dp4a_matches<DecodeQ4_K, 2, 8>(TensorType::kQ4_K, 512, 5, true);
  expect_emulated_dp4a_matches<DecodeQ6_K, 4, 1>(TensorType::kQ6_K, 768, 1, true);
  expect_emulated_dp4a_matches<DecodeQ6_K, 2, 4>(TensorType::kQ6_K, 768, 3, true);
}

// A chunk's eight integer scales (and mins) unpacked at once, times d (and dmin), equal the values
// unpacked group by group, for every lane of a span; so do the scales packed as bytes.
template <class Decoder>
void expect_scales_unpacked_at_once_as_one_at_a_time(const typename Decoder::Chunk& chunk) {
  for (int64_t c = 0; c < 8; ++c) {
    int scale[8];
    int min[8];
    Decoder::int8_quant_scales(chunk, c, scale, min);
    uint32_t words[2];  // the same scales as bytes, as the per-256 product's dp2a takes them
    Decoder::int8_scale_words(chunk, c, &words[0], &words[1]);
    for (int g = 0; g < 8; ++g) {
      ASSERT_EQ(static_cast<int8_t>(static_cast<uint8_t>(words[g >> 2] >> (8 * (g & 3)))), scale[g])
          << "scale byte of lane " << c << " group " << g;
      float one_scale = 0.0f;
      float one_min = 0.0f;
      Decoder::int8_scale_min(chunk, g, c, &one_scale, &one_min);
      ASSERT_EQ(mul_rn(Decoder::int8_d(chunk), static_cast<float>(scale[g])), one_scale)
          << "lane " << c << " group " << g;
      ASSERT_EQ(mul_rn(Decoder::int8_dmin(chunk), static_cast<float>(min[g])), one_min)
          << "lane " << c << " group " << g;
    }
  }
}

TEST(WeightLayoutTest, KQuantScalesUnpackedAtOnceEqualThoseUnpackedOneAtATime) {
  std::mt19937 rng(61);
  for (int trial = 0; trial < 100; ++trial) {
    DecodeQ4_K::Chunk q4_k{};
    q4_k.head = make_uint4(rng() & 0x3bff3bffu, rng(), rng(), rng());  // d, dmin finite
    ASSERT_NO_FATAL_FAILURE(expect_scales_unpacked_at_once_as_one_at_a_time<DecodeQ4_K>(q4_k));
    for (int j = 0; j < 8; ++j) {  // one sub-block's min alone, as the per-256 product takes it
      int scale = 0;
      int min = 0;
      q4_k_scale_min(q4_k.head, j, &scale, &min);
      ASSERT_EQ(DecodeQ4_K::int8_min_of(q4_k, j), min) << "sub-block " << j;
    }
    DecodeQ6_K::Chunk q6_k{};
    q6_k.scales = make_uint4(rng(), rng(), rng(), rng());
    q6_k.d = rng() & 0x3bffu;
    ASSERT_NO_FATAL_FAILURE(expect_scales_unpacked_at_once_as_one_at_a_time<DecodeQ6_K>(q6_k));
  }
}

TEST(WeightLayoutTest, Int8QuantizationRoundsToNearestAndKeepsZeroBlocksZero) {
  EXPECT_EQ(q8_quantize(1.0f, q8_block_scale(1.0f)), 127);
  EXPECT_EQ(q8_quantize(-1.0f, q8_block_scale(1.0f)), -127);
  EXPECT_EQ(q8_quantize(0.5f, q8_block_scale(1.0f)), 64);  // 63.5 → 64 (even)
  EXPECT_EQ(q8_quantize(0.0f, q8_block_scale(0.0f)), 0);
  // Interleaved positions are a permutation of each 256-element span.
  std::vector<int> seen(512, 0);
  for (int64_t e = 0; e < 512; ++e) ++seen[static_cast<size_t>(interleaved_q8_offset(e))];
  EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), 512);
}

// The ring chain's block-major Q4_0 arithmetic against the plain sum: byte i of a block holds
// element i (low nibble) and i + 16 (high nibble), both less 8, times int8 inputs in order.
TEST(WeightLayoutTest, BlockMajorQ4_0BlockDotIsSixteenTimesTheSignedSum) {
  std::mt19937 rng(71);
  std::uniform_int_distribution<int> byte(0, 255);
  const auto pack = [](const uint8_t(&b)[16]) {
    uint4 v;
    v.x = b[0] | b[1] << 8 | b[2] << 16 | static_cast<uint32_t>(b[3]) << 24;
    v.y = b[4] | b[5] << 8 | b[6] << 16 | static_cast<uint32_t>(b[7]) << 24;
    v.z = b[8] | b[9] << 8 | b[10] << 16 | static_cast<uint32_t>(b[11]) << 24;
    v.w = b[12] | b[13] << 8 | b[14] << 16 | static_cast<uint32_t>(b[15]) << 24;
    return v;
  };
  for (int trial = 0; trial < 2000; ++trial) {
    uint8_t q[16];
    uint8_t x[32];  // int8 inputs as their bytes
    for (uint8_t& b : q) b = static_cast<uint8_t>(byte(rng));
    for (uint8_t& b : x) b = static_cast<uint8_t>(byte(rng));
    if (trial == 0) {  // the extremes: every nibble 15 or 0 against −128 and 127
      for (int i = 0; i < 16; ++i) q[i] = i % 2 == 0 ? 0xf0 : 0x0f;
      for (int i = 0; i < 32; ++i) x[i] = i % 3 == 0 ? 0x80 : 0x7f;
    }
    int expected = 0;
    for (int i = 0; i < 16; ++i) {
      expected += ((q[i] & 15) - 8) * static_cast<int8_t>(x[i]);
      expected += ((q[i] >> 4) - 8) * static_cast<int8_t>(x[i + 16]);
    }
    uint8_t lo_bytes[16];
    uint8_t hi_bytes[16];
    std::copy(x, x + 16, lo_bytes);
    std::copy(x + 16, x + 32, hi_bytes);
    const uint4 lo = pack(lo_bytes);
    const uint4 hi = pack(hi_bytes);
    const int offset = block_major_q4_0_offset(lo, hi);
    ASSERT_EQ(block_major_q4_0_dot16(pack(q), lo, hi, offset), 16 * expected) << "trial " << trial;
  }
}

}  // namespace
}  // namespace cellm::kernels
