// bench_sampling: argmax and row_candidates timed over random logits rows (bench_sampling.h).
#include "backends/cuda/kernels/bench_sampling.h"

#include <cstdio>
#include <vector>

#include "backends/cuda/kernels/argmax.cuh"
#include "backends/cuda/kernels/bench_support.h"
#include "backends/cuda/kernels/row_candidates.cuh"
#include "backends/cuda/kernels/row_draw.cuh"
#include "backends/cuda/kernels/row_logprobs.cuh"
#include "gguf/tensor_type.h"

namespace cellm::kernels {
namespace {

constexpr int64_t kVocab = 128256;     // Llama-3's
constexpr int kLaunchesPerGraph = 20;  // one graph replay: this many launches in a row

// Microseconds per launch: a graph of kLaunchesPerGraph launches, median replay.
double us_per_launch(cudaStream_t stream, const std::function<void()>& launch) {
  const double seconds = bench::time_graph(stream, [&] {
    for (int i = 0; i < kLaunchesPerGraph; ++i) launch();
  });
  return 1e6 * seconds / kLaunchesPerGraph;
}

}  // namespace

void bench_sampling(cudaStream_t stream) {
  std::printf(
      "\n== picking tokens from %lld-logit rows (us per launch, %d launches a graph) ==\n"
      "rows | argmax split | candidates split (draw) | split, no draw | split, top-p only (summed) "
      "| + drawn from the row | one block per row | logprobs split (top 5)\n",
      static_cast<long long>(kVocab), kLaunchesPerGraph);
  constexpr int kMaxRows = 256;
  bench::Buffer logits(sizeof(float) * kMaxRows * kVocab);  // [rows, vocab], f32
  bench::fill(logits.ptr, TensorType::kF32, kMaxRows, kVocab, 7, 8.0f, stream);
  bench::Buffer ids(sizeof(int32_t) * kMaxRows);
  bench::Buffer argmax_scratch(argmax_scratch_bytes(kMaxRows));
  BENCH_CUDA(cudaMemsetAsync(argmax_scratch.ptr, 0, argmax_scratch_bytes(kMaxRows), stream));
  bench::Buffer scratch(row_candidates_scratch_bytes(kMaxRows));
  BENCH_CUDA(cudaMemsetAsync(scratch.ptr, 0, row_candidates_scratch_bytes(kMaxRows), stream));
  bench::Buffer summaries(sizeof(RowCandidatesSummary) * kMaxRows);
  // Asks: T 0.8, top-k 20, top-p 0.95 (the bench's sampled setting), with and without the draw;
  // and top-p 0.95 alone, whose draw reads the row's total.
  std::vector<RowCandidatesAsk> host_asks(kMaxRows);
  for (int r = 0; r < kMaxRows; ++r) {
    host_asks[r].temperature = 0.8f;
    host_asks[r].draw = 1;
    host_asks[r].cuts = {20, 0.95f, 0.0f};
    host_asks[r].seed = 1234 + static_cast<uint64_t>(r);
    host_asks[r].position = 512;
  }
  bench::Buffer asks_draw(sizeof(RowCandidatesAsk) * kMaxRows);
  BENCH_CUDA(cudaMemcpyAsync(asks_draw.ptr, host_asks.data(), sizeof(RowCandidatesAsk) * kMaxRows,
                             cudaMemcpyHostToDevice, stream));
  for (auto& ask : host_asks) ask.cuts = {0, 0.95f, 0.0f};  // no top-k: the row's total is summed
  bench::Buffer asks_summed(sizeof(RowCandidatesAsk) * kMaxRows);
  BENCH_CUDA(cudaMemcpyAsync(asks_summed.ptr, host_asks.data(), sizeof(RowCandidatesAsk) * kMaxRows,
                             cudaMemcpyHostToDevice, stream));
  for (auto& ask : host_asks) {
    ask.draw = 0;
    ask.cuts = {20, 0.95f, 0.0f};
  }
  bench::Buffer asks_plain(sizeof(RowCandidatesAsk) * kMaxRows);
  BENCH_CUDA(cudaMemcpyAsync(asks_plain.ptr, host_asks.data(), sizeof(RowCandidatesAsk) * kMaxRows,
                             cudaMemcpyHostToDevice, stream));
  std::vector<int32_t> host_top(kMaxRows, 5);
  std::vector<int32_t> host_scored(kMaxRows, 17);
  bench::Buffer num_top(sizeof(int32_t) * kMaxRows);
  bench::Buffer scored(sizeof(int32_t) * kMaxRows);
  BENCH_CUDA(cudaMemcpyAsync(num_top.ptr, host_top.data(), sizeof(int32_t) * kMaxRows,
                             cudaMemcpyHostToDevice, stream));
  BENCH_CUDA(cudaMemcpyAsync(scored.ptr, host_scored.data(), sizeof(int32_t) * kMaxRows,
                             cudaMemcpyHostToDevice, stream));
  bench::Buffer logprobs_scratch(row_logprobs_scratch_bytes(kMaxRows));
  BENCH_CUDA(
      cudaMemsetAsync(logprobs_scratch.ptr, 0, row_logprobs_scratch_bytes(kMaxRows), stream));
  bench::Buffer logprobs(sizeof(RowLogprobsSummary) * kMaxRows);
  BENCH_CUDA(cudaStreamSynchronize(stream));
  for (const int rows : {1, 8, 64, 256}) {
    ArgmaxParams argmax;
    argmax.num_rows = rows;
    argmax.vocab = kVocab;
    argmax.logits = logits.as<float>();
    argmax.stride = kVocab;
    argmax.out = ids.as<int32_t>();
    argmax.scratch = argmax_scratch.ptr;
    argmax.scratch_bytes = argmax_scratch_bytes(kMaxRows);
    const double t_argmax = us_per_launch(stream, [&] { BENCH_OK(launch_argmax(argmax, stream)); });
    RowCandidatesParams candidates;
    candidates.num_rows = rows;
    candidates.vocab = kVocab;
    candidates.logits = logits.as<float>();
    candidates.stride = kVocab;
    candidates.asks = asks_draw.as<RowCandidatesAsk>();
    candidates.out = summaries.as<RowCandidatesSummary>();
    candidates.scratch = scratch.ptr;
    candidates.scratch_bytes = row_candidates_scratch_bytes(kMaxRows);
    const double t_split =
        us_per_launch(stream, [&] { BENCH_OK(launch_row_candidates(candidates, stream)); });
    candidates.asks = asks_plain.as<RowCandidatesAsk>();
    const double t_plain =
        us_per_launch(stream, [&] { BENCH_OK(launch_row_candidates(candidates, stream)); });
    candidates.asks = asks_summed.as<RowCandidatesAsk>();
    const double t_summed =
        us_per_launch(stream, [&] { BENCH_OK(launch_row_candidates(candidates, stream)); });
    // The same, and the draw the list leaves undecided (the nucleus of these rows lies past it)
    // drawn from the whole row.
    RowDrawParams drawing;
    drawing.num_rows = rows;
    drawing.vocab = kVocab;
    drawing.logits = logits.as<float>();
    drawing.stride = kVocab;
    drawing.asks = candidates.asks;
    drawing.summaries = candidates.out;
    const double t_drawn = us_per_launch(stream, [&] {
      BENCH_OK(launch_row_candidates(candidates, stream));
      BENCH_OK(launch_row_draw(drawing, stream));
    });
    candidates.asks = asks_draw.as<RowCandidatesAsk>();
    candidates.scratch = nullptr;
    candidates.scratch_bytes = 0;
    const double t_whole =
        us_per_launch(stream, [&] { BENCH_OK(launch_row_candidates(candidates, stream)); });
    RowLogprobsParams lp;
    lp.num_rows = rows;
    lp.vocab = kVocab;
    lp.logits = logits.as<float>();
    lp.stride = kVocab;
    lp.num_top = num_top.as<int32_t>();
    lp.scored = scored.as<int32_t>();
    lp.out = logprobs.as<RowLogprobsSummary>();
    lp.scratch = logprobs_scratch.ptr;
    lp.scratch_bytes = row_logprobs_scratch_bytes(kMaxRows);
    const double t_logprobs =
        us_per_launch(stream, [&] { BENCH_OK(launch_row_logprobs(lp, stream)); });
    std::printf("%4d | %12.1f | %23.1f | %14.1f | %26.1f | %20.1f | %17.1f | %22.1f\n", rows,
                t_argmax, t_split, t_plain, t_summed, t_drawn, t_whole, t_logprobs);
  }
}

}  // namespace cellm::kernels
