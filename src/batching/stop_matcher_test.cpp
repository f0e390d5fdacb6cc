#include "batching/stop_matcher.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace cellm {
namespace {

// Token i renders as pieces[i]; "finish" text is `tail` (an incomplete character flushed).
class TableStream : public TextStream {
 public:
  TableStream(std::vector<std::string> pieces, std::string tail = "")
      : pieces_(std::move(pieces)), tail_(std::move(tail)) {}
  std::string append(int32_t token) override { return pieces_.at(token); }
  std::string finish() override { return tail_; }

 private:
  std::vector<std::string> pieces_;
  std::string tail_;
};

const std::vector<std::string> kPieces = {"", "a", "b", "c", "x", "STOP", "xSTOPy", "S", "TOP"};
constexpr int32_t kEos = 0, kA = 1, kB = 2, kC = 3, kX = 4, kWhole = 6, kS = 7, kTop = 8;

StopMatcher matcher(std::vector<std::string> stops, std::vector<int32_t> stop_tokens = {kEos},
                    std::string tail = "") {
  return StopMatcher(std::move(stop_tokens), std::move(stops),
                     std::make_unique<TableStream>(kPieces, std::move(tail)));
}

// Pushes tokens until one stops; returns everything emitted and the last outcome.
std::pair<std::string, StopMatcher::Outcome> run(StopMatcher& m, const std::vector<int32_t>& ids) {
  std::string text;
  for (const int32_t id : ids) {
    StopMatcher::Step step = m.push(id);
    text += step.text;
    if (step.outcome != StopMatcher::Outcome::kContinue) return {text, step.outcome};
  }
  text += m.finish();
  return {text, StopMatcher::Outcome::kContinue};
}

TEST(StopMatcherTest, AStopStringEndingInTheFirstMinTokensIsShownAndOneEndingAfterStops) {
  const auto with_min = [](int32_t min_tokens) {
    return StopMatcher({kEos}, {"STOP"}, std::make_unique<TableStream>(kPieces), min_tokens);
  };
  {  // "STOP" whole in token 2 of 2: shown, the text goes on
    StopMatcher m = with_min(2);
    EXPECT_EQ(run(m, {kX, kWhole, kA, kB}),
              std::make_pair(std::string("xxSTOPyab"), StopMatcher::Outcome::kContinue));
  }
  {  // begun in token 2 ("S"), ended in token 3 ("TOP"): past the first two, it stops
    StopMatcher m = with_min(2);
    EXPECT_EQ(run(m, {kX, kS, kTop, kA}),
              std::make_pair(std::string("x"), StopMatcher::Outcome::kStopString));
  }
  {  // ended in token 3 of min 3: shown; a later one stops
    StopMatcher m = with_min(3);
    EXPECT_EQ(run(m, {kX, kS, kTop, kA, kS, kTop}),
              std::make_pair(std::string("xSTOPa"), StopMatcher::Outcome::kStopString));
  }
  {  // a match the flushed tail completes within the first tokens is shown too
    StopMatcher n({kEos}, {"aST"}, std::make_unique<TableStream>(kPieces, "T"), 2);
    EXPECT_EQ(run(n, {kA, kS}),
              std::make_pair(std::string("aST"), StopMatcher::Outcome::kContinue));
  }
}

TEST(StopMatcherTest, StopTokenEndsAndFlushesHeldText) {
  StopMatcher m = matcher({"ab"});
  EXPECT_EQ(m.push(kX).text, "x");
  EXPECT_EQ(m.push(kA).text, "") << "'a' could start \"ab\": held back";
  const StopMatcher::Step step = m.push(kEos);
  EXPECT_EQ(step.outcome, StopMatcher::Outcome::kStopToken);
  EXPECT_EQ(step.text, "a");
}

TEST(StopMatcherTest, StopStringAcrossTokensIsNeverEmitted) {
  StopMatcher m = matcher({"STOP"});
  EXPECT_EQ(run(m, {kX, kS, kTop, kA}),
            std::make_pair(std::string("x"), StopMatcher::Outcome::kStopString));
}

TEST(StopMatcherTest, TextAfterTheStopStringInTheSameTokenIsDropped) {
  StopMatcher m = matcher({"STOP"});
  EXPECT_EQ(run(m, {kA, kWhole}),
            std::make_pair(std::string("ax"), StopMatcher::Outcome::kStopString));
}

TEST(StopMatcherTest, APartialMatchThatFailsIsReleased) {
  StopMatcher m = matcher({"ab"});
  EXPECT_EQ(m.push(kA).text, "");
  EXPECT_EQ(m.push(kC).text, "ac");
  EXPECT_EQ(m.push(kA).text, "");
  EXPECT_EQ(m.finish(), "a") << "the held tail comes out at the end";
}

TEST(StopMatcherTest, OverlappingPrefixesHoldBackTheLongestPossibleStart) {
  // Text "aaab" with stop "aab": the stop starts at byte 1, so only "a" is ever shown.
  StopMatcher m = matcher({"aab"});
  EXPECT_EQ(run(m, {kA, kA, kA, kB}),
            std::make_pair(std::string("a"), StopMatcher::Outcome::kStopString));
}

TEST(StopMatcherTest, TheEarliestOfSeveralStopStringsWins) {
  StopMatcher m = matcher({"cb", "bc"});
  // "abcb": "bc" starts at 1, "cb" at 2.
  EXPECT_EQ(run(m, {kA, kB, kC, kB}),
            std::make_pair(std::string("a"), StopMatcher::Outcome::kStopString));
}

TEST(StopMatcherTest, AStopStringCompletedByTheFlushedTailIsCut) {
  StopMatcher m = matcher({"ab"}, {kEos}, /*tail=*/"b");
  EXPECT_EQ(m.push(kX).text, "x");
  EXPECT_EQ(m.push(kA).text, "");
  EXPECT_EQ(m.finish(), "");
}

TEST(StopMatcherTest, WithoutTextOnlyStopTokensApply) {
  StopMatcher m({kC, kC, kB}, {}, nullptr);
  EXPECT_FALSE(m.has_text());
  EXPECT_EQ(m.push(kA).outcome, StopMatcher::Outcome::kContinue);
  const StopMatcher::Step step = m.push(kB);
  EXPECT_EQ(step.outcome, StopMatcher::Outcome::kStopToken);
  EXPECT_EQ(step.text, "");
}

TEST(StopMatcherTest, NoStopStringsEmitsEverythingAtOnce) {
  StopMatcher m = matcher({});
  EXPECT_EQ(m.push(kA).text, "a");
  EXPECT_EQ(m.push(kS).text, "S");
  EXPECT_EQ(m.finish(), "");
}

}  // namespace
}  // namespace cellm
