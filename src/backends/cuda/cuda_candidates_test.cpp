// Sampling candidates on the CUDA executor (StepInput::candidates_temperature): on stories260K,
// six sessions decode sampled tokens with every row listing candidates at its own temperature
// (one row none); each list is the host's sampling_candidates of the row the executor returns,
// and every draw the candidates decide is the draw from that row. Needs a GPU (labels e2e cuda).
// Thread-safety: test code, one thread.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "backends/cuda/cuda_e2e_support.h"
#include "batching/sampler.h"

namespace cellm {
namespace {

using testing::Tokens;

TEST(CudaCandidatesTest, ListsAreTheHostsAndDecideTheDrawsTheRowsGive) {
  ASSERT_NO_FATAL_FAILURE(testing::require_cuda_device());
  std::unique_ptr<Program> model = testing::open_model("stories260K.gguf");
  const int32_t vocab = model->config().vocab_size;
  const ProgramSpec spec = testing::with_plan(model->spec(), 64, 9, {1, 2, 4, 8});
  CudaExecutorOptions options;
  options.device_argmax = true;
  auto executor = testing::make_cuda(*model, spec, options);
  ASSERT_NE(executor, nullptr);
  ASSERT_TRUE(executor->computes_candidates());
  // Temperatures per session (0: the row lists nothing) and the samplers' other settings.
  const std::vector<float> temperatures = {1.0f, 0.6f, 1.4f, 0.0f, 0.9f, 2.0f};
  std::vector<Sampler> samplers;
  for (size_t i = 0; i < temperatures.size(); ++i) {
    SamplingParams params;
    params.temperature = temperatures[i] > 0.0f ? temperatures[i] : 1.0f;
    params.top_p = i % 2 == 0 ? 0.9f : 1.0f;
    params.min_p = i == 4 ? 0.05f : 0.0f;
    params.top_k = i == 5 ? 20 : 0;
    samplers.emplace_back(params, 1000 + i);
  }
  std::vector<SessionId> sessions;
  std::vector<Tokens> context;
  std::vector<int32_t> committed(temperatures.size(), 0);
  for (size_t i = 0; i < temperatures.size(); ++i) {
    sessions.push_back(*executor->open_session());
    context.push_back({1, static_cast<int32_t>(3 + 11 * i), static_cast<int32_t>(40 + 7 * i)});
  }
  int decided = 0;
  int undecided = 0;
  for (int32_t step = 0; step < 24; ++step) {
    BatchInput batch;
    for (size_t i = 0; i < sessions.size(); ++i) {
      StepInput input = testing::step_input(sessions[i], 0, context[i], committed[i],
                                            static_cast<int32_t>(context[i].size()), true);
      input.candidates_temperature = temperatures[i];
      batch.inputs.push_back(input);
    }
    const BatchOutput output = testing::execute_ok(*executor, batch);
    ASSERT_EQ(output.outputs.size(), sessions.size());
    for (size_t i = 0; i < sessions.size(); ++i) {
      SCOPED_TRACE("session " + std::to_string(i) + ", step " + std::to_string(step));
      const std::span<const float> row =
          output.logits.subspan(i * static_cast<size_t>(vocab), static_cast<size_t>(vocab));
      const OutputRow& out = output.outputs[i];
      ASSERT_EQ(out.candidates.has_value(), temperatures[i] > 0.0f);
      const StatusOr<int32_t> sampled = samplers[i].sample(row, context[i]);
      ASSERT_TRUE(sampled.ok());
      if (out.candidates.has_value()) {
        const RowCandidates want = sampling_candidates(row, temperatures[i]);
        EXPECT_EQ(out.candidates->top, want.top);
        EXPECT_EQ(out.candidates->max_logit, want.max_logit);
        // Another summation order: within n · 2^-52 of the sum of n terms.
        EXPECT_NEAR(out.candidates->total, want.total,
                    static_cast<double>(vocab) * 0x1p-52 * want.total);
        const std::optional<int32_t> from_list = samplers[i].sample_from_candidates(
            *out.candidates, static_cast<int64_t>(context[i].size()));
        if (from_list.has_value()) {
          EXPECT_EQ(*from_list, *sampled);
          ++decided;
        } else {
          ++undecided;
        }
      }
      committed[i] = static_cast<int32_t>(context[i].size());
      context[i].push_back(*sampled);
    }
  }
  std::printf("stories260K rows: the candidates decided %d draws, left %d to the rows\n", decided,
              undecided);
  EXPECT_GT(decided, 0) << "no draw decided: the comparison compared nothing";
}

}  // namespace
}  // namespace cellm
