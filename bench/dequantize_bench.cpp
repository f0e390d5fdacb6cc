// Cost of the CPU reference weight path: dequantize_row and the fused dot_row on one 4096-element
// weight row of each type (random bytes with sane f16 scales), as the CPU forward calls them
// once per weight row per token. Items are elements. Run: dequantize_bench [--benchmark_filter=]
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <vector>

#include "core/float16.h"
#include "gguf/dequantize.h"

namespace cellm {
namespace {

constexpr size_t kRowElements = 4096;

// Offsets of each block's f16 scale fields (block_formats.h), set to sane values.
std::vector<size_t> half_offsets(TensorType type) {
  switch (type) {
    case TensorType::kQ4_1:
    case TensorType::kQ5_1:
    case TensorType::kQ4_K:
    case TensorType::kQ5_K:
      return {0, 2};
    case TensorType::kQ2_K:
      return {80, 82};
    case TensorType::kQ3_K:
      return {108};
    case TensorType::kQ6_K:
      return {208};
    case TensorType::kF32:
      return {};
    default:
      return {0};
  }
}

std::vector<uint8_t> random_row(TensorType type) {
  const TensorTypeTraits& traits = tensor_type_traits(type);
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<uint8_t> row(kRowElements / traits.block_size * traits.block_bytes);
  if (type == TensorType::kF32) {
    for (size_t i = 0; i < kRowElements; ++i) {
      const float value = normal(rng);
      std::memcpy(row.data() + 4 * i, &value, 4);
    }
    return row;
  }
  for (uint8_t& b : row) b = static_cast<uint8_t>(rng());
  for (size_t block = 0; block < kRowElements / traits.block_size; ++block) {
    for (size_t offset : half_offsets(type)) {
      const uint16_t bits =
          type == TensorType::kBF16 ? f32_to_bf16(normal(rng)) : f32_to_f16(0.01f * normal(rng));
      std::memcpy(row.data() + block * traits.block_bytes + offset, &bits, 2);
    }
  }
  return row;
}

void BM_DequantizeRow(benchmark::State& state) {
  const auto type = static_cast<TensorType>(state.range(0));
  const std::vector<uint8_t> row = random_row(type);
  std::vector<float> out(kRowElements);  // [kRowElements], f32
  for (auto _ : state) {
    if (!dequantize_row(type, row, out).ok()) state.SkipWithError("dequantize_row failed");
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kRowElements));
  state.SetLabel(std::string(tensor_type_name(type)));
}

void BM_DotRow(benchmark::State& state) {
  const auto type = static_cast<TensorType>(state.range(0));
  const std::vector<uint8_t> row = random_row(type);
  const std::vector<float> x(kRowElements, 0.5f);  // [kRowElements], f32
  for (auto _ : state) {
    benchmark::DoNotOptimize(dot_row(type, row, x.data(), kRowElements));
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kRowElements));
  state.SetLabel(std::string(tensor_type_name(type)));
}

void all_types(benchmark::internal::Benchmark* bench) {
  for (TensorType type :
       {TensorType::kF32, TensorType::kF16, TensorType::kBF16, TensorType::kQ8_0, TensorType::kQ4_0,
        TensorType::kQ4_1, TensorType::kQ5_0, TensorType::kQ5_1, TensorType::kQ2_K,
        TensorType::kQ3_K, TensorType::kQ4_K, TensorType::kQ5_K, TensorType::kQ6_K}) {
    bench->Arg(static_cast<int64_t>(type));
  }
}

BENCHMARK(BM_DequantizeRow)->Apply(all_types);
BENCHMARK(BM_DotRow)->Apply(all_types);

}  // namespace
}  // namespace cellm

BENCHMARK_MAIN();
