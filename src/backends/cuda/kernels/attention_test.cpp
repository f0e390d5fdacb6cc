// Parity of the decode (flash-decoding) and prefill attention kernels with cpu_attention, over
// steps built like CellStep: several sequences of different lengths, cell lists that share a
// prefix and are not ascending, tokens grouped or interleaved, windows, GQA ratios 1..16, head
// sizes 8..256, K/V in f32, f16 and bf16, and contexts long enough to split. f16 / bf16 caches
// with 64- and 128-dim heads run the tensor-core kernels (split high/low 16-bit operands: within
// 1e-4 of the CPU); the others the f32 CUDA-core kernels (1e-5). Soft-capped scores (gemma2) on
// every kernel, with queries large enough that scores reach three times the cap.
#include "backends/cuda/kernels/attention.cuh"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "backends/cpu/cpu_ops.h"
#include "backends/cuda/kernels/kernel_test_support.h"
#include "core/float16.h"

namespace cellm::kernels {
namespace {

using testing::DeviceArray;
using testing::random_floats;

// One step: sequences (full cell lists) and the tokens placed in them.
struct Step {
  std::vector<std::vector<int32_t>> seq_cells;  // per step sequence, position → cell
  std::vector<int32_t> token_seq;               // per token: step sequence index
  std::vector<int32_t> token_pos;               // per token: position
  int32_t num_cells = 0;                        // rows of the K/V arrays
};

// Sequences of `lengths`; the last `new_tokens[s]` positions of sequence s are the step's tokens.
// Cells: sequence 0's list is a random permutation; the others share its first `shared`
// positions (a clone) and continue with fresh cells in random order.
Step make_step(const std::vector<int32_t>& lengths, const std::vector<int32_t>& new_tokens,
               int32_t shared, bool interleave, uint32_t seed) {
  std::mt19937 rng(seed);
  Step step;
  const int32_t total = std::accumulate(lengths.begin(), lengths.end(), 0);
  std::vector<int32_t> pool(static_cast<size_t>(total + 16));
  std::iota(pool.begin(), pool.end(), 0);
  std::shuffle(pool.begin(), pool.end(), rng);
  step.num_cells = static_cast<int32_t>(pool.size());
  size_t next = 0;
  for (size_t s = 0; s < lengths.size(); ++s) {
    std::vector<int32_t> cells;
    for (int32_t p = 0; p < lengths[s]; ++p) {
      if (s > 0 && p < shared && p < lengths[0]) {
        cells.push_back(step.seq_cells[0][static_cast<size_t>(p)]);
      } else {
        cells.push_back(pool[next++]);
      }
    }
    step.seq_cells.push_back(cells);
  }
  std::vector<std::vector<int32_t>> queue(lengths.size());
  for (size_t s = 0; s < lengths.size(); ++s) {
    for (int32_t p = lengths[s] - new_tokens[s]; p < lengths[s]; ++p) queue[s].push_back(p);
  }
  bool any = true;
  for (size_t round = 0; any; ++round) {
    any = false;
    for (size_t s = 0; s < lengths.size(); ++s) {
      const size_t begin = interleave ? round : 0;
      const size_t end = interleave ? round + 1 : queue[s].size();
      if (!interleave && round > 0) continue;
      for (size_t i = begin; i < end && i < queue[s].size(); ++i) {
        step.token_seq.push_back(static_cast<int32_t>(s));
        step.token_pos.push_back(queue[s][i]);
        any = true;
      }
    }
    if (!interleave) break;
  }
  return step;
}

struct Case {
  std::string name;
  int32_t num_heads = 8;
  int32_t num_kv_heads = 2;
  int32_t head_dim = 64;
  int32_t value_head_dim = 64;
  KvDtype dtype = KvDtype::kBF16;
  int32_t window = 0;
  float softcap = 0.0f;  // > 0: scores soft-capped (AttentionArgs::softcap)
};

std::vector<uint16_t> to_bits(const std::vector<float>& values, KvDtype dtype) {
  std::vector<uint16_t> bits(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    bits[i] = dtype == KvDtype::kF16 ? f32_to_f16(values[i]) : f32_to_bf16(values[i]);
  }
  return bits;
}

// Runs both kernels on `step` (decode with and without splits, prefill) against cpu_attention.
void expect_attention_parity(const Case& c, const Step& step, int32_t max_splits, int32_t min_cells,
                             bool run_prefill) {
  SCOPED_TRACE(c.name);
  const auto num_tokens = static_cast<int32_t>(step.token_seq.size());
  const int64_t q_stride = static_cast<int64_t>(c.num_heads) * c.head_dim + 8;
  const int64_t out_stride = static_cast<int64_t>(c.num_heads) * c.value_head_dim + 4;
  // Capped: q in ±3·cap, so that scores (q · k / sqrt(head_dim), k in ±1) spread about ±cap and
  // reach 3·cap — far past the cap's linear range.
  const float q_range = c.softcap > 0.0f ? 3.0f * c.softcap : 1.0f;
  const std::vector<float> q =
      random_floats(static_cast<size_t>(num_tokens * q_stride), 1, q_range);
  const size_t k_count = static_cast<size_t>(step.num_cells) * c.num_kv_heads * c.head_dim;
  const size_t v_count = static_cast<size_t>(step.num_cells) * c.num_kv_heads * c.value_head_dim;
  const std::vector<float> k_values = random_floats(k_count, 2);
  const std::vector<float> v_values = random_floats(v_count, 3);

  // CPU reference over compact q.
  std::vector<float> q_compact(static_cast<size_t>(num_tokens) * c.num_heads * c.head_dim);
  for (int32_t t = 0; t < num_tokens; ++t) {
    std::copy_n(q.begin() + t * q_stride, c.num_heads * c.head_dim,
                q_compact.begin() + static_cast<int64_t>(t) * c.num_heads * c.head_dim);
  }
  std::vector<uint16_t> k_bits;
  std::vector<uint16_t> v_bits;
  KvCacheView k_view{k_values.data(), c.dtype, step.num_cells, c.num_kv_heads, c.head_dim};
  KvCacheView v_view{v_values.data(), c.dtype, step.num_cells, c.num_kv_heads, c.value_head_dim};
  if (c.dtype != KvDtype::kF32) {
    k_bits = to_bits(k_values, c.dtype);
    v_bits = to_bits(v_values, c.dtype);
    k_view.data = k_bits.data();
    v_view.data = v_bits.data();
  }
  std::vector<std::span<const int32_t>> visible;
  for (int32_t t = 0; t < num_tokens; ++t) {
    const auto& cells = step.seq_cells[static_cast<size_t>(step.token_seq[static_cast<size_t>(t)])];
    const int32_t pos = step.token_pos[static_cast<size_t>(t)];
    const int32_t begin = c.window > 0 ? std::max(0, pos - c.window + 1) : 0;
    visible.emplace_back(cells.data() + begin, static_cast<size_t>(pos + 1 - begin));
  }
  AttentionParams cpu_params;
  cpu_params.num_heads = c.num_heads;
  cpu_params.num_kv_heads = c.num_kv_heads;
  cpu_params.head_dim = c.head_dim;
  cpu_params.value_head_dim = c.value_head_dim;
  cpu_params.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  cpu_params.softcap = c.softcap;
  std::vector<float> ref_compact(static_cast<size_t>(num_tokens) * c.num_heads * c.value_head_dim);
  cpu_attention(q_compact.data(), visible, k_view, v_view, cpu_params, ref_compact.data(), nullptr);
  const std::vector<float>& ref_values = ref_compact;
  const auto strip = [&](const std::vector<float>& full) {  // drop the output stride's padding
    std::vector<float> kept;
    for (int32_t t = 0; t < num_tokens; ++t) {
      kept.insert(kept.end(), full.begin() + t * out_stride,
                  full.begin() + t * out_stride + c.num_heads * c.value_head_dim);
    }
    return kept;
  };

  // Device inputs.
  std::vector<int32_t> offsets = {0};
  std::vector<int32_t> flat_cells;
  for (const auto& cells : step.seq_cells) {
    flat_cells.insert(flat_cells.end(), cells.begin(), cells.end());
    offsets.push_back(static_cast<int32_t>(flat_cells.size()));
  }
  DeviceArray<float> q_dev(q);
  DeviceArray<int32_t> seq_dev(step.token_seq);
  DeviceArray<int32_t> pos_dev(step.token_pos);
  DeviceArray<int32_t> offsets_dev(offsets);
  DeviceArray<int32_t> cells_dev(flat_cells);
  std::vector<int32_t> token_offsets;  // optional AttentionCells::token_cell_offsets
  for (const int32_t seq : step.token_seq) token_offsets.push_back(offsets[seq]);
  DeviceArray<int32_t> token_offsets_dev(token_offsets);
  DeviceArray<float> k_f32;
  DeviceArray<float> v_f32;
  DeviceArray<uint16_t> k_16;
  DeviceArray<uint16_t> v_16;
  if (c.dtype == KvDtype::kF32) {
    k_f32 = DeviceArray<float>(k_values);
    v_f32 = DeviceArray<float>(v_values);
  } else {
    k_16 = DeviceArray<uint16_t>(k_bits);
    v_16 = DeviceArray<uint16_t>(v_bits);
  }
  DeviceArray<float> out(static_cast<size_t>(num_tokens * out_stride));

  AttentionArgs args;
  args.num_tokens = num_tokens;
  args.num_heads = c.num_heads;
  args.num_kv_heads = c.num_kv_heads;
  args.head_dim = c.head_dim;
  args.value_head_dim = c.value_head_dim;
  args.scale = cpu_params.scale;
  args.softcap = cpu_params.softcap;
  args.window = c.window;
  args.q = q_dev.get();
  args.q_stride = q_stride;
  args.k_cache = c.dtype == KvDtype::kF32 ? static_cast<const void*>(k_f32.get()) : k_16.get();
  args.v_cache = c.dtype == KvDtype::kF32 ? static_cast<const void*>(v_f32.get()) : v_16.get();
  args.cache_dtype = c.dtype;
  args.cells = {seq_dev.get(), pos_dev.get(), offsets_dev.get(), cells_dev.get()};
  args.out = out.get();
  args.out_stride = out_stride;

  const double tolerance = c.dtype == KvDtype::kF32 ? 1e-5 : 1e-4;
  const auto check = [&](const std::string& what, const std::function<void()>& run) {
    out.poison();
    run();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
    EXPECT_TRUE(testing::near_relative(what, strip(out.download()), ref_values, tolerance));
  };
  for (const bool given_offsets : {false, true}) {
    for (const int32_t splits : {1, max_splits}) {
      // Several splits: merged by the combine kernel, and (tensor-core shapes whose grid fits the
      // GPU) inside a thread-block cluster. Each with the tokens' cell offsets given and not.
      for (const bool cluster : {false, true}) {
        if (cluster && splits == 1) continue;
        DecodeAttentionParams decode;
        decode.args = args;
        decode.args.cells.token_cell_offsets = given_offsets ? token_offsets_dev.get() : nullptr;
        decode.max_splits = splits;
        decode.min_cells_per_split = min_cells;
        decode.cluster_merge = cluster;
        const size_t scratch_bytes =
            decode_attention_scratch_bytes(num_tokens, c.num_heads, c.value_head_dim, splits);
        DeviceArray<float> scratch(scratch_bytes / sizeof(float));
        decode.scratch = scratch.get();
        decode.scratch_bytes = scratch_bytes;
        check("decode, max_splits " + std::to_string(splits) + (cluster ? ", cluster" : "") +
                  (given_offsets ? ", token offsets" : ""),
              [&] {
                const Status status = launch_decode_attention(decode, nullptr);
                ASSERT_TRUE(status.ok()) << status.to_string();
              });
        if (cluster) {
          // Launched early (after a kernel of few blocks, as after rope_kv): the same bits.
          const std::vector<float> plain = strip(out.download());
          out.poison();
          decode.early_launch = true;
          const Status status = launch_decode_attention(decode, nullptr);
          decode.early_launch = false;
          ASSERT_TRUE(status.ok()) << status.to_string();
          ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
          EXPECT_EQ(strip(out.download()), plain) << c.name << ": launched early";
        }
        const int64_t width = static_cast<int64_t>(c.num_heads) * c.value_head_dim;
        for (const WideOrder order : {WideOrder::kFused, WideOrder::kNatural}) {
          if (order == WideOrder::kFused && width % 32 != 0) continue;
          // The output as bf16 in the order the next product reads (testing::bf16_in_order: the
          // fused wide product's, or as is): the host's rounding of the f32 output, placed so,
          // bit for bit; the f32 output unchanged.
          const std::vector<float> f32 = out.download();
          const std::vector<uint16_t> want =
              testing::bf16_in_order(f32, num_tokens, width, out_stride, order);
          DeviceArray<uint16_t> wide(want.size());
          wide.poison();
          decode.args.out_wide = wide.get();
          decode.args.out_wide_order = order;
          const Status status = launch_decode_attention(decode, nullptr);
          ASSERT_TRUE(status.ok()) << status.to_string();
          decode.args.out_wide = nullptr;
          EXPECT_EQ(wide.download(), want) << c.name << ": bf16 output";
          EXPECT_EQ(strip(out.download()), strip(f32))
              << c.name << ": f32 output beside the bf16 one";
        }
        if (!cluster || !decode_attention_writes_q8(decode)) continue;
        // The int8 output: the host's quantization of the f32 output, bit for bit; the f32 output
        // unchanged.
        const std::vector<float> f32 = out.download();
        const testing::HostQ8Rows want =
            testing::quantize_rows_q8(f32, num_tokens, width, out_stride);
        DeviceArray<int8_t> q8(want.q.size());
        DeviceArray<float> q8_scales(want.scales.size());
        q8.poison();
        q8_scales.poison();
        decode.args.out_q8 = q8.get();
        decode.args.out_q8_scales = q8_scales.get();
        const Status status = launch_decode_attention(decode, nullptr);
        ASSERT_TRUE(status.ok()) << status.to_string();
        EXPECT_EQ(q8.download(), want.q) << c.name << ": int8 output";
        EXPECT_EQ(q8_scales.download(), want.scales) << c.name << ": int8 output scales";
        EXPECT_EQ(strip(out.download()), strip(f32))
            << c.name << ": f32 output beside the int8 one";
      }
    }
  }
  if (run_prefill) {
    check("prefill", [&] {
      const Status status = launch_prefill_attention(args, nullptr);
      ASSERT_TRUE(status.ok()) << status.to_string();
    });
  }
}

TEST(AttentionKernelTest, DecodeTokensOfSequencesOfDifferentLengthsMatchTheCpu) {
  CELLM_REQUIRE_DEVICE();
  const Step step = make_step({1, 7, 33, 300, 1100}, {1, 1, 1, 1, 1}, 20, false, 5);
  const Case cases[] = {
      {"mha f32 hd64", 4, 4, 64, 64, KvDtype::kF32, 0},
      {"gqa2 f16 hd128", 8, 4, 128, 128, KvDtype::kF16, 0},
      {"gqa4 bf16 hd128", 32, 8, 128, 128, KvDtype::kBF16, 0},
      {"gqa8 bf16 hd64 window", 16, 2, 64, 64, KvDtype::kBF16, 100},
      {"gqa7 f32 hd16", 14, 2, 16, 16, KvDtype::kF32, 0},
      {"gqa16 bf16 hd256", 16, 1, 256, 256, KvDtype::kBF16, 0},
      {"gqa2 f32 hd8 (stories)", 8, 4, 8, 8, KvDtype::kF32, 0},
      {"gqa4 f16 hd64 v32", 8, 2, 64, 32, KvDtype::kF16, 37},
      {"tc gqa7 bf16 hd128", 14, 2, 128, 128, KvDtype::kBF16, 0},
      {"tc gqa16 f16 hd64 (two head batches)", 16, 1, 64, 64, KvDtype::kF16, 0},
      {"tc mha bf16 hd64 window", 4, 4, 64, 64, KvDtype::kBF16, 70},
      {"tc gqa3 f16 hd128", 6, 2, 128, 128, KvDtype::kF16, 0},
      {"tc mha bf16 hd96 window (phi-3)", 8, 8, 96, 96, KvDtype::kBF16, 200},
      {"tc gqa4 f16 hd96", 16, 4, 96, 96, KvDtype::kF16, 0},
      {"mha f32 hd96", 4, 4, 96, 96, KvDtype::kF32, 0},
  };
  for (const Case& c : cases) expect_attention_parity(c, step, 8, 64, true);
}

TEST(AttentionKernelTest, LongContextsSplitAndCombineToTheCpuResult) {
  CELLM_REQUIRE_DEVICE();
  const Step step = make_step({5000, 2100, 3}, {1, 2, 1}, 1000, true, 9);
  expect_attention_parity({"split bf16 gqa4", 32, 8, 128, 128, KvDtype::kBF16, 0}, step, 16, 128,
                          false);
  expect_attention_parity({"split f32 gqa2 window", 8, 4, 64, 64, KvDtype::kF32, 3000}, step, 32,
                          64, false);
  expect_attention_parity({"split bf16 mha hd96", 8, 8, 96, 96, KvDtype::kBF16, 0}, step, 16, 128,
                          false);
  expect_attention_parity({"split bf16 gqa2 hd256 window", 8, 4, 256, 256, KvDtype::kBF16, 1024},
                          step, 16, 128, false);
}

TEST(AttentionKernelTest, PrefillChunksOfSeveralSequencesAreCausalWithinEach) {
  CELLM_REQUIRE_DEVICE();
  // 277-, 45- and 11-position sequences whose last 77, 45 and 1 positions are in the step.
  const Step grouped = make_step({277, 45, 11}, {77, 45, 1}, 8, false, 13);
  const Case cases[] = {
      {"prefill mha f32 hd64", 4, 4, 64, 64, KvDtype::kF32, 0},
      {"prefill gqa2 f16 hd128", 8, 4, 128, 128, KvDtype::kF16, 0},
      {"prefill gqa4 bf16 hd128", 32, 8, 128, 128, KvDtype::kBF16, 0},
      {"prefill gqa8 bf16 hd64 window", 16, 2, 64, 64, KvDtype::kBF16, 50},
      {"prefill gqa7 f32 hd32", 14, 2, 32, 32, KvDtype::kF32, 0},
      {"prefill gqa16 f16 hd256", 16, 1, 256, 256, KvDtype::kF16, 0},
      {"prefill gqa2 bf16 hd256 window (gemma-3)", 8, 4, 256, 256, KvDtype::kBF16, 37},
      {"prefill gqa4 f32 hd256 (the most shared memory)", 8, 2, 256, 256, KvDtype::kF32, 0},
      {"prefill gqa2 f32 hd8", 8, 4, 8, 8, KvDtype::kF32, 0},
      {"prefill tc gqa7 bf16 hd128", 14, 2, 128, 128, KvDtype::kBF16, 0},
      {"prefill tc mha f16 hd64", 4, 4, 64, 64, KvDtype::kF16, 0},
      {"prefill tc gqa16 bf16 hd64 window", 16, 1, 64, 64, KvDtype::kBF16, 40},
      {"prefill tc gqa3 bf16 hd128", 6, 2, 128, 128, KvDtype::kBF16, 0},
      {"prefill tc mha f16 hd96 window (phi-3)", 8, 8, 96, 96, KvDtype::kF16, 30},
      {"prefill tc gqa2 bf16 hd96", 8, 4, 96, 96, KvDtype::kBF16, 0},
  };
  for (const Case& c : cases) expect_attention_parity(c, grouped, 4, 64, true);
}

TEST(AttentionKernelTest, TensorCoreKernelsWalkManyKeyTilesOfLongRuns) {
  CELLM_REQUIRE_DEVICE();
  // Runs of 300 and 190 new tokens over 700- and 260-position sequences: many 64-key tiles,
  // partial last tiles, blocks whose tokens straddle the two runs, and decode splits.
  const Step step = make_step({700, 260, 9}, {300, 190, 9}, 100, false, 23);
  expect_attention_parity({"long runs gqa4 bf16 hd128", 8, 2, 128, 128, KvDtype::kBF16, 0}, step, 6,
                          64, true);
  expect_attention_parity({"long runs gqa8 f16 hd64 window", 16, 2, 64, 64, KvDtype::kF16, 200},
                          step, 3, 100, true);
  expect_attention_parity({"long runs mha bf16 hd96 (phi-3)", 4, 4, 96, 96, KvDtype::kBF16, 0},
                          step, 4, 64, true);
}

TEST(AttentionKernelTest, PrefillHandlesInterleavedTokensOfManySequences) {
  CELLM_REQUIRE_DEVICE();
  // Tokens alternate between sequences, so every query tile mixes sequences.
  const Step mixed = make_step({90, 64, 5, 130, 2}, {20, 9, 5, 3, 2}, 30, true, 17);
  expect_attention_parity({"interleaved gqa4 bf16", 8, 2, 128, 128, KvDtype::kBF16, 0}, mixed, 4,
                          32, true);
  expect_attention_parity({"interleaved mha f32 window", 4, 4, 64, 64, KvDtype::kF32, 7}, mixed, 2,
                          16, true);
}

TEST(AttentionKernelTest, SoftCappedDecodeScoresMatchTheCpu) {
  CELLM_REQUIRE_DEVICE();
  // Contexts of 1 to 1100 cells, up to 8 splits: one block, the combine and the cluster merge.
  const Step step = make_step({1, 7, 33, 300, 1100}, {1, 1, 1, 1, 1}, 20, false, 29);
  const Case cases[] = {
      {"softcap tc gqa4 bf16 hd128", 32, 8, 128, 128, KvDtype::kBF16, 0, 50.0f},
      {"softcap tc gqa4 f16 hd128 window", 16, 4, 128, 128, KvDtype::kF16, 100, 50.0f},
      {"softcap tc gqa2 bf16 hd256 (gemma-2)", 8, 4, 256, 256, KvDtype::kBF16, 0, 50.0f},
      {"softcap tc gqa2 f16 hd256 window", 8, 4, 256, 256, KvDtype::kF16, 64, 50.0f},
      {"softcap cuda cores gqa4 bf16 hd128 v64", 8, 2, 128, 64, KvDtype::kBF16, 0, 50.0f},
      {"softcap cuda cores gqa2 f16 hd256 v128 window", 8, 4, 256, 128, KvDtype::kF16, 70, 50.0f},
  };
  for (const Case& c : cases) expect_attention_parity(c, step, 8, 64, true);
}

TEST(AttentionKernelTest, SoftCappedScoresOfLongContextsSplitAndCombineToTheCpuResult) {
  CELLM_REQUIRE_DEVICE();
  const Step step = make_step({5000, 2100, 3}, {1, 2, 1}, 1000, true, 31);
  expect_attention_parity(
      {"softcap split bf16 gqa4 hd128", 32, 8, 128, 128, KvDtype::kBF16, 0, 50.0f}, step, 16, 128,
      false);
  expect_attention_parity(
      {"softcap split f16 gqa2 hd256 window", 8, 4, 256, 256, KvDtype::kF16, 1024, 50.0f}, step, 16,
      128, false);
  expect_attention_parity(
      {"softcap split cuda cores bf16 gqa2 hd256 v128", 8, 4, 256, 128, KvDtype::kBF16, 0, 50.0f},
      step, 16, 128, false);
}

TEST(AttentionKernelTest, SoftCappedPrefillWithAWindowMatchesTheCpu) {
  CELLM_REQUIRE_DEVICE();
  // 277-, 45- and 11-position sequences whose last 77, 45 and 1 positions are in the step.
  const Step grouped = make_step({277, 45, 11}, {77, 45, 1}, 8, false, 37);
  const Case cases[] = {
      {"softcap prefill tc gqa2 bf16 hd256 window (gemma-2)", 8, 4, 256, 256, KvDtype::kBF16, 37,
       50.0f},
      {"softcap prefill tc gqa2 f16 hd256", 8, 4, 256, 256, KvDtype::kF16, 0, 50.0f},
      {"softcap prefill tc gqa4 bf16 hd128 window", 16, 4, 128, 128, KvDtype::kBF16, 50, 50.0f},
      {"softcap prefill tc mha f16 hd128", 4, 4, 128, 128, KvDtype::kF16, 0, 50.0f},
      {"softcap prefill cuda cores gqa2 bf16 hd256 v128 window", 8, 4, 256, 128, KvDtype::kBF16, 40,
       50.0f},
      {"softcap prefill cuda cores gqa4 f16 hd128 v64", 8, 2, 128, 64, KvDtype::kF16, 0, 50.0f},
  };
  for (const Case& c : cases) expect_attention_parity(c, grouped, 4, 64, true);
}

TEST(AttentionKernelTest, RefusesBadArguments) {
  AttentionArgs args;
  args.num_tokens = 1;
  args.num_heads = 6;
  args.num_kv_heads = 4;  // not a divisor
  args.head_dim = 64;
  args.value_head_dim = 64;
  EXPECT_EQ(launch_prefill_attention(args, nullptr).code(), StatusCode::kInvalidArgument);
  args.num_heads = 8;
  args.head_dim = 60;  // not a multiple of 8
  EXPECT_EQ(launch_prefill_attention(args, nullptr).code(), StatusCode::kInvalidArgument);
  DecodeAttentionParams decode;
  decode.args = args;
  decode.max_splits = 0;
  EXPECT_EQ(launch_decode_attention(decode, nullptr).code(), StatusCode::kInvalidArgument);

  // An int8 output only from the cluster-merged decode kernel, with its scales (no tokens: every
  // other argument is fine).
  args.num_tokens = 0;
  args.head_dim = 64;
  args.q_stride = args.num_heads * args.head_dim;
  args.out_stride = args.num_heads * args.value_head_dim;
  decode.args = args;
  decode.max_splits = 1;
  ASSERT_TRUE(launch_decode_attention(decode, nullptr).ok());
  int8_t q8 = 0;
  float q8_scale = 0.0f;
  args.out_q8 = &q8;
  args.out_q8_scales = &q8_scale;
  EXPECT_EQ(launch_prefill_attention(args, nullptr).code(), StatusCode::kInvalidArgument);
  decode.args = args;
  decode.max_splits = 1;  // one split: no cluster
  EXPECT_EQ(launch_decode_attention(decode, nullptr).code(), StatusCode::kInvalidArgument);
  decode.args.out_q8_scales = nullptr;
  EXPECT_EQ(launch_decode_attention(decode, nullptr).code(), StatusCode::kInvalidArgument);

  // A bf16 output from the decode kernels only; in the fused order, of a width that is a multiple
  // of 32.
  args.out_q8 = nullptr;
  args.out_q8_scales = nullptr;
  uint16_t wide = 0;
  args.out_wide = &wide;
  EXPECT_EQ(launch_prefill_attention(args, nullptr).code(), StatusCode::kInvalidArgument);
  decode.args = args;
  EXPECT_TRUE(launch_decode_attention(decode, nullptr).ok());
  decode.args.num_heads = decode.args.num_kv_heads = 1;
  decode.args.value_head_dim = 24;  // 24 columns
  decode.args.out_stride = 24;
  EXPECT_EQ(launch_decode_attention(decode, nullptr).code(), StatusCode::kInvalidArgument);
  decode.args.out_wide_order = WideOrder::kNatural;
  EXPECT_TRUE(launch_decode_attention(decode, nullptr).ok());

  // A soft cap: finite and ≥ 0 (0: none).
  args.out_wide = nullptr;
  for (const float softcap :
       {-1.0f, std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    SCOPED_TRACE("softcap " + std::to_string(softcap));
    args.softcap = softcap;
    const Status prefill = launch_prefill_attention(args, nullptr);
    EXPECT_EQ(prefill.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(prefill.to_string().find("softcap"), std::string::npos) << prefill.to_string();
    decode.args = args;
    EXPECT_EQ(launch_decode_attention(decode, nullptr).code(), StatusCode::kInvalidArgument);
  }
  args.softcap = 30.0f;
  EXPECT_TRUE(launch_prefill_attention(args, nullptr).ok());
  decode.args = args;
  EXPECT_TRUE(launch_decode_attention(decode, nullptr).ok());
}

}  // namespace
}  // namespace cellm::kernels
