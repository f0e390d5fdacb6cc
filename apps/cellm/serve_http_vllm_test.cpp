// The HTTP server's vLLM sampling extras end to end (stories260K on the CPU,
// serve_http_test_util.h): stop_token_ids end a greedy completion where the independent
// reference's tokens first reach one; min_tokens keeps it from them until then, the reference's
// next best token taken where it is banned. A chat's final answer continued
// (continue_final_message) is the completion of its prompt's ids. Llama 3.2's prompts are dated.
#include <gtest/gtest.h>

#include <algorithm>
#include <ctime>
#include <string>
#include <vector>

#include "serve_http_test_util.h"

namespace cellm::app {
namespace {

using namespace http_test;

TEST(ServeHttpTest, StopTokenIdsEndAGenerationAndMinTokensHoldsThemOffUntilThen) {
  Served served;
  const Json c = reference_cases()[0];
  const std::vector<int32_t> reference = head(c.at("generated_tokens"), 40);
  // The first token whose first occurrence is at index >= 4.
  size_t stop_at = 4;
  while (std::find(reference.begin(), reference.begin() + static_cast<std::ptrdiff_t>(stop_at),
                   reference[stop_at]) !=
         reference.begin() + static_cast<std::ptrdiff_t>(stop_at)) {
    ++stop_at;
  }
  ASSERT_LT(stop_at, reference.size());
  const int32_t stop = reference[stop_at];

  Json request = greedy_request(c, 30);
  request["stop_token_ids"] = {stop};
  const Reply stopped = post(served, "/v1/completions", request);
  ASSERT_EQ(stopped.status, 200) << stopped.body.dump();
  const Json& choice = stopped.body.at("choices").at(0);
  EXPECT_EQ(choice.at("finish_reason"), "stop");
  EXPECT_EQ(choice.at("token_ids"), Json(head(c.at("generated_tokens"), stop_at + 1)));

  request["min_tokens"] = static_cast<int>(stop_at) + 3;
  const Reply held = post(served, "/v1/completions", request);
  ASSERT_EQ(held.status, 200) << held.body.dump();
  const std::vector<int32_t> tokens = held.body.at("choices").at(0).at("token_ids");
  ASSERT_GE(tokens.size(), stop_at + 3);
  EXPECT_EQ(std::vector<int32_t>(tokens.begin(), tokens.begin() + stop_at),
            head(c.at("generated_tokens"), stop_at));
  // At stop_at the reference's best is banned: its next best comes instead.
  const std::vector<std::vector<double>> rows = reference_log_softmax();
  std::vector<double> row = rows[stop_at];
  row[static_cast<size_t>(stop)] = -1e300;
  EXPECT_EQ(tokens[stop_at], std::max_element(row.begin(), row.end()) - row.begin());
  for (size_t i = 0; i < stop_at + 3; ++i) EXPECT_NE(tokens[i], stop) << "token " << i;

  request["min_tokens"] = 31;
  const Reply refused = post(served, "/v1/completions", request);
  EXPECT_EQ(refused.status, 400);
  EXPECT_NE(refused.body.dump().find("above the 30 max_tokens"), std::string::npos)
      << refused.body.dump();
  request["min_tokens"] = 0;
  request["stop_token_ids"] = {100000};
  const Reply outside = post(served, "/v1/completions", request);
  EXPECT_EQ(outside.status, 400);
  EXPECT_NE(outside.body.dump().find("outside the vocabulary"), std::string::npos)
      << outside.body.dump();
}

// continue_final_message: the prompt ends inside the assistant's answer (no end of turn after
// it), and the response holds only what the model goes on to write — greedily, the completion of
// the same prompt ids — or, with echo, the final message's text before it.
TEST(ServeHttpTest, AContinuedFinalAnswerIsTheCompletionOfItsPrompt) {
  Served served(4, stories_with_chat_template("chatml"));
  const Json messages = {{{"role", "user"}, {"content", "Tell me a story."}},
                         {{"role", "assistant"}, {"content", "Once upon a time, "}}};
  Json body = {{"messages", messages},
               {"add_generation_prompt", false},
               {"continue_final_message", true},
               {"temperature", 0},
               {"max_tokens", 12},
               {"return_token_ids", true}};
  const Reply r = post(served, "/v1/chat/completions", body);
  ASSERT_EQ(r.status, 200) << r.body.dump();
  const Json& prompt_ids = r.body.at("prompt_token_ids");
  const Reply prompt = post(served, "/detokenize", {{"tokens", prompt_ids}});
  ASSERT_EQ(prompt.status, 200);
  EXPECT_TRUE(prompt.body.at("prompt").get<std::string>().ends_with(
      "<|im_start|>assistant\nOnce upon a time, "))
      << prompt.body.dump();

  const Reply completion = post(
      served, "/v1/completions",
      {{"prompt", prompt_ids}, {"temperature", 0}, {"max_tokens", 12}, {"return_token_ids", true}});
  ASSERT_EQ(completion.status, 200) << completion.body.dump();
  const Json& chat_choice = r.body.at("choices").at(0);
  const Json& completion_choice = completion.body.at("choices").at(0);
  EXPECT_EQ(chat_choice.at("token_ids"), completion_choice.at("token_ids"));
  EXPECT_EQ(chat_choice.at("message").at("content"), completion_choice.at("text"));

  // With echo the answer begins with the final message, whole and streamed alike.
  Json echo = body;
  echo["echo"] = true;
  const Reply echoed = post(served, "/v1/chat/completions", echo);
  ASSERT_EQ(echoed.status, 200) << echoed.body.dump();
  const std::string whole = "Once upon a time, " + completion_choice.at("text").get<std::string>();
  EXPECT_EQ(echoed.body.at("choices").at(0).at("message").at("content"), whole);
  EXPECT_EQ(echoed.body.at("choices").at(0).at("token_ids"), completion_choice.at("token_ids"));
  EXPECT_EQ(stream_chat(served, echo).content, whole);
  // A final message of the user's is not echoed.
  Json user_last = {{"messages", {messages[0]}}, {"temperature", 0}, {"max_tokens", 6}};
  const Reply plain = post(served, "/v1/chat/completions", user_last);
  user_last["echo"] = true;
  const Reply not_echoed = post(served, "/v1/chat/completions", user_last);
  ASSERT_EQ(plain.status, 200);
  ASSERT_EQ(not_echoed.status, 200);
  EXPECT_EQ(not_echoed.body.at("choices").at(0).at("message").at("content"),
            plain.body.at("choices").at(0).at("message").at("content"));

  // Without a generation prompt the prompt ends with the answer's turn closed.
  body.erase("continue_final_message");
  const Reply closed = post(served, "/v1/chat/completions", body);
  ASSERT_EQ(closed.status, 200) << closed.body.dump();
  const Reply closed_prompt =
      post(served, "/detokenize", {{"tokens", closed.body.at("prompt_token_ids")}});
  EXPECT_TRUE(closed_prompt.body.at("prompt").get<std::string>().ends_with(
      "Once upon a time, <|im_end|>\n"))
      << closed_prompt.body.dump();

  // An answer the template does not show whole cannot be continued: a 400, nothing generated.
  Served deepseek(4, stories_with_chat_template("deepseek-r1"));
  body["continue_final_message"] = true;
  body["messages"][1]["content"] = "<think>Hm.</think>Once";
  const Reply refused = post(deepseek, "/v1/chat/completions", body);
  EXPECT_EQ(refused.status, 400) << refused.body.dump();
  EXPECT_NE(refused.body.dump().find("cannot be continued"), std::string::npos)
      << refused.body.dump();
}

// Llama 3.2's template dates its prompt by the day it is rendered (Hugging Face's strftime_now,
// local time); chat_template_kwargs' date_string names another day, for 3.1's too.
TEST(ServeHttpTest, Llama32PromptsAreDatedTodayUnlessADateStringIsGiven) {
  const auto day = [] {
    const std::time_t now = std::time(nullptr);
    std::tm local{};
    char text[32] = "";
    localtime_r(&now, &local);
    std::strftime(text, sizeof(text), "%d %b %Y", &local);
    return std::string(text);
  };
  const Json messages = {{{"role", "user"}, {"content", "Hi"}}};
  Served llama32(2, stories_with_chat_template("llama-3.2"));
  const std::string before = day();
  const std::string prompt = prompt_text(llama32, messages);
  const std::string after = day();  // the day may turn while the request runs
  EXPECT_TRUE(prompt.find("Today Date: " + before + "\n\n") != std::string::npos ||
              prompt.find("Today Date: " + after + "\n\n") != std::string::npos)
      << prompt;
  const Json dated = {{"chat_template_kwargs", {{"date_string", "01 Jan 2030"}}}};
  EXPECT_NE(prompt_text(llama32, messages, dated).find("Today Date: 01 Jan 2030\n\n"),
            std::string::npos);
  Served llama31(2, stories_with_chat_template("llama-3.1"));
  EXPECT_NE(prompt_text(llama31, messages).find("Today Date: 26 Jul 2024\n\n"), std::string::npos);
  EXPECT_NE(prompt_text(llama31, messages, dated).find("Today Date: 01 Jan 2030\n\n"),
            std::string::npos);
}

}  // namespace
}  // namespace cellm::app
