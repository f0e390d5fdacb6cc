// serve_api's vLLM extras (serve_api_vllm.cpp, serve_api_messages.cpp): min_tokens and
// stop_token_ids into the GenConfig, chat_template_kwargs' enable_thinking and assistant messages'
// reasoning_content into the request, and every extra cellm does not honour refused by name
// unless it is at its default.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "serve_api.h"
#include "serve_api_test_util.h"

namespace cellm::app {
namespace {

TEST(ServeApiTest, VllmMinTokensAndStopTokenIdsBecomeTheGenConfig) {
  const ServeRequest r =
      parse_ok(R"({"prompt": "x", "min_tokens": 5, "stop_token_ids": [7, 0, 7]})");
  EXPECT_EQ(r.config.min_new_tokens, 5);
  EXPECT_EQ(r.config.stop_tokens, (std::vector<int32_t>{7, 0, 7}));
  const ServeRequest none = parse_ok(R"({"prompt": "x", "min_tokens": null})");
  EXPECT_EQ(none.config.min_new_tokens, 0);
  EXPECT_TRUE(none.config.stop_tokens.empty());
}

TEST(ServeApiTest, VllmExtrasAtTheirDefaultsAreAcceptedAndOthersRefusedByName) {
  EXPECT_EQ(parse_ok(R"({"prompt": "x", "use_beam_search": false, "length_penalty": 1,
                         "include_stop_str_in_output": false, "skip_special_tokens": true,
                         "spaces_between_special_tokens": true, "bad_words": [],
                         "return_tokens_as_token_ids": false, "add_generation_prompt": true,
                         "continue_final_message": false, "chat_template_kwargs": {},
                         "truncate_prompt_tokens": null, "allowed_token_ids": null})")
                .config.min_new_tokens,
            0);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"("use_beam_search": true)", "\"use_beam_search\" is not supported (only false)"},
      {R"("length_penalty": 0.5)", "\"length_penalty\" is not supported (only 1.0)"},
      {R"("include_stop_str_in_output": true)", "\"include_stop_str_in_output\""},
      {R"("skip_special_tokens": false)", "\"skip_special_tokens\""},
      {R"("spaces_between_special_tokens": false)", "\"spaces_between_special_tokens\""},
      {R"("truncate_prompt_tokens": 10)", "\"truncate_prompt_tokens\" is not supported"},
      {R"("allowed_token_ids": [1, 2])", "\"allowed_token_ids\" is not supported"},
      {R"("bad_words": ["x"])", "\"bad_words\""},
      {R"("prompt_logprobs": 1)", "\"prompt_logprobs\""},
      {R"("chat_template": "{{x}}")", "\"chat_template\""},
      {R"("continue_final_message": true)", "\"continue_final_message\""},
      {R"("min_tokens": -1)", "\"min_tokens\" is -1"},
      {R"("min_tokens": 2, "response_format": {"type": "json_object"})",
       "\"min_tokens\" is not supported beside response_format"},
      {R"("min_tokens": 2, "guided_regex": "a+")", "\"min_tokens\" is not supported beside"},
      {R"("stop_token_ids": 3)", "\"stop_token_ids\" must be a list of token ids"},
      {R"("stop_token_ids": [1, -2])", "\"stop_token_ids\" is -2"},
      {R"("stop_token_ids": ["a"])", "\"stop_token_ids\" must be an integer"},
  };
  for (const auto& [fields, expected] : cases) {
    expect_refused(R"({"prompt": "x", )" + fields + "}", expected);
  }
}

TEST(ServeApiTest, ChatTemplateKwargsSwitchThinkingAndDateThePromptAndNothingElse) {
  constexpr ServeEndpoint kChat = ServeEndpoint::kChatCompletions;
  const std::string messages = R"("messages": [{"role": "user", "content": "u"}])";
  EXPECT_TRUE(parse_ok("{" + messages + "}", kChat).chat_prompt.enable_thinking);
  EXPECT_FALSE(
      parse_ok("{" + messages + R"(, "chat_template_kwargs": {"enable_thinking": false}})", kChat)
          .chat_prompt.enable_thinking);
  EXPECT_TRUE(
      parse_ok("{" + messages + R"(, "chat_template_kwargs": {"enable_thinking": true}})", kChat)
          .chat_prompt.enable_thinking);
  EXPECT_EQ(parse_ok("{" + messages + R"(, "chat_template_kwargs": {"date_string": "1 May 2025"}})",
                     kChat)
                .chat_prompt.date_string,
            "1 May 2025");
  EXPECT_FALSE(
      parse_ok("{" + messages + R"(, "chat_template_kwargs": {"tools_in_user_message": false}})",
               kChat)
          .chat_prompt.tools_in_user_message);
  EXPECT_TRUE(parse_ok("{" + messages + R"(, "chat_template_kwargs": null})", kChat)
                  .chat_prompt.enable_thinking);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"("chat_template_kwargs": {"thinking": true})",
       "\"chat_template_kwargs\" holds 'thinking'; cellm's chat formats read enable_thinking, "
       "date_string and tools_in_user_message only"},
      {R"("chat_template_kwargs": {"tools_in_user_message": 0})",
       "\"chat_template_kwargs.tools_in_user_message\" must be true or false"},
      {R"("chat_template_kwargs": {"date_string": 5})",
       "\"chat_template_kwargs.date_string\" must be a string"},
      {R"("chat_template_kwargs": {"enable_thinking": "no"})",
       "\"chat_template_kwargs.enable_thinking\" must be true or false"},
      {R"("chat_template_kwargs": [])", "\"chat_template_kwargs\" must be an object"},
  };
  for (const auto& [fields, expected] : cases) {
    expect_refused("{" + messages + ", " + fields + "}", expected, kChat);
  }
  expect_refused(R"({"prompt": "x", "chat_template_kwargs": {"enable_thinking": false}})",
                 "\"chat_template_kwargs\" is a chat completion's only");
}

TEST(ServeApiTest, AChatPromptMayEndInsideTheFinalAnswerOrAfterTheLastTurn) {
  constexpr ServeEndpoint kChat = ServeEndpoint::kChatCompletions;
  const std::string answer =
      R"("messages": [{"role": "user", "content": "u"}, {"role": "assistant", "content": "a"}])";
  const ServeRequest defaults = parse_ok("{" + answer + "}", kChat);
  EXPECT_TRUE(defaults.chat_prompt.add_generation_prompt);
  EXPECT_FALSE(defaults.chat_prompt.continue_final_message);
  const ServeRequest continued = parse_ok(
      "{" + answer + R"(, "add_generation_prompt": false, "continue_final_message": true})", kChat);
  EXPECT_FALSE(continued.chat_prompt.add_generation_prompt);
  EXPECT_TRUE(continued.chat_prompt.continue_final_message);
  const ServeRequest after_last =
      parse_ok("{" + answer + R"(, "add_generation_prompt": false})", kChat);
  EXPECT_FALSE(after_last.chat_prompt.add_generation_prompt);
  EXPECT_FALSE(after_last.chat_prompt.continue_final_message);

  expect_refused("{" + answer + R"(, "continue_final_message": true})",
                 "\"continue_final_message\" needs \"add_generation_prompt\": false", kChat);
  expect_refused(
      R"({"messages": [{"role": "user", "content": "u"}], "add_generation_prompt": false,
          "continue_final_message": true})",
      "needs the final message to be the assistant's", kChat);
  expect_refused("{" + answer + R"(, "continue_final_message": "yes"})",
                 "\"continue_final_message\" must be true or false", kChat);
  expect_refused(R"({"prompt": "x", "add_generation_prompt": false})",
                 "\"add_generation_prompt\" is a chat completion's only");
  EXPECT_TRUE(parse_ok(R"({"prompt": "x", "add_generation_prompt": true,
                           "continue_final_message": false})")
                  .chat_prompt.add_generation_prompt);
}

TEST(ServeApiTest, AnAssistantsReasoningContentIsKeptApartFromItsContent) {
  constexpr ServeEndpoint kChat = ServeEndpoint::kChatCompletions;
  const ServeRequest r = parse_ok(R"({"messages": [{"role": "user", "content": "u"},
      {"role": "assistant", "content": "a", "reasoning_content": "r"},
      {"role": "assistant", "content": "b", "reasoning_content": null},
      {"role": "user", "content": "v"}]})",
                                  kChat);
  ASSERT_EQ(r.messages.size(), 4u);
  EXPECT_EQ(r.messages[1].content, "a");
  EXPECT_EQ(r.messages[1].reasoning_content, "r");
  EXPECT_FALSE(r.messages[2].reasoning_content.has_value());
  EXPECT_FALSE(r.messages[0].reasoning_content.has_value());
  expect_refused(R"({"messages": [{"role": "user", "content": "u", "reasoning_content": "r"}]})",
                 "\"messages[0].reasoning_content\" is an assistant message's only", kChat);
  expect_refused(R"({"messages": [{"role": "user", "content": "u"},
      {"role": "assistant", "content": "a", "reasoning_content": 3}]})",
                 "\"messages[1].reasoning_content\" must be a string", kChat);
}

}  // namespace
}  // namespace cellm::app
