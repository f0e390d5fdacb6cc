// Thinking apart from the answer: each parser's reading of whole texts (written by hand from
// vLLM's parsers' documented behaviour), and the stream reader agreeing with it wherever the text
// is cut.
#include "serve_reasoning.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace cellm::app {
namespace {

struct Case {
  std::string text;
  std::optional<std::string> reasoning;
  std::string content;
};

void expect_split(ReasoningParser parser, const Case& c) {
  const ReasoningSplit split = split_reasoning(parser, c.text);
  EXPECT_EQ(split.reasoning, c.reasoning) << c.text;
  EXPECT_EQ(split.content, c.content) << c.text;
}

TEST(ServeReasoningTest, Qwen3ThinksOnlyInAnAnswerThatOpensThinking) {
  const std::vector<Case> cases = {
      {"<think>\nHmm.\n</think>\n\nHello.", "\nHmm.\n", "\n\nHello."},
      {"  \n<think>a</think>b", "a", "b"},
      {"Hello <think>x</think>", std::nullopt, "Hello <think>x</think>"},
      {"Plain answer.", std::nullopt, "Plain answer."},
      {"<think>cut by the length", "cut by the length", ""},
      {"<think></think>", "", ""},
      {"", std::nullopt, ""},
      {"<thin", std::nullopt, "<thin"},
  };
  for (const Case& c : cases) expect_split(ReasoningParser::kQwen3, c);
}

TEST(ServeReasoningTest, DeepSeekR1AnswersBeginThinking) {
  const std::vector<Case> cases = {
      {"Hmm.\n</think>\n\nHello.", "Hmm.\n", "\n\nHello."},
      {"<think>a</think>b", "a", "b"},
      {"all thinking, never closed", "all thinking, never closed", ""},
      {"</think>", "", ""},
      {"a</think>b</think>c", "a", "b</think>c"},
      {"", "", ""},
  };
  for (const Case& c : cases) expect_split(ReasoningParser::kDeepSeekR1, c);
  expect_split(ReasoningParser::kNone, {"a</think>b", std::nullopt, "a</think>b"});
  EXPECT_EQ(reasoning_parser_from_name("qwen3"), ReasoningParser::kQwen3);
  EXPECT_EQ(reasoning_parser_from_name("deepseek_r1"), ReasoningParser::kDeepSeekR1);
  EXPECT_EQ(reasoning_parser_from_name("r1"), std::nullopt);
}

TEST(ServeReasoningTest, TheStreamAgreesWithTheWholeTextWhereverItIsCut) {
  const std::vector<std::string> texts = {
      "<think>\nHmm, </thin k> not yet.\n</think>\n\nHello <think> there.",
      "   <think>x</think>",
      "Plain < text </ with <thi pieces",
      "<think>never closed </thi",
      "a</think>b",
      "",
      "<",
      "</think>"};
  std::mt19937 random(3);
  for (const ReasoningParser parser :
       {ReasoningParser::kNone, ReasoningParser::kQwen3, ReasoningParser::kDeepSeekR1}) {
    for (const std::string& text : texts) {
      const ReasoningSplit whole = split_reasoning(parser, text);
      for (int trial = 0; trial < 100; ++trial) {
        ReasoningStream stream(parser);
        std::string reasoning;
        std::string content;
        for (size_t at = 0; at < text.size();) {
          const size_t piece = std::min<size_t>(text.size() - at, 1 + random() % 5);
          const ReasoningStream::Pieces p = stream.push(std::string_view(text).substr(at, piece));
          // Thinking is never shown after the answer began.
          if (!content.empty()) {
            EXPECT_TRUE(p.reasoning.empty()) << text;
          }
          reasoning += p.reasoning;
          content += p.content;
          at += piece;
        }
        const ReasoningStream::Pieces rest = stream.finish();
        reasoning += rest.reasoning;
        content += rest.content;
        EXPECT_EQ(reasoning, whole.reasoning.value_or("")) << text;
        EXPECT_EQ(content, whole.content) << text;
      }
    }
  }
}

TEST(ServeReasoningTest, TheStreamShowsThinkingAsSoonAsItIsKnown) {
  ReasoningStream stream(ReasoningParser::kQwen3);
  EXPECT_EQ(stream.push("<th").reasoning, "");
  EXPECT_EQ(stream.push("ink>Let me").reasoning, "Let me");
  EXPECT_EQ(stream.push(" see</th").reasoning, " see");
  const ReasoningStream::Pieces p = stream.push("ink>Yes");
  EXPECT_EQ(p.reasoning, "");
  EXPECT_EQ(p.content, "Yes");
}

}  // namespace
}  // namespace cellm::app
