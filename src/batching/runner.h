// Runner and Session: the engine that serves many sessions' generations at once through one
// Executor, on one engine thread (DESIGN §5–§6).
//
// Callers on any thread open sessions and start generations; each call is a command in one FIFO.
// The engine thread loops: drain the commands (open, close, clone, start), reap cancelled
// generations, let the DecodeFirstScheduler plan one step, run it with Executor::execute, sample
// each output row with its session's Sampler (rows the host reads on a pool of threads,
// RunnerOptions::sampling_threads), then run the callbacks in order, on the engine thread. The host
// keeps every session's tokens, so a session's context is always its earlier context + each prompt
// + exactly the delivered tokens, whatever ends a generation (cancel, stop token, stop string,
// token limit, preemption, failure): prompt tokens not yet run and the last delivered token stay
// pending and are fed with the next generation. An executor failure fails that step's
// generations, with the message, and leaves their sessions unusable; the others go on. Shutdown
// ends live generations as kCancelled and closes every session exactly once. It knows no
// tokenizer (text comes through RunnerOptions::text_streams) and no backend.
// Thread-safety: Runner and Session methods may be called from any thread (a Session from one
// thread at a time), including from callbacks, except Runner::~Runner.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "batching/executor.h"
#include "batching/gen_config.h"
#include "batching/generation.h"
#include "batching/metrics.h"
#include "batching/scheduler.h"
#include "batching/stop_matcher.h"
#include "core/status.h"

namespace cellm {

namespace internal {
class Engine;
struct SessionShared;
}  // namespace internal

// Prefix reuse: a generation whose context begins with positions another session's cells already
// hold — an open session, or a closed one the engine retained — starts from a clone of those cells
// (Executor::clone_session: shared, no bytes copied) and runs only the rest, at the executor's
// session limit too: a session takes its executor session only when it first runs, so a retained
// prefix other than the donor gives way to the clone (a retained donor, where none other is
// left, is taken over). A generation preempted for room starts again the same way
// once the rest of its context fits, so a shared prefix stays shared and only its own part runs
// again. A generation whose
// prefix another running generation is still computing (prompts sharing a system prompt, started
// together) waits until those positions are in its cells, then clones them. The outputs are the
// same as computing the whole context, up to the last bits of positions another step computed.
struct PrefixReuseOptions {
  bool enabled = true;
  // The shortest prefix worth a clone, in positions beyond what the session already holds.
  int32_t min_tokens = 16;
  // Closed sessions kept for their prefixes (at least min_tokens positions each), least recently
  // used dropped first. Their cells are released like an idle session's when the pool runs short,
  // and they are closed when the executor has no room for an open session's first run. Open
  // sessions alone count against the executor's session limit.
  int32_t max_retained = 64;
};

struct RunnerOptions {
  // The model's stop tokens (EOS, end of turn), added to every GenConfig that keeps
  // use_default_stop_tokens. The app takes them from its tokenizer.
  std::vector<int32_t> default_stop_tokens;
  // Makes the text of each generation; without it updates carry no text and stop strings are
  // refused.
  TextStreamFactory text_streams;
  // [vocab] the bytes each token adds to the text ("" for control tokens), as text_streams
  // writes them: what GenConfig::json_object and json_schema check tokens against; without it such
  // generations are refused. The app takes them from its tokenizer.
  std::vector<std::string> token_bytes;
  PrefixReuseOptions prefix_reuse;
  // Threads that pick a step's tokens from the rows the host reads (samplers at a temperature,
  // bias or penalties; log-probabilities no executor summarized), the engine thread included:
  // at 256 sessions and a 128K vocabulary one thread spends 0.3-3 ms a row. 0: one per hardware
  // thread, at most 16; 1: the engine thread alone; at most ThreadPool::kMaxThreads. The tokens
  // do not depend on it.
  int32_t sampling_threads = 0;
};

class Session {
 public:
  Session() = default;  // not valid
  Session(Session&& other) noexcept = default;
  Session& operator=(Session&& other) noexcept;  // closes the session it held
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  ~Session();  // close()

  bool valid() const { return shared_ != nullptr; }
  // The context length as the engine has processed it so far: earlier context + accepted prompts
  // + delivered tokens. Exact once the session's generations are done.
  int32_t position() const;
  // OK, or why the session cannot be used (open refused at capacity, a failed clone, an executor
  // failure, the runner shut down). Set by the engine; exact after a generation on it is done.
  Status status() const;

  // Starts a generation that first feeds `prompt_delta` after the session's context. Refused at
  // once (the handle finishes kFailed, callback called) when the session already has a
  // generation running, the config or a token id is bad, or the request can never fit: context +
  // max_new_tokens above the executor's max_session_tokens or its whole cell pool.
  GenerationHandle generate_async(std::vector<int32_t> prompt_delta, GenConfig config,
                                  GenerationCallback callback = {});
  // A new session holding this one's first `upto` positions (0 <= upto <= position() when the
  // engine processes the command), sharing their cells; at the executor's session limit a
  // retained prefix is closed for it first. Failure leaves the clone not valid in status().
  Session clone_async(int32_t upto) const;
  // Closes the session (asynchronously; a running generation ends kCancelled). The Session
  // becomes not valid.
  void close();

 private:
  friend class Runner;
  Session(std::shared_ptr<internal::SessionShared> shared, std::weak_ptr<internal::Engine> engine)
      : shared_(std::move(shared)), engine_(std::move(engine)) {}

  std::shared_ptr<internal::SessionShared> shared_;
  std::weak_ptr<internal::Engine> engine_;
};

class Runner {
 public:
  // `executor` is initialized and outlives the Runner. Starts the engine thread.
  Runner(Executor& executor, DecodeFirstScheduler scheduler, RunnerOptions options = {});
  Runner(const Runner&) = delete;
  Runner& operator=(const Runner&) = delete;
  ~Runner();  // shutdown(); must not run on the engine thread (from a callback)

  // A new empty session (opened asynchronously; with the executor's limit of sessions already
  // open its status() says so and its generations fail). It takes an executor session when its
  // first generation runs.
  Session open_session();
  // Ends every live generation as kCancelled, closes every session once and stops the engine
  // thread. Idempotent. From a callback it only asks (the engine stops after that step).
  void shutdown();
  EngineMetrics metrics() const;

 private:
  std::shared_ptr<internal::Engine> engine_;
  std::mutex join_mutex_;  // one joiner at a time
  std::thread thread_;
};

}  // namespace cellm
