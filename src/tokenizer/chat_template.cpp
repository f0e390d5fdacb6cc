#include "tokenizer/chat_template.h"

#include <optional>

#include "fmt/format.h"
#include "gguf/gguf_text.h"
#include "tokenizer/chat_parts.h"

namespace cellm {
namespace {

using chat_internal::ChatParts;
using chat_internal::trim;

struct FormatName {
  ChatFormat format;
  std::string_view name;
};

constexpr FormatName kFormats[] = {
    {ChatFormat::kChatml, "chatml"},
    {ChatFormat::kQwen3, "qwen3"},
    {ChatFormat::kLlama2, "llama-2"},
    {ChatFormat::kLlama3, "llama-3"},
    {ChatFormat::kLlama31, "llama-3.1"},
    {ChatFormat::kLlama32, "llama-3.2"},
    {ChatFormat::kMistral, "mistral"},
    {ChatFormat::kMistralV3, "mistral-v3"},
    {ChatFormat::kMistralNemo, "mistral-nemo"},
    {ChatFormat::kDeepSeekR1, "deepseek-r1"},
    {ChatFormat::kPhi3, "phi-3"},
    {ChatFormat::kPhi4Mini, "phi-4-mini"},
    {ChatFormat::kPhi4, "phi-4"},
    {ChatFormat::kZephyr, "zephyr"},
    {ChatFormat::kGemma, "gemma"},
};

// Splits off a leading system message and checks the roles. `alternate`: the rest must go
// user, assistant, user, ... (formats whose turns are pairs). `tools`: tool messages and calls
// may come.
Status check_roles(std::span<const ChatMessage> messages, bool alternate, bool tools,
                   std::optional<std::string>* system, std::span<const ChatMessage>* turns) {
  *turns = messages;
  if (!messages.empty() && messages[0].role == "system") {
    *system = messages[0].content;
    *turns = messages.subspan(1);
  }
  for (size_t i = 0; i < turns->size(); ++i) {
    const ChatMessage& message = (*turns)[i];
    const std::string& role = message.role;
    if (role == "system") {
      return invalid_argument("chat template: a system message may only come first");
    }
    if (role == "tool" && !tools) {
      return invalid_argument(fmt::format(
          "chat template: message {} has role tool; this format takes no tool messages", i));
    }
    if (role != "user" && role != "assistant" && role != "tool") {
      return invalid_argument(fmt::format(
          "chat template: message {} has role {} (expected system, user, assistant{})", i,
          gguf_quote(role), tools ? " or tool" : " or, in a format that takes tools, tool"));
    }
    if (!message.tool_calls.empty() && (role != "assistant" || !tools)) {
      return invalid_argument(
          fmt::format("chat template: message {} holds tool calls; {}", i,
                      tools ? "only an assistant's may" : "this format takes none"));
    }
    if (alternate && (role == "user") != (i % 2 == 0)) {
      return invalid_argument(fmt::format(
          "chat template: message {} is '{}'; this format needs user and assistant turns in "
          "alternation, starting with user",
          i, role));
    }
  }
  return ok_status();
}

// Llama 2 chat: Meta's llama/generation.py chat_completion: B_INST, E_INST = "[INST]",
// "[/INST]"; B_SYS, E_SYS = "<<SYS>>\n", "\n<</SYS>>\n\n"; the system text goes inside the first
// user turn; each exchange is f"{BOS}{B_INST} {user.strip()} {E_INST} {answer.strip()} {EOS}"
// and the last user turn f"{BOS}{B_INST} {user.strip()} {E_INST}".
void render_llama2(const std::optional<std::string>& system, std::span<const ChatMessage> turns,
                   ChatParts* out) {
  for (size_t i = 0; i < turns.size(); ++i) {
    if (turns[i].role == "user") {
      if (i > 0) out->markup("<s>");
      out->markup("[INST] ");
      if (i == 0 && system) out->markup("<<SYS>>\n").message(*system).markup("\n<</SYS>>\n\n");
      out->message(trim(turns[i].content)).markup(" [/INST]");
    } else {
      out->markup(" ").message(trim(turns[i].content)).markup(" </s>");
    }
  }
}

// Mistral instruct, tokenizer V1 (docs.mistral.ai, "Tokenization & chat templates":
// "<s> [INST] user message [/INST] assistant message</s> [INST] new user message [/INST]"; the
// space after <s> and </s> is SentencePiece's prefix, which the tokenizer adds by itself after a
// special token). mistral-common puts the system prompt before the first user message,
// separated by "\n\n".
void render_mistral(const std::optional<std::string>& system, std::span<const ChatMessage> turns,
                    ChatParts* out) {
  for (size_t i = 0; i < turns.size(); ++i) {
    if (turns[i].role == "user") {
      out->markup("[INST] ");
      if (i == 0 && system) out->message(*system).markup("\n\n");
      out->message(turns[i].content).markup(" [/INST]");
    } else {
      out->markup(" ").message(turns[i].content).markup("</s>");
    }
  }
}

// Phi-3: Microsoft's Phi-3-mini-4k-instruct model card, "<|system|>\n...<|end|>\n<|user|>\n
// ...<|end|>\n<|assistant|>\n", as Phi-3.5-mini-instruct's template writes it: an empty system
// message left out, and the end of text ("<|endoftext|>") closing a conversation rendered without
// a generation prompt.
void render_phi3(std::span<const ChatMessage> messages, bool add_generation_prompt,
                 ChatParts* out) {
  for (const ChatMessage& m : messages) {
    if (m.role == "system" && m.content.empty()) continue;
    out->markup("<|" + m.role + "|>\n").message(m.content).markup("<|end|>\n");
  }
  out->markup(add_generation_prompt ? "<|assistant|>\n" : "<|endoftext|>");
}

// Phi-4-mini (microsoft/Phi-4-mini-instruct's template): every message "<|{role}|>{content}<|end|>"
// with no line breaks, an empty system message too; "<|assistant|>" as the generation prompt, else
// the end of text. (Its system message's own `tools` field is no OpenAI tool: the format takes
// none.)
void render_phi4_mini(std::span<const ChatMessage> messages, bool add_generation_prompt,
                      ChatParts* out) {
  for (const ChatMessage& m : messages) {
    out->markup("<|" + m.role + "|>").message(m.content).markup("<|end|>");
  }
  out->markup(add_generation_prompt ? "<|assistant|>" : "<|endoftext|>");
}

// Phi-4 (microsoft/phi-4's template): "<|im_start|>{role}<|im_sep|>{content}<|im_end|>" for
// system, user and assistant messages, no line breaks; "<|im_start|>assistant<|im_sep|>" as the
// generation prompt.
void render_phi4(std::span<const ChatMessage> messages, bool add_generation_prompt,
                 ChatParts* out) {
  for (const ChatMessage& m : messages) {
    out->markup("<|im_start|>" + m.role + "<|im_sep|>").message(m.content).markup("<|im_end|>");
  }
  if (add_generation_prompt) out->markup("<|im_start|>assistant<|im_sep|>");
}

// Zephyr (HuggingFaceH4/zephyr-7b-beta's template, TinyLlama-1.1B-Chat's too): each message
// "<|{role}|>\n{content}</s>\n" (the end of sentence, then the newline its template's line
// break leaves), generation prompt "<|assistant|>\n".
void render_zephyr(std::span<const ChatMessage> messages, bool add_generation_prompt,
                   ChatParts* out) {
  for (const ChatMessage& m : messages) {
    out->markup("<|" + m.role + "|>\n").message(m.content).markup("</s>\n");
  }
  if (add_generation_prompt) out->markup("<|assistant|>\n");
}

// Gemma: Google's "Gemma formatting and system instructions" (ai.google.dev) as Gemma 2's and 3's
// templates write it: "<start_of_turn>user\n{prompt}<end_of_turn>\n<start_of_turn>model\n
// {answer}<end_of_turn>\n", each message stripped; the assistant's role is "model"; there is no
// system role, so the system text (as sent) goes at the start of the first user turn, followed by
// "\n\n" (Gemma 3's template; Gemma 2's refuses a system message).
void render_gemma(const std::optional<std::string>& system, std::span<const ChatMessage> turns,
                  bool add_generation_prompt, ChatParts* out) {
  for (size_t i = 0; i < turns.size(); ++i) {
    const bool user = turns[i].role == "user";
    out->markup(std::string("<start_of_turn>") + (user ? "user" : "model") + "\n");
    if (i == 0 && system) out->message(*system).markup("\n\n");
    out->message(trim(turns[i].content)).markup("<end_of_turn>\n");
  }
  if (add_generation_prompt) out->markup("<start_of_turn>model\n");
}

// DeepSeek-R1's distills (deepseek-ai/DeepSeek-R1-Distill-*'s tokenizer_config.json): the system
// text first, "<｜User｜>{content}", "<｜Assistant｜>{answer}<｜end▁of▁sentence｜>" where the
// answer is what follows an earlier answer's last </think> (its thinking is not shown again), and
// the generation prompt "<｜Assistant｜><think>\n": a generation begins thinking.
void render_deepseek_r1(const std::optional<std::string>& system,
                        std::span<const ChatMessage> turns, bool add_generation_prompt,
                        ChatParts* out) {
  if (system) out->message(*system);
  for (const ChatMessage& m : turns) {
    if (m.role == "user") {
      out->markup("<｜User｜>").message(m.content);
    } else {
      out->markup("<｜Assistant｜>")
          .message(chat_internal::after_last(m.content, "</think>"))
          .markup("<｜end▁of▁sentence｜>");
    }
  }
  if (add_generation_prompt) out->markup("<｜Assistant｜><think>\n");
}

}  // namespace

std::vector<std::string_view> ChatTemplate::names() {
  std::vector<std::string_view> names;
  for (const FormatName& f : kFormats) names.push_back(f.name);
  return names;
}

std::string_view ChatTemplate::name() const {
  for (const FormatName& f : kFormats) {
    if (f.format == format_) return f.name;
  }
  return "?";
}

StatusOr<ChatTemplate> ChatTemplate::from_name(std::string_view name) {
  for (const FormatName& f : kFormats) {
    if (f.name == name) return ChatTemplate(f.format);
  }
  return invalid_argument(fmt::format("unknown chat template {} (known: {})", gguf_quote(name),
                                      fmt::join(names(), ", ")));
}

StatusOr<ChatTemplate> ChatTemplate::detect(std::string_view source) {
  const auto has = [&](std::string_view marker) {
    return source.find(marker) != std::string_view::npos;
  };
  // Phi-4 writes chatml's markers with <|im_sep|> after the role.
  if (has("<|im_start|>") && has("<|im_sep|>")) return ChatTemplate(ChatFormat::kPhi4);
  if (has("<|im_start|>")) {
    // Qwen3's template switches its thinking by enable_thinking; Qwen2.5's, QwQ's and plain
    // chatml's have no such switch.
    return ChatTemplate(has("enable_thinking") ? ChatFormat::kQwen3 : ChatFormat::kChatml);
  }
  if (has("<｜User｜>") && has("<｜Assistant｜>")) return ChatTemplate(ChatFormat::kDeepSeekR1);
  if (has("<|start_header_id|>") && has("<|end_header_id|>")) {
    // Llama 3.1's, 3.2's and 3.3's templates date a system turn they always write; 3.2's by the
    // day it is rendered (strftime_now).
    if (!has("Cutting Knowledge Date")) return ChatTemplate(ChatFormat::kLlama3);
    return ChatTemplate(has("strftime_now") ? ChatFormat::kLlama32 : ChatFormat::kLlama31);
  }
  if (has("<start_of_turn>")) return ChatTemplate(ChatFormat::kGemma);
  if (has("<|assistant|>") && has("<|end|>")) {
    // Phi-3's and 3.5's templates break the line after every marker; Phi-4-mini's has no line
    // break at all (written as a character or as a Jinja escape).
    return ChatTemplate(has("\n") || has("\\n") ? ChatFormat::kPhi3 : ChatFormat::kPhi4Mini);
  }
  if (has("<|assistant|>") && has("<|user|>")) return ChatTemplate(ChatFormat::kZephyr);
  // Mistral-Nemo's template writes v0.3's markers without the spaces after them.
  if (has("[AVAILABLE_TOOLS][") || has("[TOOL_CALLS][")) {
    return ChatTemplate(ChatFormat::kMistralNemo);
  }
  if (has("[AVAILABLE_TOOLS]") || has("[TOOL_CALLS]")) return ChatTemplate(ChatFormat::kMistralV3);
  if (has("[INST]") && has("<<SYS>>")) return ChatTemplate(ChatFormat::kLlama2);
  if (has("[INST]")) return ChatTemplate(ChatFormat::kMistral);
  if (source.empty()) {
    return unimplemented(fmt::format("the model has no tokenizer.chat_template; name one of: {}",
                                     fmt::join(names(), ", ")));
  }
  return unimplemented(fmt::format(
      "tokenizer.chat_template is not a recognized format (recognized by markers: {}); name one "
      "explicitly",
      fmt::join(names(), ", ")));
}

bool ChatTemplate::takes_tools() const {
  return format_ == ChatFormat::kChatml || format_ == ChatFormat::kQwen3 ||
         format_ == ChatFormat::kLlama31 || format_ == ChatFormat::kLlama32 ||
         format_ == ChatFormat::kMistralV3 || format_ == ChatFormat::kMistralNemo;
}

StatusOr<std::vector<ChatPart>> ChatTemplate::render_parts(std::span<const ChatMessage> messages,
                                                           bool add_generation_prompt,
                                                           std::span<const ChatTool> tools,
                                                           const ChatTemplateKwargs& kwargs) const {
  if (!tools.empty() && !takes_tools()) {
    return invalid_argument(fmt::format(
        "chat template '{}' takes no tools (chatml, qwen3, llama-3.1, llama-3.2, mistral-v3 and "
        "mistral-nemo do)",
        name()));
  }
  const bool alternate = format_ == ChatFormat::kLlama2 || format_ == ChatFormat::kMistral ||
                         format_ == ChatFormat::kGemma;
  std::optional<std::string> system;
  std::span<const ChatMessage> turns;
  CELLM_RETURN_IF_ERROR(check_roles(messages, alternate, takes_tools(), &system, &turns));
  if (alternate && system && turns.empty()) {
    return invalid_argument(fmt::format(
        "chat template '{}' keeps the system text in the first user message; there is none",
        name()));
  }
  ChatParts parts;
  switch (format_) {
    case ChatFormat::kChatml:
      chat_internal::render_chatml(messages, add_generation_prompt, tools, &parts);
      break;
    case ChatFormat::kQwen3:
      chat_internal::render_qwen3(messages, add_generation_prompt, tools, kwargs, &parts);
      break;
    case ChatFormat::kLlama2:
      render_llama2(system, turns, &parts);
      break;
    case ChatFormat::kLlama3:
      CELLM_RETURN_IF_ERROR(chat_internal::render_llama3(messages, add_generation_prompt, tools,
                                                         std::nullopt, true, &parts));
      break;
    case ChatFormat::kLlama31:
    case ChatFormat::kLlama32: {
      const std::string_view fallback = "26 Jul 2024";
      const std::string_view date = !kwargs.date_string.empty() ? kwargs.date_string
                                    : format_ == ChatFormat::kLlama32 && !kwargs.today.empty()
                                        ? std::string_view(kwargs.today)
                                        : fallback;
      CELLM_RETURN_IF_ERROR(chat_internal::render_llama3(
          messages, add_generation_prompt, tools, date, kwargs.tools_in_user_message, &parts));
      break;
    }
    case ChatFormat::kMistral:
      render_mistral(system, turns, &parts);
      break;
    case ChatFormat::kMistralV3:
    case ChatFormat::kMistralNemo:
      CELLM_RETURN_IF_ERROR(chat_internal::render_mistral_v3(
          system, turns, tools, /*spaced=*/format_ == ChatFormat::kMistralV3, &parts));
      break;
    case ChatFormat::kPhi3:
      render_phi3(messages, add_generation_prompt, &parts);
      break;
    case ChatFormat::kZephyr:
      render_zephyr(messages, add_generation_prompt, &parts);
      break;
    case ChatFormat::kPhi4Mini:
      render_phi4_mini(messages, add_generation_prompt, &parts);
      break;
    case ChatFormat::kPhi4:
      render_phi4(messages, add_generation_prompt, &parts);
      break;
    case ChatFormat::kGemma:
      render_gemma(system, turns, add_generation_prompt, &parts);
      break;
    case ChatFormat::kDeepSeekR1:
      render_deepseek_r1(system, turns, add_generation_prompt, &parts);
      break;
  }
  return parts.take();
}

StatusOr<std::vector<ChatPart>> ChatTemplate::render_parts_continuing(
    std::span<const ChatMessage> messages, std::span<const ChatTool> tools,
    const ChatTemplateKwargs& kwargs) const {
  if (messages.empty() || messages.back().role != "assistant" ||
      !messages.back().tool_calls.empty()) {
    return invalid_argument(
        "chat template: continuing the final message needs it to be an assistant's without tool "
        "calls");
  }
  const std::string_view content = messages.back().content;
  const std::string_view stripped = trim(content);
  if (stripped.empty()) {
    return invalid_argument("chat template: the final message has no text to continue");
  }
  CELLM_ASSIGN_OR_RETURN(std::vector<ChatPart> parts,
                         render_parts(messages, /*add_generation_prompt=*/false, tools, kwargs));
  // The final message's text is the last message text of its turn: every format closes the
  // turn with markup.
  size_t last = parts.size();
  while (last > 0 && !parts[last - 1].from_message) --last;
  const size_t at = last == 0 ? std::string::npos : parts[last - 1].text.rfind(stripped);
  if (at == std::string::npos) {
    return invalid_argument(fmt::format(
        "chat template '{}' leaves part of the final message out; it cannot be continued", name()));
  }
  // Hugging Face's rule: the whole text where the template kept it as sent, else its stripped
  // text.
  std::string& text = parts[last - 1].text;
  const bool kept_whole = text.compare(at, content.size(), content) == 0;
  text.resize(at + (kept_whole ? content.size() : stripped.size()));
  parts.resize(last);
  return parts;
}

StatusOr<std::string> ChatTemplate::render(std::span<const ChatMessage> messages,
                                           bool add_generation_prompt,
                                           std::span<const ChatTool> tools,
                                           const ChatTemplateKwargs& kwargs) const {
  CELLM_ASSIGN_OR_RETURN(const std::vector<ChatPart> parts,
                         render_parts(messages, add_generation_prompt, tools, kwargs));
  std::string text;
  for (const ChatPart& part : parts) text += part.text;
  return text;
}

}  // namespace cellm
