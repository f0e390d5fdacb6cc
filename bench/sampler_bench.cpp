// Host sampling of one decode step at scale: 256 logits rows of a 128,256-token vocabulary (the
// Llama-3 geometry), each turned into a token by its session's Sampler, as the Runner does after
// every execute() — plain greedy (one read of the row), greedy with a logit bias (a copy, then
// the read), and sampling at temperature 0.8 with top-k 40, top-p 0.9, or both (partial
// selection, never a sort of the whole vocabulary); and top-p 0.95 on 16 flat rows (a wide nucleus,
// as on `cellm bench`'s random weights); and the rewrites 256 penalized sessions hand an executor
// that rewrites rows (Sampler::rewrite_into, as the engine calls it). One iteration is one step's
// 256 rows; the GPU's step at 256 sessions takes about 17-23 ms, which the plain greedy figure is
// measured against (with the CUDA executor the Runner takes the device's argmax instead, reading
// nothing). Each on one thread, then on one thread per hardware thread (the Runner's sampling
// pool). Run: sampler_bench [--benchmark_filter=...]
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "batching/sampler.h"
#include "core/thread_pool.h"

namespace cellm {
namespace {

constexpr int32_t kVocab = 128256;
constexpr int32_t kRows = 256;

// [kRows, kVocab] f32 logits shaped like a model's: a few strong tokens above a normal spread.
const std::vector<float>& step_logits() {
  static const std::vector<float> logits = [] {
    std::vector<float> out(static_cast<size_t>(kRows) * kVocab);
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.0f, 2.0f);
    for (float& v : out) v = normal(rng);
    for (int32_t r = 0; r < kRows; ++r) {
      for (int32_t j = 0; j < 8; ++j)
        out[static_cast<size_t>(r) * kVocab + rng() % kVocab] += 12.0f;
    }
    return out;
  }();
  return logits;
}

// [kFlatRows, kVocab] f32 logits as `cellm bench` draws its random weights' rows: magnitudes
// uniform in [1/8, 8], either sign — flat, so a nucleus of 0.95 holds tens of thousands of tokens.
constexpr int32_t kFlatRows = 16;
const std::vector<float>& flat_logits() {
  static const std::vector<float> logits = [] {
    std::vector<float> out(static_cast<size_t>(kFlatRows) * kVocab);
    std::mt19937 rng(9);
    std::uniform_real_distribution<float> magnitude(0.125f, 8.0f);
    for (float& v : out) v = (rng() & 1) != 0 ? magnitude(rng) : -magnitude(rng);
    return out;
  }();
  return logits;
}

// The benchmark's argument: the threads that share the rows, as the Runner's sampling pool does
// (RunnerOptions::sampling_threads; 0: one per hardware thread).
void sample_step(benchmark::State& state, const SamplingParams& params,
                 const std::vector<float>& logits = step_logits()) {
  const auto num_rows = static_cast<int32_t>(logits.size() / kVocab);
  std::vector<Sampler> samplers;
  for (int32_t r = 0; r < num_rows; ++r) samplers.emplace_back(params, 1000 + r);
  const std::vector<int32_t> context(512, 5);
  ThreadPool pool(static_cast<size_t>(state.range(0)));
  std::vector<int32_t> tokens(static_cast<size_t>(num_rows));
  for (auto _ : state) {
    pool.parallel_for(static_cast<size_t>(num_rows), [&](size_t begin, size_t end) {
      for (size_t r = begin; r < end; ++r) {
        const std::span<const float> row(logits.data() + r * kVocab, kVocab);
        tokens[r] = *samplers[r].sample(row, context);
      }
    });
    benchmark::DoNotOptimize(tokens.data());
  }
  state.counters["threads"] = static_cast<double>(pool.num_threads());
  state.SetItemsProcessed(state.iterations() * num_rows);
}

void BM_Greedy(benchmark::State& state) { sample_step(state, {}); }

void BM_GreedyWithLogitBias(benchmark::State& state) {
  SamplingParams params;
  params.logit_bias = {{17, -1.0f}};
  sample_step(state, params);
}

SamplingParams temperature(int32_t top_k, float top_p) {
  SamplingParams params;
  params.temperature = 0.8f;
  params.top_k = top_k;
  params.top_p = top_p;
  return params;
}

void BM_TopK40(benchmark::State& state) { sample_step(state, temperature(40, 1.0f)); }
void BM_TopP09(benchmark::State& state) { sample_step(state, temperature(0, 0.9f)); }
void BM_TopK40TopP09(benchmark::State& state) { sample_step(state, temperature(40, 0.9f)); }
void BM_FlatTopP095(benchmark::State& state) {
  sample_step(state, temperature(0, 0.95f), flat_logits());
}

// What the engine builds per step for 256 penalized sessions whose rows an executor rewrites
// (Sampler::rewrite_into: the window's distinct tokens and counts, the biases by token): the
// host's share of a penalized step on CUDA. Contexts of 512 tokens over a 2,000-token range, a
// window of 64, three biases.
void BM_PenaltyRewrites(benchmark::State& state) {
  SamplingParams params = temperature(40, 0.95f);
  params.repetition_penalty = 1.1f;
  params.presence_penalty = 0.3f;
  params.frequency_penalty = 0.5f;
  params.logit_bias = {{17, -1.0f}, {300, 2.0f}, {17, 0.5f}};
  std::vector<Sampler> samplers;
  std::vector<std::vector<int32_t>> contexts(kRows);
  std::mt19937 rng(11);
  for (int32_t r = 0; r < kRows; ++r) {
    samplers.emplace_back(params, 1000 + r);
    for (int32_t t = 0; t < 512; ++t) contexts[r].push_back(static_cast<int32_t>(rng() % 2000));
  }
  std::vector<SamplerRewrite> rewrites(kRows);
  for (auto _ : state) {
    for (int32_t r = 0; r < kRows; ++r) samplers[r].rewrite_into(contexts[r], rewrites[r]);
    benchmark::DoNotOptimize(rewrites.data());
  }
  state.SetItemsProcessed(state.iterations() * kRows);
}

BENCHMARK(BM_Greedy)->Unit(benchmark::kMillisecond)->Arg(1)->Arg(0)->UseRealTime();
BENCHMARK(BM_GreedyWithLogitBias)->Unit(benchmark::kMillisecond)->Arg(1)->Arg(0)->UseRealTime();
BENCHMARK(BM_TopK40)->Unit(benchmark::kMillisecond)->Arg(1)->Arg(0)->UseRealTime();
BENCHMARK(BM_TopP09)->Unit(benchmark::kMillisecond)->Arg(1)->Arg(0)->UseRealTime();
BENCHMARK(BM_TopK40TopP09)->Unit(benchmark::kMillisecond)->Arg(1)->Arg(0)->UseRealTime();
BENCHMARK(BM_FlatTopP095)->Unit(benchmark::kMillisecond)->Arg(1)->Arg(0)->UseRealTime();
BENCHMARK(BM_PenaltyRewrites)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace
}  // namespace cellm

BENCHMARK_MAIN();
