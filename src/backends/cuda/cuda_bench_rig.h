// cuda_bench_rig: the measuring rig behind run_cuda_bench (cuda_bench.cpp) — an executor's steps
// timed (medians of the host's wall time between executes and of the device's time), sessions
// filled with prompts, decode steps fed back their greedy or sampled tokens, prompts timed, each
// figure turned into a CudaBenchResult with its ratio to the hardware limit. It does not know
// which figures a run asks for (cuda_bench.cpp decides). Internal to the CUDA backend; one run at a
// time, on one thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backends/cuda/cuda_bench.h"
#include "backends/cuda/cuda_executor.h"
#include "backends/cuda/hardware_limits.h"
#include "batching/sampler.h"
#include "core/status.h"

namespace cellm::cuda_bench_internal {

// Medians of a measurement's timed steps: the whole execute, and the device's part of it.
struct StepTimes {
  double ms = 0.0;
  double device_ms = 0.0;
};

// Deterministic token ids spread over the vocabulary.
class TokenSource {
 public:
  TokenSource(uint64_t seed, int32_t vocab) : state_(seed * 2654435761u + 1), vocab_(vocab) {}
  int32_t next() {
    state_ = state_ * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<int32_t>((state_ >> 33) % static_cast<uint64_t>(vocab_));
  }
  std::vector<int32_t> take(int32_t n) {
    std::vector<int32_t> tokens(static_cast<size_t>(n));
    for (int32_t& t : tokens) t = next();
    return tokens;
  }

 private:
  uint64_t state_;
  int32_t vocab_;
};

// Everything one run needs: the executor, its model and what the floor of a step is.
class BenchRig {
 public:
  BenchRig(const CudaBenchOptions& options, const HardwareLimits& limits, CudaExecutor& executor,
           CudaBenchReport& report);

  // The floor of a step running `rows` token rows and `kept` LM-head rows, `calls` forwards.
  void add_result(std::string name, std::string unit, double value, const StepTimes& times,
                  int64_t rows, int64_t kept, int64_t calls);

  // Opens `n` sessions, each holding `context` positions (prompts run W tokens per call).
  StatusOr<std::vector<SessionId>> open_with_context(int32_t n, int32_t context);

  // Times decode steps of the first `n` sessions of `sessions` (each one new token).
  // With `num_top_logprobs` >= 0 every row also asks for its log-probabilities: summarized by
  // the executor (OutputRow::logprobs), or with `host_logprobs` computed from each row on this
  // thread (token_logprobs), as for an executor that summarizes none.
  // With `sampling`, every row is sampled with it on this thread instead: from the row, or with
  // `from_candidates` from the candidates the executor lists; where they may not decide, the
  // steps keep their rows on the device and the undecided ones are fetched, as the engine does.
  StatusOr<StepTimes> time_decode(const std::vector<SessionId>& sessions, int32_t n,
                                  bool return_logits, int32_t num_top_logprobs = -1,
                                  bool host_logprobs = false,
                                  const SamplingParams* sampling = nullptr,
                                  bool from_candidates = false);

  // Rows that listed candidates since the last call, how many of them decided the draw, and how
  // many of the others the device drew from the whole row.
  struct CandidateCounts {
    int64_t rows = 0;
    int64_t decided = 0;
    int64_t row_draws = 0;
  };
  CandidateCounts take_candidate_counts();

  // Times one execute of a fresh session's `length`-token prompt, keeping its last row.
  StatusOr<StepTimes> time_prompt(int32_t length, int32_t warmup, int32_t steps);

 private:
  // Medians of timed executes of `make_batch(i)` after warm-up ones: the wall time from one
  // execute's return to the next one's (so a step the executor ran ahead counts from when the
  // previous one was handed back, and the host's own work between steps is counted too); the
  // device part from the executor's step timing. `after(i, output)` runs after each.
  template <typename Make, typename After>
  StatusOr<StepTimes> time_steps(int32_t warmup, int32_t steps, bool return_logits, Make make_batch,
                                 After after);

  // Every row's token into `next` (and appended to its context): from its candidates when they
  // decide it, else from its row — the step's, or fetched from the device with the other
  // undecided rows in one call when the step kept them (BatchInput::keep_logits).
  void sample_rows(std::vector<Sampler>& samplers, std::vector<std::vector<int32_t>>& contexts,
                   const BatchOutput& output, std::vector<int32_t>& next);

  const CudaBenchOptions& options_;
  const HardwareLimits& limits_;
  CudaExecutor& executor_;
  CudaBenchReport& report_;
  TokenSource tokens_;
  uint64_t lm_macs_ = 0;
  uint64_t layer_macs_ = 0;
  double logprob_sum_ = 0.0;
  int64_t num_candidate_rows_ = 0;
  int64_t num_decided_rows_ = 0;
  int64_t num_row_draws_ = 0;
};

}  // namespace cellm::cuda_bench_internal
