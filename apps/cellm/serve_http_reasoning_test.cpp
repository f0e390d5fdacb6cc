// --reasoning-parser through the server on stories260K (CPU): the model never closes thinking, so
// under deepseek_r1 every answer is reasoning_content (whole and streamed alike) and under qwen3
// none is; output held to a format is never split.
#include <gtest/gtest.h>

#include <string>

#include "serve_http_test_util.h"

namespace cellm::app::http_test {
namespace {

const Json kChat = {{"messages", {{{"role", "user"}, {"content", "Tell me a story."}}}},
                    {"temperature", 0},
                    {"max_tokens", 24}};

struct Streamed {
  std::string reasoning;
  std::string content;
  std::string finish;
};

Streamed stream(const Served& served, Json body) {
  body["stream"] = true;
  std::string events;
  EXPECT_EQ(post_receiving(
                served, body,
                [&](std::string_view data) {
                  events.append(data);
                  return true;
                },
                "/v1/chat/completions"),
            200);
  Streamed out;
  for (const std::string& payload : sse_payloads(events)) {
    if (payload == "[DONE]") continue;
    const Json chunk = Json::parse(payload);
    const Json& choice = chunk.at("choices").at(0);
    const Json& delta = choice.at("delta");
    if (delta.contains("reasoning_content")) out.reasoning += delta["reasoning_content"];
    if (delta.contains("content")) out.content += delta["content"].get<std::string>();
    if (!choice.at("finish_reason").is_null()) out.finish = choice["finish_reason"];
  }
  return out;
}

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
  const Streamed s = stream(served, kChat);
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
  const Streamed s = stream(served, kChat);
  EXPECT_EQ(s.reasoning, "");
  EXPECT_EQ(s.content, content);
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
