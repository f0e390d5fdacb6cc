// Chat templates: each format's rendering against strings written by hand from the format's
// published description (cited beside each render function in chat_template.cpp), recognition
// by markers, and the errors.
#include "tokenizer/chat_template.h"

#include <gtest/gtest.h>

#include <vector>

namespace cellm {
namespace {

const std::vector<ChatMessage> kConversation = {
    {"system", "Be brief."},
    {"user", "Hi!"},
    {"assistant", "Hello."},
    {"user", "2+2?"},
};

std::string render(std::string_view name, const std::vector<ChatMessage>& messages,
                   bool add_generation_prompt = true) {
  StatusOr<ChatTemplate> chat = ChatTemplate::from_name(name);
  EXPECT_TRUE(chat.ok()) << chat.status().to_string();
  StatusOr<std::string> text = chat->render(messages, add_generation_prompt);
  EXPECT_TRUE(text.ok()) << text.status().to_string();
  return text.ok() ? *text : std::string();
}

TEST(ChatTemplateTest, ChatmlWrapsEveryMessageAndOpensTheAssistantTurn) {
  EXPECT_EQ(render("chatml", kConversation),
            "<|im_start|>system\nBe brief.<|im_end|>\n"
            "<|im_start|>user\nHi!<|im_end|>\n"
            "<|im_start|>assistant\nHello.<|im_end|>\n"
            "<|im_start|>user\n2+2?<|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_EQ(render("chatml", {{"user", "Hi!"}}, /*add_generation_prompt=*/false),
            "<|im_start|>user\nHi!<|im_end|>\n");
}

TEST(ChatTemplateTest, Llama2PutsTheSystemTextInsideTheFirstInstruction) {
  EXPECT_EQ(render("llama-2", kConversation),
            "[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi! [/INST] Hello. </s>"
            "<s>[INST] 2+2? [/INST]");
  EXPECT_EQ(render("llama-2", {{"user", "  Hi!  "}}), "[INST] Hi! [/INST]");
}

TEST(ChatTemplateTest, Llama3GivesEveryMessageAHeaderAndStripsContent) {
  EXPECT_EQ(render("llama-3", {{"system", "Be brief."}, {"user", " Hi! \n"}}),
            "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatTemplateTest, MistralPrependsTheSystemTextToTheFirstUserMessage) {
  EXPECT_EQ(render("mistral", kConversation),
            "[INST] Be brief.\n\nHi! [/INST] Hello.</s>[INST] 2+2? [/INST]");
}

TEST(ChatTemplateTest, Phi3UsesRoleTagsAndEnd) {
  EXPECT_EQ(render("phi-3", kConversation),
            "<|system|>\nBe brief.<|end|>\n<|user|>\nHi!<|end|>\n<|assistant|>\nHello.<|end|>\n"
            "<|user|>\n2+2?<|end|>\n<|assistant|>\n");
}

TEST(ChatTemplateTest, GemmaCallsTheAssistantModelAndHasNoSystemTurn) {
  EXPECT_EQ(render("gemma", kConversation),
            "<start_of_turn>user\nBe brief.\n\nHi!<end_of_turn>\n"
            "<start_of_turn>model\nHello.<end_of_turn>\n"
            "<start_of_turn>user\n2+2?<end_of_turn>\n"
            "<start_of_turn>model\n");
}

TEST(ChatTemplateTest, PartsTellTheMessagesTextFromTheMarkup) {
  const std::vector<ChatMessage> conversation = {
      {"system", "Be brief."}, {"user", " Hi! "}, {"assistant", "Hello."}, {"user", "2+2?"}};
  for (std::string_view name : ChatTemplate::names()) {
    const ChatTemplate chat = *ChatTemplate::from_name(name);
    StatusOr<std::vector<ChatPart>> parts = chat.render_parts(conversation, true);
    ASSERT_TRUE(parts.ok()) << parts.status().to_string();
    std::string joined;
    std::vector<std::string> from_messages;
    for (size_t i = 0; i < parts->size(); ++i) {
      const ChatPart& part = (*parts)[i];
      EXPECT_FALSE(part.text.empty()) << name << " part " << i;
      if (i > 0) {
        EXPECT_NE(part.from_message, (*parts)[i - 1].from_message) << name << " part " << i;
      }
      joined += part.text;
      if (part.from_message) from_messages.push_back(part.text);
    }
    EXPECT_EQ(joined, render(name, conversation)) << name;
    // The llama formats and gemma strip a message's ends; the others keep them.
    // Mistral v0.3 shows the system text in the last user message; Llama 3.1 and 3.2 date their
    // system turn (a date is text, as a client may send one).
    const bool strips = name.starts_with("llama-") || name == "gemma";
    std::vector<std::string> expected =
        name == "mistral-v3" || name == "mistral-nemo"
            ? std::vector<std::string>{" Hi! ", "Hello.", "Be brief.", "2+2?"}
            : std::vector<std::string>{"Be brief.", strips ? "Hi!" : " Hi! ", "Hello.", "2+2?"};
    if (name == "llama-3.1" || name == "llama-3.2")
      expected.insert(expected.begin(), "26 Jul 2024");
    EXPECT_EQ(from_messages, expected) << name;
  }
}

TEST(ChatTemplateTest, RecognizesEachFormatByItsMarkers) {
  const std::pair<std::string_view, ChatFormat> cases[] = {
      {"{% for m in messages %}{{'<|im_start|>' + m['role']}}{% endfor %}", ChatFormat::kChatml},
      {"{{- '<|im_start|>assistant\\n' }}{%- if enable_thinking is defined and enable_thinking is "
       "false %}{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}",
       ChatFormat::kQwen3},
      {"{{ '<|start_header_id|>' + role + '<|end_header_id|>' }}", ChatFormat::kLlama3},
      {"{{- '<|start_header_id|>system<|end_header_id|>\\n\\n' }}{{- 'Cutting Knowledge Date: "
       "December 2023\\n' }}",
       ChatFormat::kLlama31},
      {"{%- set date_string = strftime_now('%d %b %Y') %}{{- '<|start_header_id|>system"
       "<|end_header_id|>\\n\\n' }}{{- 'Cutting Knowledge Date: December 2023\\n' }}",
       ChatFormat::kLlama32},
      {"{{ '<start_of_turn>' + role }}", ChatFormat::kGemma},
      // The template stored in ../shared/models/vocab/ggml-vocab-phi-3.gguf.
      {"{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') %}"
       "{{'<|user|>' + '\n' + message['content'] + '<|end|>' + '\n' + '<|assistant|>' + '\n'}}"
       "{% elif (message['role'] == 'assistant') %}{{message['content'] + '<|end|>' + '\n'}}"
       "{% endif %}{% endfor %}",
       ChatFormat::kPhi3},
      // Zephyr's and TinyLlama-Chat's.
      {"{% if message['role'] == 'user' %}\n{{ '<|user|>\\n' + message['content'] + eos_token "
       "}}\n{% elif message['role'] == 'assistant' %}\n{{ '<|assistant|>\\n'  + message['content'] "
       "+ eos_token }}",
       ChatFormat::kZephyr},
      {"{{ '[INST] <<SYS>>\\n' + system + '\\n<</SYS>>' }}", ChatFormat::kLlama2},
      {"{{ '[INST] ' + message['content'] + ' [/INST]' }}", ChatFormat::kMistral},
      {"{{ '[AVAILABLE_TOOLS] [' }}{{ '[INST] ' + message['content'] + '[/INST]' }}",
       ChatFormat::kMistralV3},
      {"{{ '[AVAILABLE_TOOLS][' }}{{ '[INST]' + message['content'] + '[/INST]' }}",
       ChatFormat::kMistralNemo},
      {"{{'<｜User｜>' + message['content']}}{{'<｜Assistant｜><think>\\n'}}",
       ChatFormat::kDeepSeekR1},
      // Phi-4-mini-instruct's: phi-3's markers, no line break anywhere.
      {"{% for message in messages %}{% if message['role'] == 'system' and 'tools' in message and "
       "message['tools'] is not none %}{{ '<|' + message['role'] + '|>' + message['content'] + "
       "'<|tool|>' + message['tools'] + '<|/tool|>' + '<|end|>' }}{% else %}{{ '<|' + "
       "message['role'] + '|>' + message['content'] + '<|end|>' }}{% endif %}{% endfor %}{% if "
       "add_generation_prompt %}{{ '<|assistant|>' }}{% else %}{{ eos_token }}{% endif %}",
       ChatFormat::kPhi4Mini},
      // Phi-4's: chatml's markers with <|im_sep|>.
      {"{% if (message['role'] == 'user') %}{{'<|im_start|>user<|im_sep|>' + message['content'] + "
       "'<|im_end|>'}}",
       ChatFormat::kPhi4},
  };
  for (const auto& [source, format] : cases) {
    StatusOr<ChatTemplate> chat = ChatTemplate::detect(source);
    ASSERT_TRUE(chat.ok()) << chat.status().to_string();
    EXPECT_EQ(chat->format(), format) << source;
  }
}

TEST(ChatTemplateTest, UnknownTemplatesAreErrorsThatNameTheOptions) {
  for (std::string_view source : {std::string_view(""), std::string_view("{{ 'USER: ' }}")}) {
    StatusOr<ChatTemplate> chat = ChatTemplate::detect(source);
    ASSERT_FALSE(chat.ok());
    EXPECT_NE(chat.status().message().find(
                  "chatml, qwen3, llama-2, llama-3, llama-3.1, llama-3.2, mistral, mistral-v3, "
                  "mistral-nemo, deepseek-r1, phi-3, phi-4-mini, phi-4, zephyr, gemma"),
              std::string::npos)
        << chat.status().message();
  }
  StatusOr<ChatTemplate> named = ChatTemplate::from_name("vicuna");
  ASSERT_FALSE(named.ok());
  EXPECT_NE(named.status().message().find("vicuna"), std::string::npos);
  EXPECT_NE(named.status().message().find("gemma"), std::string::npos);
}

TEST(ChatTemplateTest, BadConversationsAreRefused) {
  const ChatTemplate llama2 = *ChatTemplate::from_name("llama-2");
  const std::vector<ChatMessage> two_users = {{"user", "a"}, {"user", "b"}};
  EXPECT_FALSE(llama2.render(two_users, true).ok());
  const std::vector<ChatMessage> late_system = {{"user", "a"}, {"system", "b"}};
  EXPECT_FALSE(ChatTemplate::from_name("chatml")->render(late_system, true).ok());
  const std::vector<ChatMessage> tool = {{"tool", "a"}};
  EXPECT_FALSE(ChatTemplate::from_name("phi-3")->render(tool, true).ok());
  const std::vector<ChatMessage> unknown_role = {{"robot", "a"}};
  EXPECT_FALSE(ChatTemplate::from_name("chatml")->render(unknown_role, true).ok());
  const std::vector<ChatMessage> system_only = {{"system", "a"}};
  EXPECT_FALSE(ChatTemplate::from_name("gemma")->render(system_only, true).ok());
}

}  // namespace
}  // namespace cellm
