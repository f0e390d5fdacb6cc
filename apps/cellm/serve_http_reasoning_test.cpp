// --reasoning-parser through the server on stories260K (CPU): the model never closes thinking, so
// under deepseek_r1 every answer is reasoning_content (whole and streamed alike) and under qwen3
// none is; output held to a format is never split. And the thinking of the qwen3 chat format's
// prompts: chat_template_kwargs' enable_thinking, earlier answers' thinking left out.
#include <gtest/gtest.h>

#include <string>

#include "serve_http_test_util.h"

namespace cellm::app::http_test {
namespace {

const Json kChat = {{"messages", {{{"role", "user"}, {"content", "Tell me a story."}}}},
                    {"temperature", 0},
                    {"max_tokens", 24}};

TEST(ServeHttpReasoningTest, DeepSeekR1AnswersThatNeverCloseThinkingAreAllReasoning) {
  Served served(4, stories_with_chat_template(), "", 1000, ReasoningParser::kDeepSeekR1);
  Served plain(4, stories_with_chat_template());
  const Reply r = post(served, "/v1/chat/completions", kChat);
  const Reply without = post(plain, "/v1/chat/completions", kChat);
  ASSERT_EQ(r.status, 200) << r.body.dump();
  ASSERT_EQ(without.status, 200);
  const Json& message = r.body.at("choices").at(0).at("message");
  const std::string text = without.body.at("choices").at(0).at("message").at("content");
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(message.at("reasoning_content"), text);  // greedy: the same tokens, all thinking
  EXPECT_TRUE(message.at("content").is_null());
  const StreamedChat s = stream_chat(served, kChat);
  EXPECT_EQ(s.reasoning, text);
  EXPECT_EQ(s.content, "");
  EXPECT_EQ(s.finish, "length");
}

// A DeepSeek-R1 distill's template opens thinking in the prompt; its answers are reasoning until
// they close it.
TEST(ServeHttpReasoningTest, ADeepSeekR1PromptOpensThinking) {
  Served served(4, stories_with_chat_template("deepseek-r1"), "", 1000,
                ReasoningParser::kDeepSeekR1);
  const Reply tokens = post(served, "/tokenize", {{"messages", kChat.at("messages")}});
  ASSERT_EQ(tokens.status, 200) << tokens.body.dump();
  const Reply prompt = post(served, "/detokenize", {{"tokens", tokens.body.at("tokens")}});
  ASSERT_EQ(prompt.status, 200);
  EXPECT_NE(prompt.body.at("prompt").get<std::string>().find(
                "<｜User｜>Tell me a story.<｜Assistant｜><think>\n"),
            std::string::npos)
      << prompt.body.dump();
  const Reply r = post(served, "/v1/chat/completions", kChat);
  ASSERT_EQ(r.status, 200) << r.body.dump();
  EXPECT_TRUE(r.body.at("choices").at(0).at("message").contains("reasoning_content"));
}

TEST(ServeHttpReasoningTest, Qwen3AnswersThatDoNotOpenThinkingAreContent) {
  Served served(4, stories_with_chat_template(), "", 1000, ReasoningParser::kQwen3);
  const Reply r = post(served, "/v1/chat/completions", kChat);
  ASSERT_EQ(r.status, 200) << r.body.dump();
  const Json& message = r.body.at("choices").at(0).at("message");
  EXPECT_FALSE(message.contains("reasoning_content"));
  const std::string content = message.at("content");
  EXPECT_FALSE(content.empty());
  const StreamedChat s = stream_chat(served, kChat);
  EXPECT_EQ(s.reasoning, "");
  EXPECT_EQ(s.content, content);
}

// Qwen3's template (recognized by its enable_thinking switch): with chat_template_kwargs'
// enable_thinking off the prompt closes an empty thinking block, so the answer is content.
TEST(ServeHttpReasoningTest, Qwen3ThinkingSwitchedOffClosesAnEmptyThinkingBlockInThePrompt) {
  Served served(4, stories_with_chat_template("qwen3"), "", 1000, ReasoningParser::kQwen3);
  const Json off = {{"chat_template_kwargs", {{"enable_thinking", false}}}};
  const Json& messages = kChat.at("messages");
  const std::string thinking_off = prompt_text(served, messages, off);
  EXPECT_TRUE(
      thinking_off.ends_with("<|im_start|>user\nTell me a story.<|im_end|>\n<|im_start|>assistant\n"
                             "<think>\n\n</think>\n\n"))
      << thinking_off;
  const std::string thinking_on = prompt_text(served, messages);
  EXPECT_TRUE(thinking_on.ends_with(
      "<|im_start|>user\nTell me a story.<|im_end|>\n<|im_start|>assistant\n"))
      << thinking_on;

  Json body = kChat;
  body.update(off);
  body["return_token_ids"] = true;
  const Reply r = post(served, "/v1/chat/completions", body);
  ASSERT_EQ(r.status, 200) << r.body.dump();
  Json tokenize = off;
  tokenize["messages"] = messages;
  const Reply tokens = post(served, "/tokenize", tokenize);
  ASSERT_EQ(tokens.status, 200);
  EXPECT_EQ(r.body.at("prompt_token_ids"), tokens.body.at("tokens"));
  // `cellm run` and `cellm generate` with --chat --no-thinking (and --system) encode the same
  // prompt.
  const StatusOr<std::vector<int32_t>> cli =
      served.codec().encode_chat("Tell me a story.", "", /*enable_thinking=*/false);
  ASSERT_TRUE(cli.ok()) << cli.status().to_string();
  EXPECT_EQ(Json(*cli), tokens.body.at("tokens"));
  EXPECT_NE(Json(*served.codec().encode_chat("Tell me a story.")), tokens.body.at("tokens"));
  // --system puts a system message first.
  Json with_system = tokenize;
  with_system["messages"] = {{{"role", "system"}, {"content", "Be brief."}}, messages[0]};
  const Reply system_tokens = post(served, "/tokenize", with_system);
  ASSERT_EQ(system_tokens.status, 200);
  EXPECT_EQ(Json(*served.codec().encode_chat("Tell me a story.", "Be brief.", false)),
            system_tokens.body.at("tokens"));
  const Json& message = r.body.at("choices").at(0).at("message");
  EXPECT_FALSE(message.contains("reasoning_content"));
  EXPECT_FALSE(message.at("content").get<std::string>().empty());

  // Variables no format reads are refused by name.
  Json unknown = kChat;
  unknown["chat_template_kwargs"] = {{"thinking", false}};
  const Reply refused = post(served, "/v1/chat/completions", unknown);
  EXPECT_EQ(refused.status, 400);
  EXPECT_NE(refused.body.dump().find("thinking"), std::string::npos) << refused.body.dump();
}

// Qwen3 leaves an earlier answer's thinking out of the prompt (chatml shows what it is sent), and
// shows the thinking of the answers after the last user query, sent in the content or apart.
TEST(ServeHttpReasoningTest, Qwen3ShowsOnlyTheCurrentRoundsThinking) {
  Served qwen3(4, stories_with_chat_template("qwen3"));
  Served chatml(4, stories_with_chat_template("chatml"));
  const Json earlier = {{{"role", "user"}, {"content", "Hi"}},
                        {{"role", "assistant"}, {"content", "<think>\nsecret\n</think>\n\nHello"}},
                        {{"role", "user"}, {"content", "Bye"}}};
  const std::string shown = prompt_text(qwen3, earlier);
  EXPECT_TRUE(
      shown.ends_with("<|im_start|>assistant\nHello<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n"
                      "<|im_start|>assistant\n"))
      << shown;
  EXPECT_NE(prompt_text(chatml, earlier).find("secret"), std::string::npos);

  const Json round = {{{"role", "user"}, {"content", "Hi"}},
                      {{"role", "assistant"}, {"content", "Hello"}, {"reasoning_content", "plan"}}};
  const std::string current = prompt_text(qwen3, round);
  EXPECT_NE(current.find("<|im_start|>assistant\n<think>\nplan\n</think>\n\nHello<|im_end|>\n"),
            std::string::npos)
      << current;
}

TEST(ServeHttpReasoningTest, OutputHeldToAFormatIsNotSplit) {
  Served served(4, stories_with_chat_template(), "", 1000, ReasoningParser::kDeepSeekR1);
  Json body = kChat;
  body["response_format"] = {{"type", "json_object"}};
  body["max_tokens"] = 64;
  const Reply r = post(served, "/v1/chat/completions", body);
  ASSERT_EQ(r.status, 200) << r.body.dump();
  const Json& message = r.body.at("choices").at(0).at("message");
  EXPECT_FALSE(message.contains("reasoning_content"));
  // The object (maybe cut by the context's end): content from its first byte.
  EXPECT_EQ(message.at("content").get<std::string>().find_first_not_of(" \n"),
            message.at("content").get<std::string>().find('{'));
  // Completions are never split either.
  const Reply completion = post(served, "/v1/completions", {{"prompt", "Once"}, {"max_tokens", 4}});
  ASSERT_EQ(completion.status, 200);
  EXPECT_FALSE(completion.body.at("choices").at(0).at("text").get<std::string>().empty());
}

}  // namespace
}  // namespace cellm::app::http_test
