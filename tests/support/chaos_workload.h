// A randomized serving workload for the end-to-end chaos suites (tests/runtime_chaos_test.cpp on
// the CpuExecutor, backends/cuda/cuda_chaos_test.cpp on the CudaExecutor), and its oracle.
//
// Sixteen conversations of several turns run at once through one Runner, each on a thread of its
// own, in a cell pool too small for all of them, with prefix reuse on and text streams made by the
// model's tokenizer. Turns are greedy or sampled (seeded, some with penalties, stop tokens or stop
// strings); some are cancelled part-way (before their first token, too); conversations fork by
// cloning their session at a random position, or start again from a first part of what they
// said. The oracle: each turn delivers exactly the tokens and text a solo session computing its
// whole context delivers (a cancelled turn: those of a solo run whose token limit is where the
// cancel landed), each session's position is its context's length, and nothing is lost or
// counted twice. The workload and the slicing plan are functions of the seed; the interleaving is
// not, and the oracle does not depend on it. Written for stories260K (ids 3..511 are ordinary
// tokens, 1 is BOS). Header-only (each suite is its own binary). Thread-safety: run_workload
// starts and joins its threads; the rest is test-thread code.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "batching/runner.h"
#include "program/program_spec.h"
#include "tokenizer/streaming_detokenizer.h"
#include "tokenizer/tokenizer.h"

namespace cellm::testing::chaos {

using Tokens = std::vector<int32_t>;

inline Tokens concat(Tokens a, const Tokens& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

constexpr int32_t kMaxContext = 400;  // positions a conversation may reach (the pool holds one)
constexpr int32_t kNumConversations = 16;

// A turn as the workload draws it: what to send, how to sample, when to cancel.
struct Turn {
  Tokens prompt;
  GenConfig config;
  int32_t cancel_after_tokens = -1;  // cancel once this many are delivered; 0: at once; -1: never
  bool cancel_by_close = false;      // cancel by closing the session (the conversation restarts)
};

// What happened to one turn, and the context it ran after.
struct TurnRecord {
  Tokens context_before;  // the session's whole context when the turn was sent
  Turn turn;
  Tokens tokens;
  std::string text;
  FinishReason reason = FinishReason::kFailed;
  std::string error;
  int32_t position_after = -1;
};

inline int32_t uniform(std::mt19937& rng, int32_t lo, int32_t hi) {
  return std::uniform_int_distribution<int32_t>(lo, hi)(rng);
}

inline bool chance(std::mt19937& rng, double p) { return std::bernoulli_distribution(p)(rng); }

inline Tokens random_tokens(int32_t n, std::mt19937& rng) {
  Tokens out;
  for (int32_t i = 0; i < n; ++i) out.push_back(uniform(rng, 3, 511));
  return out;
}

inline GenConfig random_config(std::mt19937& rng) {
  GenConfig config;
  config.max_new_tokens = chance(rng, 0.05) ? 0 : uniform(rng, 1, 40);
  if (chance(rng, 0.5)) {
    config.sampling.temperature = std::uniform_real_distribution<float>(0.6f, 1.3f)(rng);
    config.sampling.top_k = chance(rng, 0.5) ? uniform(rng, 1, 40) : 0;
    config.sampling.top_p = chance(rng, 0.5) ? 0.9f : 1.0f;
    config.seed = static_cast<uint64_t>(rng());
  }
  if (chance(rng, 0.2)) {
    config.sampling.repetition_penalty = 1.3f;
    config.sampling.frequency_penalty = 0.2f;
    config.sampling.penalty_window = chance(rng, 0.5) ? 16 : -1;
  }
  if (chance(rng, 0.2)) config.stop_tokens = {uniform(rng, 260, 420)};
  if (chance(rng, 0.2)) {  // text stories260K writes often: a stop string that matches at times
    const char* const kStops[] = {".", " the", "and", "He", "ed ", "!"};
    config.stop_strings = {kStops[uniform(rng, 0, 5)]};
  }
  return config;
}

// The text of a generation, by the model's own tokenizer (as the app makes it).
class DetokenizerStream : public TextStream {
 public:
  explicit DetokenizerStream(const Tokenizer& tokenizer)
      : detokenizer_(tokenizer,
                     DecodeOptions{.render_special = false, .strip_leading_space = false}) {}
  std::string append(int32_t token) override {
    StatusOr<std::string> text = detokenizer_.push(token);
    return text.ok() ? std::move(text).value() : std::string();
  }
  std::string finish() override { return detokenizer_.finish(); }

 private:
  StreamingDetokenizer detokenizer_;
};

// `tokenizer` outlives the runner.
inline RunnerOptions runner_options(const Tokenizer& tokenizer, int32_t sampling_threads) {
  RunnerOptions options;
  options.text_streams = [&tokenizer](std::span<const int32_t>) -> std::unique_ptr<TextStream> {
    return std::make_unique<DetokenizerStream>(tokenizer);
  };
  options.sampling_threads = sampling_threads;
  return options;
}

// The solo oracle: a runner of its own (no prefix to reuse; it closes its session when it ends)
// on `executor` (W 16 or so, a pool for one long context) runs `prompt` as one request.
struct SoloResult {
  Tokens tokens;
  std::string text;
  FinishReason reason = FinishReason::kFailed;
};

inline SoloResult solo_run(Executor& executor, const Tokenizer& tokenizer, const Tokens& prompt,
                           const GenConfig& config) {
  RunnerOptions options = runner_options(tokenizer, 1);
  options.prefix_reuse.enabled = false;
  Runner runner(
      executor,
      DecodeFirstScheduler(SchedulerConfig::defaults_for(executor.limits().max_step_tokens)),
      options);
  Session session = runner.open_session();
  GenerationHandle handle = session.generate_async(prompt, config);
  handle.wait();
  EXPECT_EQ(handle.error_message(), "");
  return {handle.tokens(), handle.text(), handle.finish_reason()};
}

// Sends `turn` on `session` (context `context`), cancelling it as the turn says — by the handle
// from the engine thread's callback, or by closing the session from this thread — and records
// it.
inline TurnRecord run_turn(Session& session, const Tokens& context, const Turn& turn) {
  TurnRecord record;
  record.context_before = context;
  record.turn = turn;
  std::mutex handle_mutex;
  GenerationHandle handle;
  int32_t num_delivered = 0;  // engine thread only
  std::atomic<bool> reached{turn.cancel_after_tokens == 0};
  {
    std::unique_lock<std::mutex> hold(handle_mutex);  // the callback waits for `handle`
    handle = session.generate_async(turn.prompt, turn.config, [&](const GenerationUpdate& update) {
      num_delivered += static_cast<int32_t>(update.tokens.size());
      if (update.finished || turn.cancel_after_tokens <= 0 ||
          num_delivered < turn.cancel_after_tokens) {
        return;
      }
      if (turn.cancel_by_close) {
        reached = true;
      } else {
        std::lock_guard<std::mutex> lock(handle_mutex);
        handle.cancel();
      }
    });
  }
  if (turn.cancel_by_close && turn.cancel_after_tokens >= 0) {
    while (!handle.wait_for(std::chrono::milliseconds(1))) {
      if (reached) {
        session.close();
        break;
      }
    }
  } else if (turn.cancel_after_tokens == 0) {
    handle.cancel();
  }
  handle.wait();
  record.tokens = handle.tokens();
  record.text = handle.text();
  record.reason = handle.finish_reason();
  record.error = handle.error_message();
  record.position_after = session.valid() ? session.position() : -1;
  return record;
}

// One conversation: turns on a session, forks (clones) and restarts, all drawn from `seed`.
inline std::vector<TurnRecord> run_conversation(Runner& runner, const std::vector<Tokens>& prefixes,
                                                uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<TurnRecord> records;
  Session session = runner.open_session();
  Tokens context;
  Tokens restart;  // what a restarted conversation's next prompt begins with
  const int32_t num_turns = uniform(rng, 2, 6);
  for (int32_t t = 0; t < num_turns; ++t) {
    Turn turn;
    turn.config = random_config(rng);
    if (context.size() + 30 + turn.config.max_new_tokens > kMaxContext) {
      // Too long to go on: start again from the first part of what was said (prefix reuse from
      // the retained session's cells).
      restart.assign(context.begin(), context.begin() + uniform(rng, 1, 60));
      session = runner.open_session();  // closes the old one
      context.clear();
    }
    if (!restart.empty()) {
      turn.prompt = concat(restart, random_tokens(uniform(rng, 0, 20), rng));
      restart.clear();
    } else if (context.empty()) {  // a shared system prompt, or a prompt of its own
      turn.prompt = chance(rng, 0.6) ? prefixes[uniform(rng, 0, prefixes.size() - 1)] : Tokens{1};
      turn.prompt = concat(turn.prompt, random_tokens(uniform(rng, 0, 40), rng));
    } else {
      turn.prompt = random_tokens(uniform(rng, 0, 30), rng);
    }
    if (chance(rng, 0.25)) {
      turn.cancel_after_tokens = uniform(rng, 0, turn.config.max_new_tokens);
      turn.cancel_by_close = chance(rng, 0.3);
    }
    TurnRecord record = run_turn(session, context, turn);
    context = concat(concat(context, turn.prompt), record.tokens);
    records.push_back(std::move(record));
    if (!session.valid()) {  // closed to cancel: start again from a first part
      restart.assign(context.begin(),
                     context.begin() + uniform(rng, 1, std::min<int32_t>(context.size(), 300)));
      session = runner.open_session();
      context.clear();
      continue;
    }
    if (!session.status().ok()) break;  // failed, or the runner shut down: the oracle says which
    if (chance(rng, 0.15)) {            // fork: go on from a clone of a first part
      const int32_t upto = uniform(rng, 1, static_cast<int32_t>(context.size()));
      Session clone = session.clone_async(upto);
      if (chance(rng, 0.5)) session.close();  // the clone outlives its source
      session = std::move(clone);
      context.resize(upto);
    } else if (chance(rng, 0.1)) {  // restart from a first part of this conversation
      restart.assign(context.begin(),
                     context.begin() + uniform(rng, 1, std::min<int32_t>(context.size(), 300)));
      session = runner.open_session();
      context.clear();
    }
  }
  return records;
}

// The executor's slicing plan and pool, drawn from the seed: W, m, decode widths, cells (at most
// about two conversations' worth), sampling threads.
struct Shape {
  int32_t max_step_tokens = 0;
  int32_t min_prefill_chunk = 0;
  std::vector<int32_t> decode_widths;
  int32_t max_cells = 0;
  // Sessions the executor holds: live ones (at most two a conversation, for a moment) always fit;
  // retained prefixes fill the rest and give way at the limit.
  int32_t max_sessions = 64;
  int32_t sampling_threads = 1;

  std::string describe() const {
    return "W " + std::to_string(max_step_tokens) + ", m " + std::to_string(min_prefill_chunk) +
           ", " + std::to_string(decode_widths.size()) + " decode widths, " +
           std::to_string(max_cells) + " cells, " + std::to_string(max_sessions) + " sessions, " +
           std::to_string(sampling_threads) + " sampling threads";
  }
};

inline Shape random_shape(uint32_t seed) {
  std::mt19937 rng(seed);
  Shape shape;
  shape.max_step_tokens = std::vector<int32_t>{16, 32, 64}[uniform(rng, 0, 2)];
  shape.min_prefill_chunk = std::vector<int32_t>{1, 5, 8}[uniform(rng, 0, 2)];
  shape.decode_widths =
      chance(rng, 0.5) ? std::vector<int32_t>{1} : recommended_decode_widths(shape.max_step_tokens);
  shape.max_cells = uniform(rng, kMaxContext + 50, 2 * kMaxContext);
  shape.max_sessions = chance(rng, 0.5) ? 2 * kNumConversations + 4 : 64;
  shape.sampling_threads = uniform(rng, 1, 3);
  return shape;
}

struct WorkloadResult {
  std::vector<std::vector<TurnRecord>> conversations;  // [conversation][turn]
  EngineMetrics metrics;
};

// Runs the seed's workload on `executor` (initialized with random_shape(seed)'s plan and pool);
// with `shutdown_after_ms` >= 0 the runner is shut down that long after the conversations start,
// whatever they are doing.
inline WorkloadResult run_workload(Executor& executor, const Tokenizer& tokenizer,
                                   const Shape& shape, uint32_t seed,
                                   int32_t shutdown_after_ms = -1) {
  std::mt19937 rng(seed ^ 0x9e3779b9u);
  std::vector<Tokens> prefixes;  // system prompts several conversations begin with
  for (int i = 0; i < 3; ++i) {
    prefixes.push_back(concat({1}, random_tokens(uniform(rng, 20, 80), rng)));
  }
  WorkloadResult result;
  result.conversations.resize(kNumConversations);
  Runner runner(executor,
                DecodeFirstScheduler(SchedulerConfig::defaults_for(shape.max_step_tokens)),
                runner_options(tokenizer, shape.sampling_threads));
  std::vector<std::thread> threads;
  for (int i = 0; i < kNumConversations; ++i) {
    threads.emplace_back(
        [&, i] { result.conversations[i] = run_conversation(runner, prefixes, seed * 1000 + i); });
  }
  if (shutdown_after_ms >= 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(shutdown_after_ms));
    runner.shutdown();
  }
  for (std::thread& thread : threads) thread.join();
  result.metrics = runner.metrics();
  return result;
}

// The oracle, each turn against solo runs on `solo` (test failures name the conversation and
// turn). `shut_down`: the runner was shut down mid-workload, so turns may also end cancelled or
// refused by the shutdown (then their positions are not checked). Prints what the workload
// exercised, for a soak's reader.
inline void expect_solo_results(const WorkloadResult& result, Executor& solo,
                                const Tokenizer& tokenizer, uint32_t seed, bool shut_down = false) {
  int64_t num_delivered = 0;
  for (size_t i = 0; i < result.conversations.size(); ++i) {
    for (size_t t = 0; t < result.conversations[i].size(); ++t) {
      const TurnRecord& r = result.conversations[i][t];
      SCOPED_TRACE("conversation " + std::to_string(i) + ", turn " + std::to_string(t));
      num_delivered += static_cast<int64_t>(r.tokens.size());
      const bool by_shutdown = shut_down && r.error.find("shut down") != std::string::npos;
      if (by_shutdown) {
        EXPECT_TRUE(r.reason == FinishReason::kCancelled || r.reason == FinishReason::kFailed)
            << r.error;
      } else {
        ASSERT_NE(r.reason, FinishReason::kFailed) << r.error;
      }
      const Tokens whole = concat(r.context_before, r.turn.prompt);
      if (r.position_after >= 0 && !by_shutdown) {  // -1: closed to cancel it
        EXPECT_EQ(r.position_after, static_cast<int32_t>(whole.size() + r.tokens.size()))
            << "the context is the earlier context + the prompt + the delivered tokens";
      }
      const SoloResult alone = solo_run(solo, tokenizer, whole, r.turn.config);
      if (r.reason == FinishReason::kCancelled || by_shutdown) {
        ASSERT_LE(r.tokens.size(), alone.tokens.size());
        EXPECT_EQ(r.tokens, Tokens(alone.tokens.begin(), alone.tokens.begin() + r.tokens.size()))
            << "a cancelled turn delivers a prefix of the solo tokens";
        GenConfig cut = r.turn.config;  // a limit where the cancel landed: the same text shown
        cut.max_new_tokens = static_cast<int32_t>(r.tokens.size());
        EXPECT_EQ(r.text, solo_run(solo, tokenizer, whole, cut).text);
      } else {
        EXPECT_EQ(r.tokens, alone.tokens);
        EXPECT_EQ(r.text, alone.text);
        EXPECT_EQ(r.reason, alone.reason);
      }
    }
  }
  const EngineMetrics& m = result.metrics;
  EXPECT_EQ(m.num_generated_tokens, num_delivered) << "nothing lost or duplicated";
  EXPECT_EQ(m.num_refusals, 0);
  std::printf(
      "seed %u: %ld steps, %ld preemptions, %ld idle evictions, %ld prefix hits (%ld waits), "
      "%ld cancelled, %ld stop strings\n",
      seed, static_cast<long>(m.num_steps), static_cast<long>(m.num_preemptions),
      static_cast<long>(m.num_idle_evictions), static_cast<long>(m.num_prefix_hits),
      static_cast<long>(m.num_prefix_waits),
      static_cast<long>(m.finished(FinishReason::kCancelled)),
      static_cast<long>(m.finished(FinishReason::kStopString)));
}

// CELLM_CHAOS_SEEDS, else `fallback`: how many seeds a suite runs (a soak sets it high).
inline int num_seeds(int fallback) {
  const char* env = std::getenv("CELLM_CHAOS_SEEDS");
  return env != nullptr ? std::max(1, std::atoi(env)) : fallback;
}

}  // namespace cellm::testing::chaos
