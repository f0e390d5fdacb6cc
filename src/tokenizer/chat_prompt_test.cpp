// encode_chat and Tokenizer::encode_parts on every vocabulary of the shared models folder, with
// every chat format (and the file's own template where it has one): ordinary messages give
// exactly the ids of the whole rendered text encoded with special tokens parsed (what the
// command line gave before, and what Hugging Face's apply_chat_template gives); control-token
// text typed into a message never becomes a control token.
#include "tokenizer/chat_prompt.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "tokenizer/tokenizer_test_util.h"

namespace cellm {
namespace {

// System, user and assistant turns, in the alternation every format takes.
const std::vector<std::vector<ChatMessage>> kOrdinaryConversations = {
    {{"user", "Hi!"}},
    {{"system", "Be brief."},
     {"user", "Hello world, how are you?"},
     {"assistant", " Fine, thanks.\n"},
     {"user", "What is 2+2? Answer in one word."}},
    {{"user", "  caf\xC3\xA9 \xE2\x98\x95 \xE4\xBD\xA0\xE5\xA5\xBD\n\n\tcode: `int x = 0;`  "}},
    {{"user", ""}},
    {{"user", "Once upon a time, there was a little girl named Lily. She liked to play."},
     {"assistant", "And then?"},
     {"user", "    She went home.\n"}},
};

// The chat formats to try on a vocabulary: every named one, and the file's own.
std::vector<ChatTemplate> formats_for(const Tokenizer& tokenizer) {
  std::vector<ChatTemplate> formats;
  for (std::string_view name : ChatTemplate::names())
    formats.push_back(*ChatTemplate::from_name(name));
  if (StatusOr<ChatTemplate> own = ChatTemplate::detect(tokenizer.vocab().chat_template);
      own.ok()) {
    formats.push_back(*own);
  }
  return formats;
}

// The old way: the whole rendered text, every control-token text in it parsed.
std::vector<int32_t> whole_text_ids(const Tokenizer& tokenizer, const ChatTemplate& chat,
                                    const std::vector<ChatMessage>& messages, bool generation) {
  StatusOr<std::string> text = chat.render(messages, generation);
  EXPECT_TRUE(text.ok()) << text.status().to_string();
  StatusOr<std::vector<int32_t>> ids =
      tokenizer.encode(*text, EncodeOptions{.add_special = true, .parse_special = true});
  EXPECT_TRUE(ids.ok()) << ids.status().to_string();
  return ids.ok() ? *ids : std::vector<int32_t>();
}

std::vector<int32_t> chat_ids(const Tokenizer& tokenizer, const ChatTemplate& chat,
                              const std::vector<ChatMessage>& messages, bool generation = true) {
  StatusOr<std::vector<int32_t>> ids =
      encode_chat(tokenizer, chat, messages,
                  generation ? ChatPromptEnd::kGenerationPrompt : ChatPromptEnd::kAfterLastMessage);
  EXPECT_TRUE(ids.ok()) << ids.status().to_string();
  return ids.ok() ? *ids : std::vector<int32_t>();
}

// How many of `ids` are control tokens, per control token.
std::vector<std::pair<int32_t, int64_t>> control_counts(const Tokenizer& tokenizer,
                                                        const std::vector<int32_t>& ids) {
  std::vector<std::pair<int32_t, int64_t>> counts;
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) {
    if (tokenizer.vocab().type(id) != TokenType::kControl) continue;
    const int64_t n = std::count(ids.begin(), ids.end(), id);
    if (n > 0) counts.emplace_back(id, n);
  }
  return counts;
}

std::vector<int32_t> parts_ids(const Tokenizer& tokenizer, std::vector<TextPart> parts,
                               bool add_special = false) {
  StatusOr<std::vector<int32_t>> ids = tokenizer.encode_parts(parts, add_special);
  EXPECT_TRUE(ids.ok()) << ids.status().to_string();
  return ids.ok() ? *ids : std::vector<int32_t>();
}

std::vector<int32_t> plain_ids(const Tokenizer& tokenizer, std::string_view text,
                               bool add_special = false) {
  StatusOr<std::vector<int32_t>> ids =
      tokenizer.encode(text, EncodeOptions{.add_special = add_special, .parse_special = false});
  EXPECT_TRUE(ids.ok()) << ids.status().to_string();
  return ids.ok() ? *ids : std::vector<int32_t>();
}

TEST(EncodePartsTest, ControlTokensComeOnlyFromPartsThatParseThem) {
  const std::optional<Tokenizer> tok = testing::load_tokenizer("stories260K.gguf");
  ASSERT_TRUE(tok.has_value());
  const int32_t bos = *tok->token_id("<s>"), eos = *tok->token_id("</s>");
  ASSERT_EQ(tok->vocab().type(eos), TokenType::kControl);
  std::vector<int32_t> expected = {bos};
  for (int32_t id : plain_ids(*tok, "</s>")) expected.push_back(id);
  expected.push_back(eos);
  EXPECT_EQ(parts_ids(*tok, {{"<s>", true}, {"</s>", false}, {"</s>", true}}), expected);
  // A token whose text starts in a plain part is not taken either.
  EXPECT_EQ(parts_ids(*tok, {{"</", false}, {"s>", true}}), plain_ids(*tok, "</s>"));
  EXPECT_EQ(parts_ids(*tok, {{"</", true}, {"s>", false}}), plain_ids(*tok, "</s>"));
}

TEST(EncodePartsTest, PlainTextRunsAcrossPartsAndBosComesOnce) {
  const std::optional<Tokenizer> tok = testing::load_tokenizer("stories260K.gguf");
  ASSERT_TRUE(tok.has_value());
  ASSERT_TRUE(tok->vocab().add_bos);
  const std::string text = "Once upon a time there was a girl.";
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    const std::string left = text.substr(0, cut), right = text.substr(cut);
    EXPECT_EQ(parts_ids(*tok, {{left, true}, {right, false}}, true), plain_ids(*tok, text, true))
        << cut;
    EXPECT_EQ(parts_ids(*tok, {{left, false}, {"", true}, {right, true}}, false),
              plain_ids(*tok, text, false))
        << cut;
  }
  EXPECT_EQ(parts_ids(*tok, {}, true), std::vector<int32_t>{tok->bos_id()});
}

class ChatPromptTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    tokenizer_ = testing::load_tokenizer(GetParam());
    ASSERT_TRUE(tokenizer_.has_value());
  }
  std::optional<Tokenizer> tokenizer_;
};

TEST_P(ChatPromptTest, OrdinaryMessagesGiveTheIdsOfTheWholeRenderedText) {
  const Tokenizer& tok = *tokenizer_;
  for (const ChatTemplate& chat : formats_for(tok)) {
    for (size_t c = 0; c < kOrdinaryConversations.size(); ++c) {
      for (bool generation : {true, false}) {
        const std::vector<ChatMessage>& messages = kOrdinaryConversations[c];
        EXPECT_EQ(chat_ids(tok, chat, messages, generation),
                  whole_text_ids(tok, chat, messages, generation))
            << GetParam() << " " << chat.name() << " conversation " << c;
      }
    }
  }
}

TEST_P(ChatPromptTest, ControlTokenTextInAMessageNeverBecomesAControlToken) {
  const Tokenizer& tok = *tokenizer_;
  // Every control token's text, each between words and once more at the message's ends, where
  // it touches the markup.
  std::string injected;
  int32_t num_control = 0;
  for (int32_t id = 0; id < tok.vocab_size() && num_control < 300; ++id) {
    if (tok.vocab().type(id) != TokenType::kControl || tok.token_text(id).empty()) continue;
    injected += std::string(tok.token_text(id)) + " x ";
    ++num_control;
  }
  ASSERT_GT(num_control, 0) << GetParam();
  for (const std::string& content : {injected, injected + injected.substr(0, injected.find(' '))}) {
    for (const ChatTemplate& chat : formats_for(tok)) {
      const std::vector<ChatMessage> attack = {{"system", content}, {"user", content}};
      const std::vector<ChatMessage> benign = {{"system", "x"}, {"user", "x"}};
      // The markup's control tokens and nothing more.
      EXPECT_EQ(control_counts(tok, chat_ids(tok, chat, attack)),
                control_counts(tok, chat_ids(tok, chat, benign)))
          << GetParam() << " " << chat.name();
      // The typed text is all there (WordPiece gives back a normalized text; the llama formats
      // strip the message's ends).
      StatusOr<std::string> text =
          tok.decode(chat_ids(tok, chat, attack),
                     DecodeOptions{.render_special = true, .strip_leading_space = false});
      ASSERT_TRUE(text.ok());
      if (tok.kind() != VocabKind::kWpm) {
        const std::string typed = content.substr(0, content.find_last_not_of(' ') + 1);
        EXPECT_NE(text->find(typed), std::string::npos) << GetParam() << " " << chat.name();
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(EveryVocabulary, ChatPromptTest,
                         ::testing::ValuesIn(testing::every_test_vocabulary()),
                         testing::vocabulary_test_name);

}  // namespace
}  // namespace cellm
