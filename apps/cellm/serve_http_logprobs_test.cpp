// The HTTP server's log-probabilities end to end (stories260K on the CPU, serve_http_test_util.h):
// completions' whole and streamed, a chat's per token, an echoed prompt's, each equal to the
// log-softmax of the independent reference's logits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include "serve_http_test_util.h"

namespace cellm::app {
namespace {

using namespace http_test;

TEST(ServeHttpTest, LogprobsAreTheLogSoftmaxOfTheReferenceLogitsWholeAndStreamed) {
  Served served;
  const Json c = reference_cases()[0];
  const std::vector<int32_t> expected_tokens = head(c.at("generated_tokens"), 12);
  const std::vector<std::vector<double>> reference = reference_log_softmax();
  const auto log_softmax = [&](size_t row, int32_t token) { return reference[row][token]; };
  const auto best_three = [&](size_t row) {
    std::vector<int32_t> order(512);
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + 3, order.end(),
                      [&](int32_t x, int32_t y) { return reference[row][x] > reference[row][y]; });
    order.resize(3);
    return order;
  };

  Json request = greedy_request(c, 12);
  request["logprobs"] = 3;
  const Reply whole = post(served, "/v1/completions", request);
  ASSERT_EQ(whole.status, 200) << whole.body.dump();
  const Json& choice = whole.body.at("choices").at(0);
  EXPECT_EQ(choice.at("token_ids"), Json(expected_tokens));
  const Json& lp = choice.at("logprobs");
  ASSERT_EQ(lp.at("tokens").size(), 12u);
  std::string pieces;
  for (size_t i = 0; i < 12; ++i) {
    const std::string piece = served.codec().token_piece(expected_tokens[i]);
    EXPECT_EQ(lp.at("tokens")[i], piece);
    EXPECT_EQ(lp.at("text_offset")[i], pieces.size());
    pieces += piece;
    EXPECT_NEAR(lp.at("token_logprobs")[i].get<double>(), log_softmax(i, expected_tokens[i]), 1e-3)
        << "token " << i;
    const Json& top = lp.at("top_logprobs")[i];
    ASSERT_EQ(top.size(), 3u);
    for (const int32_t id : best_three(i)) {
      const std::string key = served.codec().token_piece(id);
      ASSERT_TRUE(top.contains(key)) << "token " << i << " lacks '" << key << "'";
      EXPECT_NEAR(top.at(key).get<double>(), log_softmax(i, id), 1e-3);
    }
  }
  EXPECT_EQ(pieces, choice.at("text")) << "the tokens spell the text";

  // Streamed: the same entries, spread over the chunks with their tokens.
  request["stream"] = true;
  httplib::Client client = served.client();
  httplib::Result result = client.Post("/v1/completions", request.dump(), "application/json");
  ASSERT_TRUE(result);
  Json streamed_tokens = Json::array();
  Json streamed_logprobs = Json::array();
  Json streamed_offsets = Json::array();
  for (const std::string& payload : sse_payloads(result->body)) {
    if (payload == "[DONE]") continue;
    const Json event = Json::parse(payload);
    const Json& event_lp = event.at("choices").at(0).at("logprobs");
    for (size_t i = 0; i < event_lp.at("tokens").size(); ++i) {
      streamed_tokens.push_back(event_lp.at("tokens")[i]);
      streamed_logprobs.push_back(event_lp.at("token_logprobs")[i]);
      streamed_offsets.push_back(event_lp.at("text_offset")[i]);
    }
  }
  EXPECT_EQ(streamed_tokens, lp.at("tokens"));
  EXPECT_EQ(streamed_logprobs, lp.at("token_logprobs"));
  EXPECT_EQ(streamed_offsets, lp.at("text_offset"));
}

TEST(ServeHttpTest, AChatAsksForLogprobsWithABooleanAndGetsThemPerToken) {
  Served served(8, stories_with_chat_template());
  const Reply chat = post(served, "/v1/chat/completions",
                          {{"messages", {{{"role", "user"}, {"content", "Hi"}}}},
                           {"max_tokens", 6},
                           {"temperature", 0},
                           {"ignore_eos", true},
                           {"logprobs", true},
                           {"top_logprobs", 2},
                           {"return_token_ids", true}});
  ASSERT_EQ(chat.status, 200) << chat.body.dump();
  const Json& choice = chat.body.at("choices").at(0);
  const Json& content = choice.at("logprobs").at("content");
  ASSERT_EQ(content.size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    const std::string piece = served.codec().token_piece(choice.at("token_ids")[i]);
    EXPECT_EQ(content[i].at("token"), piece);
    std::vector<int> bytes;
    for (const char ch : piece) bytes.push_back(static_cast<unsigned char>(ch));
    EXPECT_EQ(content[i].at("bytes"), Json(bytes));
    ASSERT_EQ(content[i].at("top_logprobs").size(), 2u);
    // Greedy: the sampled token is the most likely one.
    EXPECT_EQ(content[i].at("top_logprobs")[0].at("token"), piece);
    EXPECT_EQ(content[i].at("top_logprobs")[0].at("logprob"), content[i].at("logprob"));
    EXPECT_LE(content[i].at("logprob").get<double>(), 0.0);
    EXPECT_GE(content[i].at("top_logprobs")[0].at("logprob").get<double>(),
              content[i].at("top_logprobs")[1].at("logprob").get<double>());
  }
}

TEST(ServeHttpTest, EchoedPromptLogprobsAreTheLogSoftmaxOfTheReferenceLogits) {
  Served served;
  const Json c = reference_cases()[0];
  // The reference's prompt and its first 8 generated tokens, all as the prompt: the rows that
  // predict those 8 are the reference's first 8 logits rows.
  std::vector<int32_t> prompt = c.at("prompt_tokens").get<std::vector<int32_t>>();
  const size_t num_prompt = prompt.size();
  const std::vector<int32_t> generated = head(c.at("generated_tokens"), 8);
  prompt.insert(prompt.end(), generated.begin(), generated.end());
  const std::vector<std::vector<double>> reference = reference_log_softmax();

  const Json request = {
      {"prompt", prompt}, {"echo", true}, {"logprobs", 1}, {"max_tokens", 0}, {"temperature", 0}};
  const Reply whole = post(served, "/v1/completions", request);
  ASSERT_EQ(whole.status, 200) << whole.body.dump();
  const Json& choice = whole.body.at("choices").at(0);
  EXPECT_EQ(choice.at("text"), served.codec().decode(prompt).value()) << "the prompt's text";
  EXPECT_EQ(choice.at("finish_reason"), "length");
  const Json& lp = choice.at("logprobs");
  ASSERT_EQ(lp.at("tokens").size(), prompt.size());
  EXPECT_TRUE(lp.at("token_logprobs")[0].is_null()) << "nothing predicts position 0";
  for (size_t i = 1; i < prompt.size(); ++i) {
    EXPECT_EQ(lp.at("tokens")[i], served.codec().token_piece(prompt[i]));
    ASSERT_TRUE(lp.at("token_logprobs")[i].is_number()) << i;
    EXPECT_LE(lp.at("token_logprobs")[i].get<double>(), 0.0);
    EXPECT_EQ(lp.at("top_logprobs")[i].size(), 1u);
  }
  for (size_t g = 0; g < generated.size(); ++g) {
    const double expected = reference[g][generated[g]];
    EXPECT_NEAR(lp.at("token_logprobs")[num_prompt + g].get<double>(), expected, 1e-3)
        << "generated token " << g << " as a prompt token";
    // Greedy tokens: each is its row's most likely one.
    EXPECT_EQ(lp.at("top_logprobs")[num_prompt + g].begin().key(),
              served.codec().token_piece(generated[g]));
  }

  // Streamed: the same text and entries.
  Json streamed_request = request;
  streamed_request["stream"] = true;
  streamed_request["max_tokens"] = 3;
  Json whole_request = request;
  whole_request["max_tokens"] = 3;
  const Reply whole3 = post(served, "/v1/completions", whole_request);
  ASSERT_EQ(whole3.status, 200);
  httplib::Client client = served.client();
  httplib::Result result =
      client.Post("/v1/completions", streamed_request.dump(), "application/json");
  ASSERT_TRUE(result);
  std::string text;
  Json tokens = Json::array();
  for (const std::string& payload : sse_payloads(result->body)) {
    if (payload == "[DONE]") continue;
    const Json event = Json::parse(payload);
    text += event.at("choices").at(0).at("text").get<std::string>();
    for (const Json& t : event.at("choices").at(0).at("logprobs").at("tokens")) tokens.push_back(t);
  }
  EXPECT_EQ(text, whole3.body.at("choices").at(0).at("text"));
  EXPECT_EQ(tokens, whole3.body.at("choices").at(0).at("logprobs").at("tokens"));
  EXPECT_EQ(tokens.size(), prompt.size() + 3);
}

}  // namespace
}  // namespace cellm::app
