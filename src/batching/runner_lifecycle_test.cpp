// Runner lifecycles on the FakeExecutor: cancel during prefill, during decode and from a
// callback; a session destroyed mid-batch; shutdown with live generations and queued clones;
// callback exceptions; executor failures.
#include <gtest/gtest.h>

#include <stdexcept>
#include <thread>

#include "batching/runner.h"
#include "batching/runner_test_util.h"

namespace cellm::testing {
namespace {

FakeExecutorConfig narrow() {
  FakeExecutorConfig config;
  config.max_step_tokens = 8;
  config.min_prefill_chunk = 2;
  return config;
}

TEST(RunnerLifecycleTest, CancelDuringPrefillKeepsTheWholePromptInTheContext) {
  Rig rig(narrow());
  StepGate gate(3);  // the third step of an 8-token budget: mid-prompt
  rig.executor.set_during_execute(gate.hook());
  Session session = rig.runner.open_session();
  const Tokens earlier = ramp(5);
  session.generate_async(earlier, greedy(0)).wait();
  const Tokens prompt = ramp(200, 3);
  Recorder recorder;
  GenerationHandle handle = session.generate_async(prompt, greedy(10), recorder.callback());
  gate.wait_reached();
  handle.cancel();
  gate.open();
  handle.wait();
  EXPECT_EQ(handle.finish_reason(), FinishReason::kCancelled);
  EXPECT_TRUE(recorder.tokens.empty());
  recorder.expect_finished_once();
  EXPECT_EQ(session.position(), 205) << "earlier context + the whole prompt, nothing delivered";
  // The rest of the prompt is still pending: the next generation runs it first.
  GenerationHandle next = session.generate_async({}, greedy(6));
  next.wait();
  EXPECT_EQ(next.tokens(), fake_greedy(concat(earlier, prompt), 6, kVocab));
  EXPECT_EQ(session.position(), 211);
}

TEST(RunnerLifecycleTest, CancelDuringDecodeKeepsExactlyTheDeliveredTokens) {
  Rig rig(narrow());
  StepGate gate(6);
  rig.executor.set_during_execute(gate.hook());
  Session session = rig.runner.open_session();
  const Tokens prompt = ramp(5);
  Recorder recorder;
  GenerationHandle handle = session.generate_async(prompt, greedy(100), recorder.callback());
  gate.wait_reached();
  handle.cancel();
  gate.open();
  handle.wait();
  EXPECT_EQ(handle.finish_reason(), FinishReason::kCancelled);
  recorder.expect_finished_once();
  const Tokens delivered = recorder.tokens;
  ASSERT_GE(delivered.size(), 4u);
  EXPECT_LT(delivered.size(), 100u);
  const Tokens expected = fake_greedy(prompt, 100, kVocab);
  EXPECT_EQ(delivered, Tokens(expected.begin(), expected.begin() + delivered.size()));
  EXPECT_EQ(session.position(), static_cast<int32_t>(5 + delivered.size()));
  GenerationHandle next = session.generate_async({}, greedy(5));
  next.wait();
  EXPECT_EQ(next.tokens(), fake_greedy(concat(prompt, delivered), 5, kVocab))
      << "the last delivered token is fed back; the undelivered one is gone";
}

TEST(RunnerLifecycleTest, CancelFromInsideACallbackStopsAfterThatToken) {
  Rig rig;
  Session session = rig.runner.open_session();
  Recorder recorder;
  GenerationHandle handle;
  std::mutex handle_mutex;
  std::unique_lock<std::mutex> hold(handle_mutex);  // the callback waits for `handle`
  handle = session.generate_async(ramp(4), greedy(50), [&](const GenerationUpdate& update) {
    recorder.record(update);
    if (recorder.tokens.size() == 3 && !update.finished) {
      std::lock_guard<std::mutex> lock(handle_mutex);
      handle.cancel();
    }
  });
  hold.unlock();
  handle.wait();
  EXPECT_EQ(handle.finish_reason(), FinishReason::kCancelled);
  EXPECT_EQ(recorder.tokens, fake_greedy(ramp(4), 3, kVocab));
  EXPECT_EQ(recorder.tokens_in_final, 0u);
  recorder.expect_finished_once();
  EXPECT_EQ(session.position(), 7);
}

TEST(RunnerLifecycleTest, ASessionDestroyedMidBatchEndsItsGenerationAndClosesOnce) {
  Rig rig(narrow());
  StepGate gate(3);
  rig.executor.set_during_execute(gate.hook());
  auto session = std::make_unique<Session>(rig.runner.open_session());
  Recorder recorder;
  GenerationHandle handle = session->generate_async(ramp(30), greedy(20), recorder.callback());
  gate.wait_reached();
  session.reset();  // closes asynchronously while the step runs
  gate.open();
  handle.wait();
  EXPECT_EQ(handle.finish_reason(), FinishReason::kCancelled);
  EXPECT_NE(handle.error_message().find("closed"), std::string::npos);
  recorder.expect_finished_once();
  // The engine goes on serving.
  Session other = rig.runner.open_session();
  GenerationHandle next = other.generate_async(ramp(3), greedy(4));
  next.wait();
  EXPECT_EQ(next.tokens(), fake_greedy(ramp(3), 4, kVocab));
  rig.runner.shutdown();  // the closed session may be retained for its prefix until here
  const testing::FakeExecutor::Counts counts = rig.executor.counts();
  EXPECT_EQ(counts.closes.at(counts.opened.front()), 1);
}

TEST(RunnerLifecycleTest, ShutdownCancelsLiveGenerationsAndClosesEverySessionOnce) {
  testing::FakeExecutor executor({});
  StepGate gate(5);  // holds the engine mid-generation until the shutdown has begun
  executor.set_during_execute(gate.hook());
  std::vector<Recorder> recorders(4);
  std::vector<GenerationHandle> handles;
  std::vector<Session> sessions;
  {
    Runner runner(executor, DecodeFirstScheduler(SchedulerConfig::defaults_for(64)));
    for (int i = 0; i < 4; ++i) {
      sessions.push_back(runner.open_session());
      handles.push_back(
          sessions[i].generate_async(ramp(10, i), greedy(900), recorders[i].callback()));
    }
    gate.wait_reached();
    std::thread stopper([&] { runner.shutdown(); });
    testing::wait_until_stopping(runner);
    gate.open();
    stopper.join();
    for (int i = 0; i < 4; ++i) {
      ASSERT_TRUE(handles[i].done()) << "shutdown returns after every generation ended";
      EXPECT_EQ(handles[i].finish_reason(), FinishReason::kCancelled);
      recorders[i].expect_finished_once();
      EXPECT_EQ(sessions[i].status().code(), StatusCode::kFailedPrecondition);
    }
    expect_every_session_closed_once(executor);
    // After shutdown, new work is refused cleanly.
    Recorder late;
    GenerationHandle refused = sessions[0].generate_async({1}, greedy(2), late.callback());
    ASSERT_TRUE(refused.done());
    EXPECT_EQ(refused.finish_reason(), FinishReason::kCancelled);
    late.expect_finished_once();
    EXPECT_FALSE(runner.open_session().status().ok());
  }
  sessions.clear();  // Sessions outliving their Runner close quietly
  expect_every_session_closed_once(executor);
}

TEST(RunnerLifecycleTest, ShutdownWithQueuedClonesClosesEachSessionOnce) {
  testing::FakeExecutor executor(narrow());
  StepGate gate(2);
  executor.set_during_execute(gate.hook());
  std::vector<GenerationHandle> handles;
  std::vector<Recorder> recorders(3);
  {
    Runner runner(executor, DecodeFirstScheduler(SchedulerConfig::defaults_for(8)));
    Session source = runner.open_session();
    handles.push_back(source.generate_async(ramp(40), greedy(50), recorders[0].callback()));
    gate.wait_reached();
    // Queued while the engine is inside a step.
    Session clone_a = source.clone_async(3);
    Session clone_b = source.clone_async(0);
    Session clone_c = clone_a.clone_async(2);
    handles.push_back(clone_a.generate_async({1, 2}, greedy(5), recorders[1].callback()));
    handles.push_back(clone_c.generate_async({3}, greedy(5), recorders[2].callback()));
    std::thread stopper([&] { runner.shutdown(); });
    testing::wait_until_stopping(runner);
    gate.open();
    stopper.join();
    for (size_t i = 0; i < handles.size(); ++i) {
      ASSERT_TRUE(handles[i].done());
      recorders[i].expect_finished_once();
    }
    EXPECT_EQ(handles[0].finish_reason(), FinishReason::kCancelled);
  }
  expect_every_session_closed_once(executor);
}

TEST(RunnerLifecycleTest, CallbackExceptionsFailOnlyTheirGeneration) {
  Rig rig;
  Session a = rig.runner.open_session();
  Session b = rig.runner.open_session();
  Session c = rig.runner.open_session();
  Recorder ra, rb, rc;
  GenerationHandle ha = a.generate_async(ramp(6), greedy(20), [&](const GenerationUpdate& u) {
    ra.record(u);
    if (ra.tokens.size() == 2 && !u.finished) throw std::runtime_error("boom");
  });
  GenerationHandle hc = c.generate_async(ramp(6, 1), greedy(20), [&](const GenerationUpdate& u) {
    rc.record(u);
    if (rc.tokens.size() == 4 && !u.finished) throw 42;  // not a std::exception
  });
  GenerationHandle hb = b.generate_async(ramp(9, 2), greedy(20), rb.callback());
  ha.wait();
  hb.wait();
  hc.wait();
  EXPECT_EQ(ha.finish_reason(), FinishReason::kFailed);
  EXPECT_NE(ha.error_message().find("boom"), std::string::npos) << ha.error_message();
  EXPECT_EQ(ra.tokens, fake_greedy(ramp(6), 2, kVocab)) << "the token it threw on was delivered";
  ra.expect_finished_once();
  EXPECT_EQ(hc.finish_reason(), FinishReason::kFailed);
  EXPECT_EQ(rc.tokens.size(), 4u);
  EXPECT_EQ(hb.finish_reason(), FinishReason::kNewTokenLimit);
  EXPECT_EQ(rb.tokens, fake_greedy(ramp(9, 2), 20, kVocab));
  // The session is not poisoned: it continues from the delivered tokens.
  GenerationHandle again = a.generate_async({}, greedy(3));
  again.wait();
  EXPECT_EQ(again.tokens(), fake_greedy(concat(ramp(6), ra.tokens), 3, kVocab));
}

TEST(RunnerLifecycleTest, AnExecutorFailureFailsItsStepAndPoisonsThoseSessionsOnly) {
  Rig rig;
  std::atomic<bool> fail{true};
  rig.executor.set_fail_hook([&](const BatchInput& batch) -> Status {
    for (const StepInput& input : batch.inputs) {
      if (input.session == 1 && fail.load()) return internal_error("device lost");
    }
    return ok_status();
  });
  Session bad = rig.runner.open_session();  // executor id 1
  Recorder recorder;
  GenerationHandle failed = bad.generate_async(ramp(7), greedy(5), recorder.callback());
  failed.wait();
  EXPECT_EQ(failed.finish_reason(), FinishReason::kFailed);
  EXPECT_NE(failed.error_message().find("device lost"), std::string::npos);
  recorder.expect_finished_once();
  EXPECT_FALSE(bad.status().ok());
  EXPECT_EQ(rig.runner.metrics().num_failed_steps, 1);
  fail = false;
  GenerationHandle refused = bad.generate_async({1}, greedy(2));
  refused.wait();
  EXPECT_EQ(refused.finish_reason(), FinishReason::kFailed) << "a poisoned session stays unusable";
  EXPECT_NE(refused.error_message().find("unusable"), std::string::npos);
  Session good = rig.runner.open_session();
  GenerationHandle fine = good.generate_async(ramp(7), greedy(5));
  fine.wait();
  EXPECT_EQ(fine.tokens(), fake_greedy(ramp(7), 5, kVocab));
}

}  // namespace
}  // namespace cellm::testing
