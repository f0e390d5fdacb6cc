// Chat templates with tools: each vector of chat_tool_vectors.inc is a conversation rendered by
// the template its model ships (Qwen2.5-Instruct's for chatml, Qwen3's for qwen3 — its thinking
// and enable_thinking too —, Llama-3.1-Instruct's for llama-3.1 and Llama-3.2-Instruct's for
// llama-3.2 — their dates too —, Mistral-Nemo-Instruct-2407's for mistral-nemo,
// Mistral-7B-Instruct-v0.3's for
// mistral-v3; and, without tools, DeepSeek-R1-Distill's for deepseek-r1, Gemma 3's and 2's for
// gemma, Phi-3.5-mini's for phi-3, Phi-4-mini's for phi-4-mini, Phi-4's for phi-4 and Zephyr's
// for zephyr) through Jinja2 as Hugging
// Face runs it (tools/gen_chat_tool_vectors.py), some with the final message continued (cut as
// Hugging Face's apply_chat_template cuts it); ChatTemplate must render the same text. Then the
// refusals, and what stays message text.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tokenizer/chat_template.h"

namespace cellm {
namespace {

using Json = nlohmann::json;

const char* const kVectors =
#include "tokenizer/chat_tool_vectors.inc"
    ;

struct Conversation {
  std::vector<ChatMessage> messages;
  std::vector<ChatTool> tools;
};

Conversation conversation(const Json& vector) {
  Conversation c;
  for (size_t i = 0; i < vector.at("messages").size(); ++i) {
    const Json& m = vector.at("messages")[i];
    ChatMessage message{m.at("role").get<std::string>(), m.at("content").get<std::string>(), {}};
    message.tool_call_id = m.value("tool_call_id", "");
    if (m.contains("reasoning_content")) {
      message.reasoning_content = m.at("reasoning_content").get<std::string>();
    }
    if (m.contains("tool_calls")) {
      for (size_t k = 0; k < m.at("tool_calls").size(); ++k) {
        const Json& call = m.at("tool_calls")[k];
        message.tool_calls.push_back({call.at("function").at("name").get<std::string>(),
                                      vector.at("arguments_json")[i][k].get<std::string>(),
                                      call.at("id").get<std::string>()});
      }
    }
    c.messages.push_back(std::move(message));
  }
  for (const Json& t : vector.at("tools")) {
    ChatTool tool{t.at("json").get<std::string>(), t.at("json_indented").get<std::string>()};
    for (const Json& field : t.at("function_fields")) {
      tool.function_fields.push_back(
          {field[0].get<std::string>(), field[1].get<std::string>(), field[2].get<bool>()});
    }
    c.tools.push_back(std::move(tool));
  }
  return c;
}

TEST(ChatTemplateToolsTest, RendersWhatTheModelsOwnTemplatesRender) {
  const Json vectors = Json::parse(kVectors);
  ASSERT_GE(vectors.size(), 49u);
  for (const Json& vector : vectors) {
    SCOPED_TRACE(vector.at("format").get<std::string>() + ": " +
                 vector.at("name").get<std::string>());
    StatusOr<ChatTemplate> chat = ChatTemplate::from_name(vector.at("format").get<std::string>());
    ASSERT_TRUE(chat.ok());
    const std::string format = vector.at("format");
    EXPECT_EQ(chat->takes_tools(), format != "deepseek-r1" && format != "gemma" &&
                                       !format.starts_with("phi-") && format != "zephyr");
    const Conversation c = conversation(vector);
    const ChatTemplateKwargs kwargs{
        .enable_thinking = vector.at("enable_thinking").get<bool>(),
        .date_string = vector.at("date_string").get<std::string>(),
        .today = vector.at("today").get<std::string>(),
        .tools_in_user_message = vector.at("tools_in_user_message").get<bool>()};
    StatusOr<std::vector<ChatPart>> parts =
        vector.at("continue_final_message").get<bool>()
            ? chat->render_parts_continuing(c.messages, c.tools, kwargs)
            : chat->render_parts(c.messages, vector.at("add_generation_prompt").get<bool>(),
                                 c.tools, kwargs);
    ASSERT_TRUE(parts.ok()) << parts.status().to_string();
    std::string text;
    for (const ChatPart& part : *parts) text += part.text;
    EXPECT_EQ(text, vector.at("expected").get<std::string>());
    if (!vector.at("continue_final_message").get<bool>()) {
      EXPECT_EQ(text, *chat->render(c.messages, vector.at("add_generation_prompt").get<bool>(),
                                    c.tools, kwargs));
    }
  }
}

// Continuing a final message needs an assistant's text, all of it shown last in its turn.
TEST(ChatTemplateToolsTest, OnlyAnAnswerShownWholeCanBeContinued) {
  const auto continued = [](std::string_view format, const std::vector<ChatMessage>& messages) {
    return ChatTemplate::from_name(format)->render_parts_continuing(messages).status();
  };
  const ChatMessage user{"user", "u"};
  EXPECT_TRUE(continued("chatml", {user, {"assistant", "a"}}).ok());
  const std::vector<std::pair<std::vector<ChatMessage>, std::string>> refused = {
      {{user}, "an assistant's"},
      {{user, {"assistant", " \n "}}, "no text"},
      {{user, {"assistant", "a", {{"f", "{}"}}}}, "without tool calls"},
  };
  for (const auto& [messages, words] : refused) {
    const Status status = continued("chatml", messages);
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(status.message().find(words), std::string::npos) << status.message();
  }
  // Formats that rewrite the answer's thinking: what was sent is not shown as sent.
  for (const std::string_view format : {"deepseek-r1", "qwen3"}) {
    const Status status = continued(format, {user, {"assistant", "<think>t</think>a"}});
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << format;
    EXPECT_NE(status.message().find("leaves part of the final message out"), std::string::npos)
        << status.message();
  }
}

TEST(ChatTemplateToolsTest, WhatAClientSentStaysMessageText) {
  StatusOr<ChatTemplate> chat = ChatTemplate::from_name("chatml");
  ASSERT_TRUE(chat.ok());
  const std::vector<ChatMessage> messages = {
      {"user", "u", {}},
      {"assistant", "", {{"f<|im_end|>", "{\"a\": \"<|im_start|>\"}"}}},
      {"tool", "<|im_end|>", {}}};
  const std::vector<ChatTool> tools = {{"{\"x\": \"<|im_end|>\"}", ""}};
  StatusOr<std::vector<ChatPart>> parts = chat->render_parts(messages, true, tools);
  ASSERT_TRUE(parts.ok()) << parts.status().to_string();
  // The message parts hold exactly what the client sent, in order; the markup none of it.
  std::string messages_text;
  for (const ChatPart& part : *parts) {
    if (part.from_message) {
      messages_text += part.text;
    } else {
      EXPECT_EQ(part.text.find("<|im_end|>\""), std::string::npos) << part.text;
    }
  }
  EXPECT_EQ(messages_text,
            "{\"x\": \"<|im_end|>\"}uf<|im_end|>{\"a\": \"<|im_start|>\"}<|im_end|>");
}

TEST(ChatTemplateToolsTest, RefusesToolsWhereTheFormatHasNone) {
  const std::vector<ChatTool> tools = {{"{}", "{}"}};
  for (const char* name : {"llama-2", "mistral", "phi-3", "gemma", "deepseek-r1"}) {
    SCOPED_TRACE(name);
    StatusOr<ChatTemplate> chat = ChatTemplate::from_name(name);
    ASSERT_TRUE(chat.ok());
    EXPECT_FALSE(chat->takes_tools());
    StatusOr<std::string> with_tools = chat->render({{{"user", "u", {}}}}, true, tools);
    EXPECT_FALSE(with_tools.ok());
    EXPECT_NE(with_tools.status().message().find("takes no tools"), std::string::npos);
    StatusOr<std::string> tool_message =
        chat->render({{{"user", "u", {}}, {"assistant", "a", {}}, {"tool", "r", {}}}}, true);
    EXPECT_FALSE(tool_message.ok());
    StatusOr<std::string> call =
        chat->render({{{"user", "u", {}}, {"assistant", "", {{"f", "{}"}}}}}, true);
    EXPECT_FALSE(call.ok());
  }
}

TEST(ChatTemplateToolsTest, RefusesWhatTheFormatsCannotShow) {
  StatusOr<ChatTemplate> chatml = ChatTemplate::from_name("chatml");
  StatusOr<ChatTemplate> llama3 = ChatTemplate::from_name("llama-3.1");
  ASSERT_TRUE(chatml.ok() && llama3.ok());
  const std::vector<ChatTool> tools = {{"{}", "{}"}};
  // Calls only on an assistant's message.
  EXPECT_FALSE(chatml->render({{{"user", "u", {{"f", "{}"}}}}}, true, tools).ok());
  // Llama 3.1's template takes one call a message and the tools in a first user message.
  EXPECT_FALSE(llama3
                   ->render({{{"user", "u", {}}, {"assistant", "", {{"f", "{}"}, {"g", "{}"}}}}},
                            true, tools)
                   .ok());
  EXPECT_FALSE(llama3->render({{{"system", "s", {}}}}, true, tools).ok());
  EXPECT_FALSE(llama3->render({{{"system", "s", {}}, {"assistant", "a", {}}}}, true, tools).ok());
  // Mistral v0.3's template needs ids of 9 characters, and turns that alternate.
  StatusOr<ChatTemplate> mistral = ChatTemplate::from_name("mistral-v3");
  ASSERT_TRUE(mistral.ok());
  EXPECT_FALSE(
      mistral->render({{{"user", "u", {}}, {"assistant", "", {{"f", "{}", "call_12345"}}}}}, true)
          .ok());
  ChatMessage result{"tool", "r", {}};
  result.tool_call_id = "short";
  EXPECT_FALSE(mistral->render({{{"user", "u", {}}, result}}, true).ok());
  EXPECT_FALSE(mistral->render({{{"user", "u", {}}, {"user", "v", {}}}}, true).ok());
  // Llama 3.0's format has no dated system turn, and takes no tools.
  StatusOr<ChatTemplate> llama30 = ChatTemplate::from_name("llama-3");
  ASSERT_TRUE(llama30.ok());
  StatusOr<std::string> plain = llama30->render({{{"user", "u", {}}}}, true);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(*plain,
            "<|start_header_id|>user<|end_header_id|>\n\nu<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_FALSE(llama30->takes_tools());
  EXPECT_FALSE(llama30->render({{{"user", "u", {}}}}, true, tools).ok());
}

}  // namespace
}  // namespace cellm
