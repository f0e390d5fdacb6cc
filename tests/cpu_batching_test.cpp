// End to end on the CPU executor: batching must not change what a session computes. Two prompts
// packed into one step, a rewound session, different slicing plans (W, m, decode widths), chunked
// prompts and clones all give the logits of a session run alone (<= 1e-5; the forward is in fact
// bit-exact here), and a refused batch changes nothing. Model: stories260K; prompts are the
// llama.cpp reference prompts extended by their greedy continuations.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cpu_executor_testing.h"

namespace cellm {
namespace {

constexpr float kTolerance = 1e-5f;

using Tokens = std::vector<int32_t>;

class CpuBatchingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    program_ = &testing::stories260k();
    vocab_ = program_->config().vocab_size;
    const std::string path = testing::test_model_path("reference/stories260K-greedy.json");
    std::ifstream in(path);
    ASSERT_TRUE(in) << "cannot open " << path;
    reference_ = nlohmann::json::parse(in);
  }

  // Reference case `index`'s prompt followed by its first `extra` greedy tokens.
  Tokens sequence(size_t index, size_t extra) const {
    const auto& c = reference_.at("cases").at(index);
    Tokens tokens = c.at("prompt_tokens").get<Tokens>();
    const Tokens generated = c.at("generated_tokens").get<Tokens>();
    tokens.insert(tokens.end(), generated.begin(),
                  generated.begin() + static_cast<ptrdiff_t>(extra));
    return tokens;
  }

  // The model's default program with another slicing plan (and optionally a smaller pool).
  ProgramSpec plan(int32_t max_step_tokens, int32_t min_prefill_chunk, Tokens decode_widths,
                   int32_t max_cells = ProgramSpec::kDefaultMaxCells) const {
    ProgramSpec spec = testing::with_plan(program_->spec(), max_step_tokens, min_prefill_chunk,
                                          std::move(decode_widths));
    spec.kv_max_cells = max_cells;
    return spec;
  }

  // Runs tokens [0, n) of `tokens` on `session` from `start_pos` in one batch of one-token
  // inputs, each keeping its row: the logits at every position, [n, vocab].
  std::vector<float> logits_at_every_position(Executor& executor, SessionId session,
                                              int32_t start_pos, const Tokens& tokens) const {
    BatchInput batch;
    for (int32_t i = 0; i < static_cast<int32_t>(tokens.size()); ++i) {
      batch.inputs.push_back(testing::step_input(session, start_pos, tokens, i, i + 1, true));
    }
    const BatchOutput output = testing::execute_ok(executor, batch);
    EXPECT_EQ(output.outputs.size(), tokens.size());
    return {output.logits.begin(), output.logits.end()};  // the view lasts until the next step
  }

  // Every row of a and b within kTolerance.
  void expect_rows_near(const std::vector<float>& a, const std::vector<float>& b,
                        const std::string& what) const {
    testing::expect_rows_near(a, b, vocab_, kTolerance, what);
  }

  std::span<const float> row(const BatchOutput& output, size_t index) const {
    return output.logits.subspan(index * static_cast<size_t>(vocab_), static_cast<size_t>(vocab_));
  }

  const Program* program_ = nullptr;
  int32_t vocab_ = 0;
  nlohmann::json reference_;
};

TEST_F(CpuBatchingTest, TwoPromptsInterleavedInOneStepMatchTheirSoloRuns) {
  const Tokens prompt_a = sequence(3, 14);  // 25 tokens
  const Tokens prompt_b = sequence(5, 4);   // 13 tokens
  constexpr int32_t kNumSteps = 24;
  for (const ProgramSpec& spec : {program_->spec(), plan(8, 2, {1}), plan(8, 5, {1, 2, 4, 8}),
                                  plan(512, 257, recommended_decode_widths(512))}) {
    SCOPED_TRACE("W=" + std::to_string(spec.max_step_tokens) +
                 " m=" + std::to_string(spec.min_prefill_chunk));
    auto solo = testing::make_executor(*program_, spec);
    const testing::GreedyRun solo_a = testing::run_greedy(*solo, prompt_a, kNumSteps);
    const testing::GreedyRun solo_b = testing::run_greedy(*solo, prompt_b, kNumSteps);

    auto packed = testing::make_executor(*program_, spec);
    const SessionId a = *packed->open_session();
    const SessionId b = *packed->open_session();
    // Prefill: a's and b's tokens alternate on the packed axis while both last.
    BatchInput batch;
    const int32_t len_a = static_cast<int32_t>(prompt_a.size());
    const int32_t len_b = static_cast<int32_t>(prompt_b.size());
    for (int32_t i = 0; i < std::max(len_a, len_b); ++i) {
      if (i < len_a)
        batch.inputs.push_back(testing::step_input(a, 0, prompt_a, i, i + 1, i == len_a - 1));
      if (i < len_b)
        batch.inputs.push_back(testing::step_input(b, 0, prompt_b, i, i + 1, i == len_b - 1));
    }
    testing::GreedyRun run_a;
    testing::GreedyRun run_b;
    Tokens next_a;
    Tokens next_b;
    int32_t pos_a = 0;
    int32_t pos_b = 0;
    for (int32_t step = 0; step < kNumSteps; ++step) {
      const BatchOutput output = testing::execute_ok(*packed, batch);
      ASSERT_EQ(output.outputs.size(), 2u) << "step " << step;
      for (const OutputRow& out : output.outputs) {
        EXPECT_EQ(out.token, kNoToken);
        testing::GreedyRun& run = out.session == a ? run_a : run_b;
        const std::span<const float> logits = row(output, static_cast<size_t>(out.row));
        run.logits.insert(run.logits.end(), logits.begin(), logits.end());
        run.tokens.push_back(testing::argmax(logits));
      }
      pos_a += step == 0 ? len_a : 1;
      pos_b += step == 0 ? len_b : 1;
      next_a = {run_a.tokens.back()};
      next_b = {run_b.tokens.back()};
      batch.inputs = {testing::step_input(b, pos_b, next_b, 0, 1, true),
                      testing::step_input(a, pos_a, next_a, 0, 1, true)};
    }
    EXPECT_EQ(run_a.tokens, solo_a.tokens);
    EXPECT_EQ(run_b.tokens, solo_b.tokens);
    expect_rows_near(run_a.logits, solo_a.logits, "prompt a packed vs alone");
    expect_rows_near(run_b.logits, solo_b.logits, "prompt b packed vs alone");
  }
}

TEST_F(CpuBatchingTest, RewoundSessionReproducesAFreshSessionsLogits) {
  const Tokens tokens = sequence(0, 30);  // 35 tokens
  auto fresh = testing::make_executor(*program_);
  const std::vector<float> expected =
      logits_at_every_position(*fresh, *fresh->open_session(), 0, tokens);

  auto executor = testing::make_executor(*program_);
  const SessionId session = *executor->open_session();
  const SessionId other = *executor->open_session();
  const Tokens other_tokens = sequence(2, 6);
  // History: the session's first 20 tokens, another session's, then a wrong continuation, so the
  // re-fed positions land in freed and fresh cells out of order.
  const Tokens head(tokens.begin(), tokens.begin() + 20);
  logits_at_every_position(*executor, session, 0, head);
  logits_at_every_position(*executor, other, 0, other_tokens);
  const Tokens wrong(12, 7);
  logits_at_every_position(*executor, session, 20, wrong);
  ASSERT_EQ(*executor->session_length(session), 32);

  // Rewind through the batch: an input starting at position 10, below the length 32.
  constexpr int32_t kRewindTo = 10;
  const Tokens tail(tokens.begin() + kRewindTo, tokens.end());
  const std::vector<float> rewound = logits_at_every_position(*executor, session, kRewindTo, tail);
  EXPECT_EQ(*executor->session_length(session), static_cast<int32_t>(tokens.size()));
  expect_rows_near(rewound,
                   std::vector<float>(expected.begin() + kRewindTo * vocab_, expected.end()),
                   "rewound by a batch input");

  // And through rewind_session.
  ASSERT_TRUE(executor->rewind_session(session, 5).ok());
  EXPECT_EQ(*executor->session_length(session), 5);
  const Tokens tail5(tokens.begin() + 5, tokens.end());
  expect_rows_near(logits_at_every_position(*executor, session, 5, tail5),
                   std::vector<float>(expected.begin() + 5 * vocab_, expected.end()),
                   "rewound by rewind_session");
}

TEST_F(CpuBatchingTest, SlicingPlansAndChunkingGiveTheSameLogits) {
  const Tokens tokens = sequence(1, 38);  // 43 tokens: 5 full slices of 8 and 3 left over
  auto reference_executor = testing::make_executor(*program_, plan(512, 5, {1}));
  const std::vector<float> expected =
      logits_at_every_position(*reference_executor, *reference_executor->open_session(), 0, tokens);

  for (const ProgramSpec& spec :
       {plan(8, 2, {1}), plan(8, 5, {1, 2, 4, 8}), plan(8, 8, {1, 2, 4, 8}), plan(4, 1, {1}),
        plan(512, 257, recommended_decode_widths(512))}) {
    const std::string what = "W=" + std::to_string(spec.max_step_tokens) +
                             " m=" + std::to_string(spec.min_prefill_chunk) + " widths " +
                             std::to_string(spec.decode_widths.size());
    auto executor = testing::make_executor(*program_, spec);
    expect_rows_near(logits_at_every_position(*executor, *executor->open_session(), 0, tokens),
                     expected, what + ", one step");

    // The same prompt over several steps of uneven chunks.
    const SessionId session = *executor->open_session();
    std::vector<float> chunked;
    int32_t begin = 0;
    for (const int32_t size : {3, 1, 7, 12, 20}) {
      const Tokens chunk(tokens.begin() + begin, tokens.begin() + begin + size);
      const std::vector<float> logits = logits_at_every_position(*executor, session, begin, chunk);
      chunked.insert(chunked.end(), logits.begin(), logits.end());
      begin += size;
    }
    ASSERT_EQ(begin, static_cast<int32_t>(tokens.size()));
    expect_rows_near(chunked, expected, what + ", chunked");
  }
}

TEST_F(CpuBatchingTest, ClonedSessionContinuesLikeASoloSession) {
  const Tokens prompt = sequence(4, 10);  // 11 tokens
  constexpr int32_t kNumSteps = 12;
  auto solo = testing::make_executor(*program_);
  const testing::GreedyRun expected = testing::run_greedy(*solo, prompt, kNumSteps);

  auto executor = testing::make_executor(*program_);
  SessionId source = 0;
  testing::run_greedy(*executor, prompt, 4, &source);  // the source moves past the prompt
  const int32_t upto = static_cast<int32_t>(prompt.size()) - 1;
  const StatusOr<SessionId> clone = executor->clone_session(source, upto);
  ASSERT_TRUE(clone.ok()) << clone.status().to_string();
  // The clone holds the prompt but its last token, which it feeds to get the first row.
  Tokens pending = {prompt.back()};
  int32_t pos = upto;
  testing::GreedyRun run;
  for (int32_t step = 0; step < kNumSteps; ++step) {
    BatchInput batch;
    batch.inputs.push_back(testing::step_input(*clone, pos, pending, 0, 1, true));
    const BatchOutput output = testing::execute_ok(*executor, batch);
    ASSERT_EQ(output.outputs.size(), 1u);
    run.logits.insert(run.logits.end(), output.logits.begin(), output.logits.end());
    run.tokens.push_back(testing::argmax(row(output, 0)));
    pending = {run.tokens.back()};
    ++pos;
  }
  EXPECT_EQ(run.tokens, expected.tokens);
  expect_rows_near(run.logits, expected.logits, "clone vs solo");
}

TEST_F(CpuBatchingTest, RefusedBatchesChangeNothing) {
  const Tokens tokens = sequence(0, 20);  // 25 tokens
  const Tokens head(tokens.begin(), tokens.begin() + 15);
  const Tokens rest(tokens.begin() + 15, tokens.end());
  // A pool of 40 cells and sessions of at most 30 positions.
  CpuExecutorOptions options;
  options.max_session_tokens = 30;
  const ProgramSpec spec = plan(8, 2, {1, 2, 4}, 40);
  auto control = testing::make_executor(*program_, spec, options);
  const SessionId control_session = *control->open_session();
  logits_at_every_position(*control, control_session, 0, head);
  const std::vector<float> expected = logits_at_every_position(*control, control_session, 15, rest);

  auto executor = testing::make_executor(*program_, spec, options);
  const SessionId a = *executor->open_session();
  const SessionId b = *executor->open_session();
  logits_at_every_position(*executor, a, 0, head);
  logits_at_every_position(*executor, b, 0, Tokens(head.begin(), head.begin() + 9));
  const CacheUsage usage = executor->cache_usage();
  ASSERT_EQ(usage.num_free, 40 - 15 - 9);

  const Tokens long_tokens(20, 5);
  const Tokens bad_token = {vocab_};
  const Tokens one = {rest[0]};
  const Tokens three = {rest[0], rest[1], rest[2]};
  struct Refusal {
    std::string what;
    BatchInput batch;
    StatusCode code;
  };
  const std::vector<Refusal> refusals = {
      {"unknown session",
       {{testing::step_input(a, 15, one, 0, 1, true),
         testing::step_input(SessionId{999}, 0, one, 0, 1, true)}},
       StatusCode::kNotFound},
      {"token outside the vocabulary",
       {{testing::step_input(a, 15, one, 0, 1, true),
         testing::step_input(b, 9, bad_token, 0, 1, true)}},
       StatusCode::kInvalidArgument},
      {"a gap", {{testing::step_input(a, 16, one, 0, 1, true)}}, StatusCode::kInvalidArgument},
      {"past max_session_tokens, after a rewind",
       {{testing::step_input(a, 11, long_tokens, 0, 20, true)}},
       StatusCode::kOutOfRange},
      // 16 free cells < 3 + 20 tokens (the 5 cells a's rewind drops stay held for a rollback).
      {"more tokens than free cells, after a rewind",
       {{testing::step_input(b, 9, three, 0, 3, true),
         testing::step_input(a, 10, long_tokens, 0, 20, true)}},
       StatusCode::kResourceExhausted},
  };
  for (const Refusal& refusal : refusals) {
    const StatusOr<BatchOutput> output = executor->execute(refusal.batch, true);
    ASSERT_FALSE(output.ok()) << refusal.what;
    EXPECT_EQ(output.status().code(), refusal.code)
        << refusal.what << ": " << output.status().to_string();
    EXPECT_EQ(*executor->session_length(a), 15) << refusal.what;
    EXPECT_EQ(*executor->session_length(b), 9) << refusal.what;
    const CacheUsage after = executor->cache_usage();
    EXPECT_EQ(after.num_free, usage.num_free) << refusal.what;
    EXPECT_EQ(after.high_water, usage.high_water) << refusal.what;
  }
  // The session continues exactly as one that never saw the refused batches.
  expect_rows_near(logits_at_every_position(*executor, a, 15, rest), expected,
                   "after refused batches");
}

TEST_F(CpuBatchingTest, HalfPrecisionCachesStayCloseToF32) {
  const Tokens tokens = sequence(0, 40);
  auto f32 = testing::make_executor(*program_);
  const std::vector<float> expected =
      logits_at_every_position(*f32, *f32->open_session(), 0, tokens);
  std::vector<float> diffs;  // f16, bf16
  for (const KvDtype dtype : {KvDtype::kF16, KvDtype::kBF16}) {
    ProgramSpec spec = program_->spec();
    spec.kv_dtype = dtype;
    auto executor = testing::make_executor(*program_, spec);
    const std::vector<float> logits =
        logits_at_every_position(*executor, *executor->open_session(), 0, tokens);
    const float diff = testing::max_abs_diff(logits, expected);
    std::printf("%s cache: max abs logits diff vs f32 %.3g\n",
                std::string(kv_dtype_name(dtype)).c_str(), static_cast<double>(diff));
    // Measured: 0.013 (f16) and 0.12 (bf16), about 8x apart like their mantissas (11 and 8
    // bits); the bounds leave 2.5x room, far below what a wrong cell or layout would give.
    EXPECT_GT(diff, 0.0f) << "the cache dtype is not used";
    EXPECT_LE(diff, dtype == KvDtype::kF16 ? 3e-2f : 3e-1f) << kv_dtype_name(dtype);
    diffs.push_back(diff);
  }
  ASSERT_EQ(diffs.size(), 2u);
  EXPECT_LT(diffs[0], diffs[1]) << "bf16 rounds more coarsely than f16";
}

}  // namespace
}  // namespace cellm
