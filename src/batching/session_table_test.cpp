#include "batching/session_table.h"

#include <gtest/gtest.h>

#include <map>
#include <utility>
#include <vector>

#include "batching/step_plan.h"

namespace cellm {
namespace {

using Tokens = std::vector<int32_t>;

constexpr SessionTableConfig kConfig = {
    .max_sessions = 4, .max_session_tokens = 20, .vocab_size = 100};

StepInput input(SessionId session, int32_t start_pos, const Tokens& tokens, int32_t begin,
                int32_t end, bool wants_output) {
  return {session, start_pos, tokens, begin, end, wants_output};
}
StepInput whole(SessionId session, int32_t start_pos, const Tokens& tokens, bool wants_output) {
  return input(session, start_pos, tokens, 0, static_cast<int32_t>(tokens.size()), wants_output);
}

// Places every token of a packed step in the cache, as an executor would (one slice).
void place_all(CellCache& cache, const PackedStep& step) {
  StatusOr<bool> admitted = cache.declare_step(step.seq_ids, step.positions);
  ASSERT_TRUE(admitted.ok()) << admitted.status().to_string();
  ASSERT_TRUE(*admitted);
  cache.place();
}

// Everything a refused batch must leave as it was: every session's length and cells, the pool.
struct State {
  std::map<SessionId, std::vector<int32_t>> cells;
  int32_t num_free = 0;
  int32_t high_water = 0;
  int32_t num_sessions = 0;
  bool operator==(const State&) const = default;
};

State state(const CellCache& cache, const SessionTable& table, const std::vector<SessionId>& ids,
            const std::vector<SeqId>& seqs) {
  State s;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (!table.contains(ids[i])) continue;
    const auto cells = cache.cells(seqs[i]);
    s.cells[ids[i]] = std::vector<int32_t>(cells.begin(), cells.end());
    EXPECT_EQ(*table.length(ids[i]), static_cast<int32_t>(cells.size()));
  }
  s.num_free = cache.num_free();
  s.high_water = cache.high_water();
  s.num_sessions = table.num_sessions();
  return s;
}

class SessionTableTest : public ::testing::Test {
 protected:
  // Two sessions: a holds 6 positions (cells 0-5), b holds 3 (cells 6-8); 23 of 32 cells free.
  void SetUp() override {
    a_ = *table_.open();
    b_ = *table_.open();
    StatusOr<PackedStep> step =
        table_.pack({{whole(a_, 0, prompt_a_, false), whole(b_, 0, prompt_b_, true)}});
    ASSERT_TRUE(step.ok()) << step.status().to_string();
    place_all(cache_, *step);
    seqs_ = {step->seq_ids.front(), step->seq_ids.back()};
  }
  State now() const { return state(cache_, table_, {a_, b_}, seqs_); }
  void expect_refused(const BatchInput& batch, StatusCode code, const std::string& words) {
    const State before = now();
    StatusOr<PackedStep> step = table_.pack(batch);
    ASSERT_FALSE(step.ok()) << "accepted a batch that should be refused for " << words;
    EXPECT_EQ(step.status().code(), code) << step.status().to_string();
    EXPECT_NE(step.status().message().find(words), std::string::npos) << step.status().message();
    EXPECT_EQ(now(), before) << "a refused batch changed the cache";
    const Status invariants = cache_.check_invariants();
    EXPECT_TRUE(invariants.ok()) << invariants.to_string();
  }

  CellCache cache_{32};
  SessionTable table_{cache_, kConfig};
  Tokens prompt_a_ = {1, 2, 3, 4, 5, 6};
  Tokens prompt_b_ = {7, 8, 9};
  SessionId a_ = 0;
  SessionId b_ = 0;
  std::vector<SeqId> seqs_;
};

TEST(SessionTableOpenTest, IdsAreFreshUpToCapacityAndNeverReused) {
  CellCache cache(8);
  SessionTable table(cache, {.max_sessions = 2, .max_session_tokens = 8, .vocab_size = 10});
  const std::optional<SessionId> a = table.open();
  const std::optional<SessionId> b = table.open();
  ASSERT_TRUE(a && b);
  EXPECT_NE(*a, *b);
  EXPECT_NE(*a, 0u);
  EXPECT_FALSE(table.open().has_value());
  EXPECT_TRUE(table.close(*a).ok());
  EXPECT_EQ(table.close(*a).code(), StatusCode::kNotFound);
  const std::optional<SessionId> c = table.open();
  ASSERT_TRUE(c);
  EXPECT_NE(*c, *a);
  EXPECT_NE(*c, *b);
  EXPECT_EQ(cache.num_seqs(), 2);
  EXPECT_EQ(table.length(*a).status().code(), StatusCode::kNotFound);
}

TEST_F(SessionTableTest, PackFlattensInputsInOrderWithPositionsAndKeptRows) {
  const Tokens prompt_c = {10, 11, 12, 13, 14};
  const SessionId c = *table_.open();
  const Tokens next_b = {42};
  StatusOr<PackedStep> step = table_.pack({{
      input(c, 0, prompt_c, 0, 3, false),   // first chunk of a prompt
      whole(b_, 3, next_b, true),           // a decode
      input(a_, 4, prompt_a_, 2, 4, true),  // payload [2, 4) at positions 6-7
  }});
  ASSERT_TRUE(step.ok()) << step.status().to_string();
  EXPECT_EQ(step->num_tokens, 6);
  EXPECT_EQ(step->tokens, (Tokens{10, 11, 12, 42, 3, 4}));
  EXPECT_EQ(step->positions, (Tokens{0, 1, 2, 3, 6, 7}));
  EXPECT_EQ(step->sessions, (std::vector<SessionId>{c, c, c, b_, a_, a_}));
  EXPECT_EQ(step->seq_ids[3], seqs_[1]);
  EXPECT_EQ(step->seq_ids[4], seqs_[0]);
  EXPECT_EQ(step->kept_rows, (std::vector<KeptRow>{{3, 1, b_}, {5, 2, a_}}));
  ASSERT_EQ(step->session_starts.size(), 3u);
  EXPECT_EQ(step->session_starts[2].pos, 6);
  const BatchOutput output = step->make_output();
  ASSERT_EQ(output.outputs.size(), 2u);
  EXPECT_EQ(output.outputs[1].session, a_);
  EXPECT_EQ(output.outputs[1].input_index, 2);
  EXPECT_EQ(output.outputs[1].row, 1);
  EXPECT_EQ(output.outputs[1].token, kNoToken);
  place_all(cache_, *step);
  EXPECT_EQ(*table_.length(c), 3);
  EXPECT_EQ(*table_.length(a_), 8);
}

TEST_F(SessionTableTest, SelectRowsNamesTheKeptRowsOfEachSlice) {
  const Tokens four = {1, 2, 3, 4};
  const Tokens one = {5};
  const SessionId c = *table_.open();
  StatusOr<PackedStep> step =
      table_.pack({{whole(b_, 3, one, true), whole(c, 0, four, true), whole(a_, 6, one, true)}});
  ASSERT_TRUE(step.ok()) << step.status().to_string();  // kept rows at tokens 0, 4, 5
  RowSelection all = step->select_rows(0, 6);
  EXPECT_EQ(all.first_kept, 0);
  EXPECT_EQ(all.local_rows, (Tokens{0, 4, 5}));
  RowSelection middle = step->select_rows(1, 5);
  EXPECT_EQ(middle.first_kept, 1);
  EXPECT_EQ(middle.local_rows, (Tokens{3}));
  RowSelection none = step->select_rows(1, 4);
  EXPECT_EQ(none.first_kept, 1);
  EXPECT_TRUE(none.local_rows.empty());
  RowSelection last = step->select_rows(5, 6);
  EXPECT_EQ(last.first_kept, 2);
  EXPECT_EQ(last.local_rows, (Tokens{0}));
}

TEST_F(SessionTableTest, InputsOfOneSessionThatFollowEachOtherAreAccepted) {
  const Tokens more = {1, 2, 3, 4};
  StatusOr<PackedStep> step =
      table_.pack({{input(a_, 6, more, 0, 2, false), input(a_, 6, more, 2, 4, true)}});
  ASSERT_TRUE(step.ok()) << step.status().to_string();
  EXPECT_EQ(step->positions, (Tokens{6, 7, 8, 9}));
  EXPECT_EQ(step->kept_rows.size(), 1u);
}

TEST_F(SessionTableTest, AnUnknownSessionIsRefused) {
  const Tokens one = {1};
  expect_refused({{whole(a_, 6, one, true), whole(999, 0, one, true)}}, StatusCode::kNotFound,
                 "session 999");
}

TEST_F(SessionTableTest, AGapIsRefused) {
  const Tokens one = {1};
  expect_refused({{whole(a_, 7, one, true)}}, StatusCode::kInvalidArgument, "gap");
  const Tokens two = {1, 2};
  expect_refused({{input(a_, 6, two, 0, 1, false), input(a_, 6, two, 1, 1, false)}},
                 StatusCode::kInvalidArgument, "empty");
  expect_refused({{whole(a_, 6, one, false), whole(b_, 3, one, false), whole(a_, 8, one, true)}},
                 StatusCode::kInvalidArgument, "gap");
}

TEST_F(SessionTableTest, AnOverlapBetweenInputsOfOneSessionIsRefused) {
  const Tokens two = {1, 2};
  expect_refused({{whole(a_, 6, two, false), whole(a_, 7, two, true)}},
                 StatusCode::kInvalidArgument, "overlap");
  // Even when the first input rewinds: the second may not rewind again.
  expect_refused({{whole(a_, 2, two, false), whole(a_, 2, two, true)}},
                 StatusCode::kInvalidArgument, "overlap");
}

TEST_F(SessionTableTest, ASliceOutsideItsPayloadIsRefused) {
  const Tokens three = {1, 2, 3};
  expect_refused({{input(a_, 6, three, 0, 4, true)}}, StatusCode::kInvalidArgument, "payload");
  expect_refused({{input(a_, 6, three, -1, 2, true)}}, StatusCode::kInvalidArgument, "payload");
  expect_refused({{input(a_, 6, three, 2, 1, true)}}, StatusCode::kInvalidArgument, "payload");
  expect_refused({{input(a_, 6, three, 2, 2, true)}}, StatusCode::kInvalidArgument, "empty");
  expect_refused({{input(a_, -1, three, 0, 1, true)}}, StatusCode::kInvalidArgument, "negative");
}

TEST_F(SessionTableTest, ATokenOutsideTheVocabularyIsRefused) {
  const Tokens bad_high = {5, 100};
  const Tokens bad_low = {-3};
  expect_refused({{whole(a_, 6, bad_high, true)}}, StatusCode::kInvalidArgument, "vocabulary");
  expect_refused({{whole(b_, 3, bad_low, true)}}, StatusCode::kInvalidArgument, "vocabulary");
}

TEST_F(SessionTableTest, LogprobsAskedBeyondTheLimitOrOfAnUnknownTokenAreRefused) {
  const Tokens one = {1};
  for (const auto& [num_top, scored] : std::vector<std::pair<int32_t, int32_t>>{
           {kMaxTopLogprobs + 1, kNoToken}, {-2, kNoToken}, {3, 100}, {3, -2}}) {
    StepInput asking = whole(a_, 6, one, true);
    asking.num_top_logprobs = num_top;
    asking.scored_token = scored;
    expect_refused({{asking}}, StatusCode::kInvalidArgument, "log-probabilities");
  }
  StepInput fine = whole(a_, 6, one, true);
  fine.num_top_logprobs = kMaxTopLogprobs;
  fine.scored_token = 0;
  EXPECT_TRUE(table_.pack({{fine}}).ok());
}

TEST_F(SessionTableTest, PassingMaxSessionTokensIsRefused) {
  const Tokens fifteen(15, 1);
  expect_refused({{whole(a_, 6, fifteen, true)}}, StatusCode::kOutOfRange, "max_session_tokens");
  const Tokens fourteen(14, 1);  // exactly 20 positions
  EXPECT_TRUE(table_.pack({{whole(a_, 6, fourteen, true)}}).ok());
}

TEST_F(SessionTableTest, OverflowingThePoolIsRefused) {
  const Tokens fourteen(14, 1);
  const Tokens seventeen(17, 1);
  const Tokens nine(9, 1);
  // 23 free cells: 14 + 17 do not fit, 14 + 9 fit exactly.
  expect_refused({{whole(a_, 6, fourteen, false), whole(b_, 3, seventeen, true)}},
                 StatusCode::kResourceExhausted, "cell pool");
  EXPECT_TRUE(table_.pack({{whole(a_, 6, fourteen, false), whole(b_, 3, nine, true)}}).ok());
}

TEST_F(SessionTableTest, CellsTheBatchsRewindsDropAreHeldUntilTheStepCommits) {
  const Tokens eighteen(18, 1);
  const Tokens fourteen(14, 1);
  const Tokens nine(9, 1);
  // a rewinds to 2, dropping 4 cells that a rollback would need back: they are not free for
  // the batch, so 18 + 9 tokens do not fit the 23 free cells.
  expect_refused({{whole(a_, 2, eighteen, true), whole(b_, 3, nine, true)}},
                 StatusCode::kResourceExhausted, "held");
  StatusOr<PackedStep> fits =
      table_.pack({{whole(a_, 2, fourteen, true), whole(b_, 3, nine, true)}});
  ASSERT_TRUE(fits.ok()) << fits.status().to_string();
  EXPECT_EQ(*table_.length(a_), 2);
  EXPECT_EQ(cache_.num_free(), 23) << "the dropped cells are held, not free";
  place_all(cache_, *fits);
  EXPECT_EQ(cache_.num_free(), 0);
  table_.commit();
  EXPECT_EQ(cache_.num_free(), 4) << "committing frees the held cells";
  const Status invariants = cache_.check_invariants();
  EXPECT_TRUE(invariants.ok()) << invariants.to_string();
}

TEST_F(SessionTableTest, RewindingBeforeTheStepFreesTheCellsForIt) {
  const Tokens eighteen(18, 1);
  const Tokens nine(9, 1);
  ASSERT_TRUE(table_.rewind(a_, 2).ok());
  EXPECT_EQ(cache_.num_free(), 27);
  StatusOr<PackedStep> fits =
      table_.pack({{whole(a_, 2, eighteen, true), whole(b_, 3, nine, true)}});
  ASSERT_TRUE(fits.ok()) << fits.status().to_string();
  place_all(cache_, *fits);
  EXPECT_EQ(cache_.num_free(), 0);
}

TEST(SessionTablePoolTest, CommittingARewindFreesOnlyCellsNoOtherSessionOwns) {
  CellCache cache(16);
  SessionTable table(cache, kConfig);
  const SessionId x = *table.open();
  const Tokens six = {1, 2, 3, 4, 5, 6};
  StatusOr<PackedStep> setup = table.pack({{whole(x, 0, six, true)}});
  ASSERT_TRUE(setup.ok());
  place_all(cache, *setup);
  const StatusOr<SessionId> y = table.clone(x, 4);
  ASSERT_TRUE(y.ok());
  // x rewinds to 2 and runs 3 tokens; the clone keeps cells 2 and 3, so only 4 and 5 are freed.
  const Tokens three(3, 1);
  StatusOr<PackedStep> step = table.pack({{whole(x, 2, three, true)}});
  ASSERT_TRUE(step.ok()) << step.status().to_string();
  place_all(cache, *step);
  EXPECT_EQ(cache.num_free(), 16 - 6 - 3);
  table.commit();
  EXPECT_EQ(cache.num_free(), 16 - 4 - 3);
  EXPECT_EQ(*table.length(*y), 4);
  const Status invariants = cache.check_invariants();
  EXPECT_TRUE(invariants.ok()) << invariants.to_string();
}

TEST_F(SessionTableTest, AnyLaterVerbCommitsAPendingStep) {
  const Tokens two = {1, 2};
  StatusOr<PackedStep> step = table_.pack({{whole(a_, 3, two, true)}});
  ASSERT_TRUE(step.ok()) << step.status().to_string();
  place_all(cache_, *step);
  EXPECT_EQ(cache_.num_free(), 21);
  ASSERT_TRUE(table_.open().has_value());
  EXPECT_EQ(cache_.num_free(), 24) << "open() committed the step: a's 3 dropped cells are free";
  EXPECT_EQ(cache_.num_holders(), 0);
}

TEST_F(SessionTableTest, ARewindIsAppliedOnlyAfterTheWholeBatchValidated) {
  const Tokens two = {1, 2};
  const Tokens bad = {1000};
  // a's input rewinds to 3; b's input is bad, so a must keep its 6 positions.
  expect_refused({{whole(a_, 3, two, false), whole(b_, 3, bad, true)}},
                 StatusCode::kInvalidArgument, "vocabulary");
  expect_refused({{whole(a_, 3, two, false), whole(b_, 4, two, true)}},
                 StatusCode::kInvalidArgument, "gap");
  EXPECT_EQ(*table_.length(a_), 6);
  StatusOr<PackedStep> step = table_.pack({{whole(a_, 3, two, false), whole(b_, 3, two, true)}});
  ASSERT_TRUE(step.ok()) << step.status().to_string();
  EXPECT_EQ(*table_.length(a_), 3);
  EXPECT_EQ(step->positions, (Tokens{3, 4, 3, 4}));
  place_all(cache_, *step);
  // a's dropped cells 3, 4 and 5 are held until the step commits: the step took 9 and up.
  const auto a_cells = cache_.cells(seqs_[0]);
  EXPECT_EQ(std::vector<int32_t>(a_cells.begin(), a_cells.end()), (Tokens{0, 1, 2, 9, 10}));
  table_.commit();
  EXPECT_EQ(cache_.refcount(3), 0);
  EXPECT_EQ(cache_.refcount(5), 0);
}

TEST_F(SessionTableTest, CloneAndRewindCheckTheirArguments) {
  EXPECT_EQ(table_.clone(a_, 7).status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(table_.clone(a_, -1).status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(table_.clone(12345, 0).status().code(), StatusCode::kNotFound);
  const StatusOr<SessionId> c = table_.clone(a_, 4);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(*table_.length(*c), 4);
  EXPECT_EQ(cache_.num_free(), 23);  // shared, not copied
  ASSERT_TRUE(table_.open().has_value());
  EXPECT_EQ(table_.clone(a_, 1).status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(table_.rewind(a_, 7).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(table_.rewind(999, 0).code(), StatusCode::kNotFound);
  EXPECT_TRUE(table_.rewind(a_, 0).ok());
  EXPECT_EQ(*table_.length(a_), 0);
  EXPECT_EQ(*table_.length(*c), 4);  // the clone keeps the shared cells
}

TEST_F(SessionTableTest, RollbackAfterAFailedForwardRestoresEverySession) {
  const State before = now();
  const Tokens more = {1, 2, 3};
  StatusOr<PackedStep> step = table_.pack({{whole(b_, 3, more, true), whole(a_, 6, more, true)}});
  ASSERT_TRUE(step.ok());
  place_all(cache_, *step);
  EXPECT_NE(now(), before);
  table_.rollback(*step);
  EXPECT_EQ(now(), before);
}

TEST_F(SessionTableTest, RollbackOfAStepThatRewoundRestoresTheExactCells) {
  const State before = now();
  const Tokens two = {1, 2};
  const Tokens four = {1, 2, 3, 4};
  // a rewinds to 2 and b to 1; the step's own tokens take other cells than the held ones.
  StatusOr<PackedStep> step = table_.pack({{whole(a_, 2, four, true), whole(b_, 1, two, true)}});
  ASSERT_TRUE(step.ok()) << step.status().to_string();
  EXPECT_EQ(*table_.length(a_), 2);
  place_all(cache_, *step);
  for (const int32_t cell : {2, 3, 4, 5, 7, 8}) {
    EXPECT_EQ(cache_.refcount(cell), 1) << "held cell " << cell << " was reused";
  }
  EXPECT_NE(now(), before);
  table_.rollback(*step);
  EXPECT_EQ(now(), before) << "every session's length and cells as before the batch";
  EXPECT_EQ(cache_.num_holders(), 0);
  const Status invariants = cache_.check_invariants();
  EXPECT_TRUE(invariants.ok()) << invariants.to_string();
  // The same batch then runs as if the failed one never happened.
  StatusOr<PackedStep> again = table_.pack({{whole(a_, 2, four, true), whole(b_, 1, two, true)}});
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  EXPECT_EQ(again->positions, step->positions);
}

TEST_F(SessionTableTest, SliceBySliceExecutionPlacesEveryTokenAndKeepsEveryRowOnce) {
  // How an executor drives a step: pack, plan, then declare/place/select per call.
  const Tokens long_prompt = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  const Tokens one = {11};
  const SessionId c = *table_.open();
  StatusOr<PackedStep> step = table_.pack(
      {{whole(b_, 3, one, true), whole(c, 0, long_prompt, true), whole(a_, 6, one, true)}});
  ASSERT_TRUE(step.ok()) << step.status().to_string();
  const std::vector<int32_t> widths = {1, 2};
  std::vector<int32_t> kept_seen;
  CellStep cells;
  for (const SliceCall& call : plan_slices(step->num_tokens, 5, 3, widths)) {
    const auto seqs = std::span<const SeqId>(step->seq_ids).subspan(call.begin, call.num_tokens);
    const auto positions =
        std::span<const int32_t>(step->positions).subspan(call.begin, call.num_tokens);
    StatusOr<bool> admitted = cache_.declare_step(seqs, positions);
    ASSERT_TRUE(admitted.ok() && *admitted);
    cache_.place(&cells);
    EXPECT_EQ(cells.token_pos, std::vector<int32_t>(positions.begin(), positions.end()));
    const RowSelection rows = step->select_rows(call.begin, call.begin + call.num_tokens);
    for (size_t j = 0; j < rows.local_rows.size(); ++j) {
      const KeptRow& kept = step->kept_rows[rows.first_kept + j];
      EXPECT_EQ(kept.token_index, call.begin + rows.local_rows[j]);
      kept_seen.push_back(rows.first_kept + static_cast<int32_t>(j));
    }
  }
  EXPECT_EQ(kept_seen, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(*table_.length(c), 10);
  EXPECT_EQ(*table_.length(a_), 7);
  EXPECT_EQ(*table_.length(b_), 4);
}

}  // namespace
}  // namespace cellm
