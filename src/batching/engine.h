// Engine: the Runner's internals — the command FIFO shared with callers, and the state the
// engine thread alone owns (sessions with their host tokens, live generations, the scheduler).
//
// Not part of the public API (runner.h is); split out so each file stays one responsibility:
// engine.cpp holds the queue, the loop and the commands, engine_step.cpp one step (plan,
// execute, sample), engine_deliver.cpp what a picked token does (deliver, finish),
// engine_prefix.cpp prefix reuse, engine_json.cpp the JSON constraint's masks. The pending-token
// rule lives here: `tokens` is the session's whole context on the host, `committed` the prefix the
// executor holds; a task always runs [committed, tokens.size()). Thread-safety:
// push/wake/request_shutdown/metrics/now_us from any thread; everything else on the engine thread
// only, except pick_token, which the engine thread runs on its sampling pool for distinct sessions
// while it waits.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "batching/executor.h"
#include "batching/generation.h"
#include "batching/json_prefix.h"
#include "batching/json_schema_prefix.h"
#include "batching/json_token_mask.h"
#include "batching/metrics.h"
#include "batching/runner.h"
#include "batching/sampler.h"
#include "batching/scheduler.h"
#include "batching/stop_matcher.h"
#include "batching/text_pattern_prefix.h"
#include "core/thread_pool.h"

namespace cellm::internal {

// "session KEY": how messages name a session.
std::string session_name(uint64_t key);

// A Session's record shared between its handle and the engine.
struct SessionShared {
  explicit SessionShared(uint64_t session_key) : key(session_key) {}
  const uint64_t key;                // the engine's name for it (executor ids come later)
  std::atomic<int32_t> position{0};  // written by the engine thread
  mutable std::mutex mutex;
  Status status;  // guarded by mutex: why it cannot be used, OK otherwise

  void set_status(const Status& s) {
    std::lock_guard<std::mutex> lock(mutex);
    status = s;
  }
};

struct StartRequest {
  std::shared_ptr<GenerationState> state;
  std::vector<int32_t> prompt;  // [delta] token ids
  GenConfig config;
  GenerationCallback callback;
};

struct Command {
  enum class Kind { kOpen, kClose, kClone, kStart };
  Kind kind = Kind::kOpen;
  std::shared_ptr<SessionShared> session;  // the subject; for kClone the new session
  uint64_t source_key = 0;                 // kClone: the session cloned
  int32_t upto = 0;                        // kClone
  std::unique_ptr<StartRequest> start;     // kStart
};

class Engine {
 public:
  Engine(Executor& executor, DecodeFirstScheduler scheduler, RunnerOptions options);

  // ---- Any thread ----
  // Queues a command; false (command untouched) once shutdown began.
  bool push(Command& command);
  void wake();
  void request_shutdown();
  EngineMetrics metrics() const;
  int64_t now_us() const;
  uint64_t new_session_key() { return next_key_.fetch_add(1) + 1; }
  bool on_engine_thread() const;

  // ---- Engine thread ----
  void run();  // the loop; returns after shutdown

 private:
  struct ActiveGeneration {
    std::shared_ptr<GenerationState> state;
    GenConfig config;
    GenerationCallback callback;
    Sampler sampler;
    StopMatcher stops;
    GenerationMetrics metrics;
    LatencyStats inter_token;
    int64_t last_token_us = -1;
    int64_t last_step = -1;  // the latest step that ran one of its positions
    uint64_t arrival = 0;
    // Prompt log-probabilities (SamplingParams::prompt_logprobs >= 0): the next prompt position
    // to record (recomputed positions are not recorded twice), the prompt's end, and the entries
    // until the first update carries them.
    int32_t next_prompt_logprob = 0;
    int32_t prompt_end = 0;
    std::vector<TokenLogprobs> prompt_logprobs = {};
    bool prompt_logprobs_sent = false;
    // The sampler's rewrite of the step's row, for an executor that rewrites rows
    // (StepInput::rewrite views it until execute() returns); storage reused step to step.
    SamplerRewrite rewrite = {};
    // GenConfig::json_object / json_schema: the text generated so far as a prefix of a value
    // the schema accepts, each token's bytes (RunnerOptions::token_bytes) and pick_token's mask
    // of the tokens that keep it one ([vocab], scratch), with the pattern strings' masks it may
    // need again.
    std::optional<JsonSchemaPrefix> json = std::nullopt;
    const std::vector<std::string>* token_bytes = nullptr;
    const JsonTokenMask* token_mask = nullptr;
    std::vector<uint8_t> allowed = {};
    JsonTokenMask::PatternMaskCache pattern_masks = {};
    // GenConfig::text_pattern: the text generated so far as a prefix of a match (the mask's and
    // the bytes' fields above serve it too), and the stop tokens a constrained mask allows where
    // the text may end (a match, or a whole JSON value that could go on: a top-level number).
    std::optional<TextPatternPrefix> text = std::nullopt;
    std::vector<int32_t> stop_tokens = {};
  };
  // EngineSession::id of a session that holds no executor session yet.
  static constexpr SessionId kNoExecutorSession = ~SessionId{0};
  struct EngineSession {
    std::shared_ptr<SessionShared> shared;
    // The executor's id; kNoExecutorSession until the session first runs or holds cells (open
    // takes none: at the executor's limit which retained prefix gives way is decided once the
    // session's context says which one it would reuse).
    SessionId id = kNoExecutorSession;
    std::vector<int32_t> tokens;  // [context] committed + pending, host copy
    int32_t committed = 0;        // positions the executor holds: tokens[0, committed)
    int32_t high_committed = 0;   // most positions it ever held (to count recomputation)
    Status poisoned;              // not OK: an executor failure made it unusable
    std::unique_ptr<ActiveGeneration> generation;
    int64_t last_used = 0;  // step counter, for least-recently-used idle eviction
    // Prefix reuse: the key of a session whose running generation is computing this session's
    // prefix, which this generation waits for (0: none), up to this many positions.
    uint64_t waits_for = 0;
    int32_t wait_until = 0;

    bool has_executor_session() const { return id != kNoExecutorSession; }
  };
  // A closed session kept open in the executor for its prefix (PrefixReuseOptions).
  struct RetainedPrefix {
    SessionId id = 0;             // the executor's id
    std::vector<int32_t> tokens;  // [positions its cells hold]
    int64_t last_used = 0;        // step counter, as EngineSession::last_used
  };
  class Memory;

  // engine.cpp
  void apply(Command& command);
  void open(Command& command);
  void close(uint64_t key);
  Status check_room(const char* what) const;  // resource_exhausted at the session limit
  void clone(Command& command);
  void start(Command& command);
  Status check_start(const EngineSession& session, const StartRequest& request) const;
  void reap_cancelled();
  void shutdown_all();
  void publish_pool();

  // engine_prefix.cpp
  struct HeldPrefix {
    int32_t length = 0;            // positions
    SessionId id = 0;              // the executor session whose cells hold them
    int64_t* last_used = nullptr;  // its holder's, to refresh on use
  };
  // The longest prefix of `context`, at most `limit` positions, that the cells of a session
  // other than `session` or of a retained prefix hold.
  HeldPrefix longest_held_prefix(const EngineSession& session, std::span<const int32_t> context,
                                 int32_t limit);
  // Clones the longest prefix of `context` another session or a retained prefix holds into
  // `session` (whose own cells hold a shorter prefix of it) when it is at least min_tokens
  // longer; returns the positions gained (0: nothing changed).
  int32_t reuse_prefix(EngineSession& session, std::span<const int32_t> context);
  // Counts `session` (its executor session now holding `length` positions of its context) as
  // a prefix hit; returns the positions gained.
  int32_t count_reuse(EngineSession& session, int32_t length);
  // Whether the session's new generation should wait for another session's running generation,
  // which is computing at least min_tokens more of its context's prefix than anyone holds; sets
  // waits_for.
  bool wait_for_prefix(EngineSession& session);
  // Submits the waiting generations whose wait is over (their donor holds the prefix, ended, or
  // waits itself), or all of them when nothing else is left to run.
  void release_waiting();
  bool has_waiting() const;
  // Keeps a closing session's executor session as a retained prefix; false when it is not
  // worth keeping (the caller closes it).
  bool retain(const EngineSession& session);
  // Preempted generations whose context begins with positions another session's cells hold
  // start again from a clone of them (as a new generation would) instead of running everything:
  // shared prefixes stay shared.
  void resume_preempted();
  // Closes the least recently used retained prefix (never the one whose executor session is
  // `keep`); false when there is none.
  bool drop_retained(std::optional<SessionId> keep = std::nullopt);
  void count_retained();  // counters_.num_retained_prefixes = retained_.size()
  // Index of the least recently used retained prefix (not `keep`'s), or -1.
  int lru_retained(std::optional<SessionId> keep = std::nullopt) const;
  void close_executor_session(SessionId id, const std::string& what);
  // Gives the session an executor session of its own when it has none, closing least recently
  // used retained prefixes for room (open sessions never exceed the executor's limit, so one
  // always comes).
  void ensure_executor_session(EngineSession& session);
  // Closes the session's executor session, if any (its cells with it): it holds none after.
  void release_executor_session(EngineSession& session);
  // A session holding no executor session takes the retained prefix whose executor session is
  // `id` over, kept to its first `length` positions; false when `id` is not a retained prefix's.
  bool adopt_retained(EngineSession& session, SessionId id, int32_t length);

  // engine_step.cpp
  void run_step();
  // Which of the step's output rows need their logits on the host.
  enum class RowsNeeded {
    kNone,  // every row takes its token from the executor's argmax or its candidates
    kSome,  // some may be read (a sampler reading its row, a draw its candidates may leave
            // undecided, log-probabilities not summarized): the executor keeps the rows and
            // the engine fetches those it reads after the step (Executor::fetches_logits())
    kAll,   // the same with an executor that does not fetch rows, or one that computes no
            // greedy tokens, or prompt rows (`prompt_rows`) whose log-probabilities it does
            // not summarize: every row is copied
  };
  RowsNeeded step_needs_logits(const StepSchedule& plan, bool prompt_rows);
  void fail_step(const StepSchedule& plan, const Status& status);
  // Whether position `position` of `session` keeps a logits row for a prompt log-probability
  // (of the token after it) this step.
  static bool wants_prompt_row(const EngineSession& session, int32_t position);
  // The prompt log-probabilities the generation has not delivered yet (marked delivered).
  static std::span<const TokenLogprobs> take_prompt_logprobs(ActiveGeneration& generation);
  // A completing task's token and its log-probabilities (when the generation asked for them),
  // picked from its output row before any is delivered, so that rows the host reads can be
  // picked on the sampling pool. `token` unset: nothing picked (no row, or cancelled).
  struct PickedToken {
    std::optional<StatusOr<int32_t>> token;
    std::optional<TokenLogprobs> logprobs;
  };
  // Whether the generation's output rows ask the executor for sampling candidates (and its
  // draw): its sampler takes them as they are, or rewrites its row (bias, penalties) where the
  // executor rewrites rows (Executor::rewrites_rows()) and no log-probabilities are asked (they
  // are of the raw row) — greedy then takes the list's head, sampling the executor's draw from
  // the row (draws_rows()).
  bool lists_candidates(const ActiveGeneration& generation) const;
  // The token (and its log-probabilities) from the row's sampling candidates, when they decide
  // it without the row or the executor drew it from the row (Executor::draws_rows()); nullopt
  // otherwise.
  std::optional<PickedToken> pick_from_candidates(const EngineSession& session,
                                                  const BatchOutput& out, size_t row) const;
  // Whether picking session's token from output row `row` reads the row on the host; with
  // `rows_kept` (the executor kept the step's rows for fetch_logits()) a sampled row does even
  // when the step returned none.
  static bool pick_reads_row(const EngineSession& session, const BatchOutput& out, size_t row,
                             bool rows_kept);
  // Touches only the session's generation (its sampler's scratch): safe on any thread while no
  // other pick runs for the same session.
  static PickedToken pick_token(EngineSession& session, const BatchOutput& out, size_t row);
  // engine_json.cpp. A constrained generation (GenConfig::json_object, json_schema or
  // text_pattern): the row's argmax (`greedy` when the executor computed it) where plain greedy
  // takes it and it keeps the text a prefix of what the format accepts — no mask needed; else
  // nullopt, with generation.allowed the mask of the tokens that keep it one (and the stop tokens
  // where the text may end). Touches only the generation, as pick_token.
  static std::optional<int32_t> constrain(ActiveGeneration& generation,
                                          std::span<const float> logits, int32_t greedy);
  // Whether `token` is one of the generation's stop tokens; allow_stop_tokens adds them all to
  // its mask (where a constrained text may end).
  static bool is_stop_token(const ActiveGeneration& generation, int32_t token);
  static void allow_stop_tokens(ActiveGeneration& generation);
  void complete_task(EngineSession& session, const ScheduledSlice& slice, PickedToken picked);
  // `logprobs`: the token's log-probabilities when the generation asked for them, else null.
  void deliver(EngineSession& session, int32_t token, const TokenLogprobs* logprobs);
  void submit_next(EngineSession& session, const ActiveGeneration& generation);
  // Ends the session's generation: the final update carries `last_tokens`, `text` and the
  // tokens' `last_logprobs` (when asked for).
  void finish(EngineSession& session, FinishReason reason, std::string_view error,
              std::span<const int32_t> last_tokens = {}, std::string text = {},
              std::span<const TokenLogprobs> last_logprobs = {});
  // Calls the callback; the exception's message when it threw.
  static std::optional<std::string> invoke(const GenerationCallback& callback,
                                           const GenerationUpdate& update);
  EngineSession* find_by_id(SessionId id);

  Executor& executor_;
  const ExecutorLimits limits_;
  const RunnerOptions options_;
  const JsonTokenMask token_mask_;  // over options_.token_bytes
  const std::chrono::steady_clock::time_point start_time_;
  std::atomic<uint64_t> next_key_{0};

  // Shared with callers.
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<Command> queue_;     // guarded by mutex_
  bool wake_ = false;              // guarded by mutex_
  bool stopping_ = false;          // guarded by mutex_: no command is accepted once set
  std::thread::id engine_thread_;  // guarded by mutex_; set by run()

  // Engine thread only.
  DecodeFirstScheduler scheduler_;
  ThreadPool sampling_pool_;  // RunnerOptions::sampling_threads; used by the engine thread only
  std::unordered_map<uint64_t, EngineSession> sessions_;  // by key
  std::unordered_map<SessionId, uint64_t> key_of_;        // executor id -> key
  std::vector<RetainedPrefix> retained_;                  // at most max_retained
  struct Preempted {
    uint64_t key = 0;
    int32_t held = -1;  // positions other cells held when first looked at; -1: not yet looked
  };
  std::vector<Preempted> preempted_;  // generations preempted and not yet started again
  uint64_t next_arrival_ = 0;
  int64_t step_ = 0;

  // Engine metrics: written by the engine thread, read by metrics().
  mutable std::mutex metrics_mutex_;
  EngineMetrics counters_;  // counts and pool figures; summaries filled by metrics()
  LatencyStats decode_steps_, prompt_steps_, mixed_steps_, ttft_, inter_token_;
  int64_t first_submit_us_ = -1;
  int64_t last_end_us_ = -1;
};

}  // namespace cellm::internal
