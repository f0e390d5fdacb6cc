// WordPiece: BERT normalization and splitting, greedy longest-match pieces, [UNK], and the
// documented decode normalization on the bert-bge vocabulary.
#include "tokenizer/wpm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>

#include "tokenizer/tokenizer_test_util.h"

namespace cellm {
namespace {

using tokenizer_internal::wpm_fold;

TEST(WpmTest, FoldDecomposesDropsAccentsAndLowercases) {
  EXPECT_EQ(wpm_fold("\xC3\x84pfel"), "apfel");  // Ä
  EXPECT_EQ(wpm_fold("C\xE1\xBB\xAD"
                     "a"),
            "cua");                             // ử: u + horn + hook above
  EXPECT_EQ(wpm_fold("\xC3\x9F"), "\xC3\x9F");  // ß has no decomposition
  EXPECT_EQ(wpm_fold("\xC4\xB0"), "i");         // İ: simple lowercase
  EXPECT_EQ(wpm_fold("e\xCC\x81"), "e");        // a combining acute on its own
  EXPECT_EQ(wpm_fold("\xEA\xB0\x81"), "\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8");  // 각 -> jamo
  EXPECT_EQ(wpm_fold("\xD0\x99"), "\xD0\xB8");  // Й -> и (breve dropped)
}

Vocab wpm_vocab() {
  Vocab v;
  v.kind = VocabKind::kWpm;
  v.tokens = {"[UNK]", "[CLS]", "[SEP]", "\xE2\x96\x81un", "aff", "able", "\xE2\x96\x81!",
              // NOLINTNEXTLINE(bugprone-suspicious-missing-comma): split so \x81 ends
              "\xE2\x96\x81"
              "a",
              "b"};
  v.token_types = {TokenType::kControl, TokenType::kControl, TokenType::kControl,
                   TokenType::kNormal,  TokenType::kNormal,  TokenType::kNormal,
                   TokenType::kNormal,  TokenType::kNormal,  TokenType::kNormal};
  v.special = {.bos = 1, .unk = 0, .sep = 2};
  v.add_bos = true;
  v.add_sep = true;
  return v;
}

TEST(WpmTest, WordsSplitIntoLongestPiecesAndUnknownWordsBecomeUnk) {
  StatusOr<Tokenizer> t = Tokenizer::from_vocab(wpm_vocab());
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ(*t->encode("UnAffable!", {}), (std::vector<int32_t>{3, 4, 5, 6}));
  EXPECT_EQ(*t->encode("ab unx a", {.add_special = true}),
            (std::vector<int32_t>{1, 7, 8, 0, 7, 2}));
  EXPECT_EQ(*t->decode(std::vector<int32_t>{3, 4, 5, 6}, {}), " unaffable !");
  // A word longer than 100 characters is [UNK] even when pieces would cover it.
  std::string long_word = "a";
  for (int i = 0; i < 100; ++i) long_word += "b";
  EXPECT_EQ(*t->encode(long_word, {}), (std::vector<int32_t>{0}));
}

TEST(WpmTest, SplitsAtWhitespacePunctuationAndIdeographsAndDropsControls) {
  StatusOr<Tokenizer> t = Tokenizer::from_vocab(wpm_vocab());
  ASSERT_TRUE(t.ok());
  const tokenizer_internal::TokenIndex index(t->vocab());
  StatusOr<tokenizer_internal::WpmEncoder> wpm =
      tokenizer_internal::WpmEncoder::create(t->vocab(), index);
  ASSERT_TRUE(wpm.ok());
  StatusOr<std::vector<std::string>> words = wpm->split_words(
      "Hello,world$ \xE4\xBD\xA0\xE5\xA5\xBD a\xE2\x80\x8B"
      "b\tc\x01"
      "d");
  ASSERT_TRUE(words.ok());
  EXPECT_EQ(*words, (std::vector<std::string>{"hello", ",", "world", "$", "\xE4\xBD\xA0",
                                              "\xE5\xA5\xBD", "ab", "cd"}));
}

std::string without_spaces_lowercase(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (!std::isspace(static_cast<unsigned char>(c))) {
      out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
    }
  }
  return out;
}

TEST(WpmTest, BertBgeDecodeIsTheTextUpToTheDocumentedNormalization) {
  std::optional<Tokenizer> t = testing::load_tokenizer("vocab/ggml-vocab-bert-bge.gguf");
  ASSERT_TRUE(t.has_value());
  const auto round_trip = [&](std::string_view text) {
    return *t->decode(*t->encode(text, {}), {});
  };
  EXPECT_EQ(round_trip("Hello, World!"), " hello , world !");
  EXPECT_EQ(round_trip("\xC3\x84pfel"), " apfel");
  EXPECT_EQ(round_trip("C\xE1\xBB\xAD"
                       "a Vi\xE1\xBB\x87t"),
            " cua viet");
  // Every ASCII vector case without [UNK]: the same characters, lowercased, spaces aside.
  int num_checked = 0;
  for (const testing::VectorCase& c : testing::read_vectors("bert-bge")) {
    const bool ascii = std::all_of(c.text.begin(), c.text.end(),
                                   [](char ch) { return static_cast<unsigned char>(ch) < 0x80; });
    if (!ascii || std::find(c.ids.begin(), c.ids.end(), 100) != c.ids.end()) continue;
    EXPECT_EQ(without_spaces_lowercase(round_trip(c.text)), without_spaces_lowercase(c.text))
        << c.text;
    ++num_checked;
  }
  EXPECT_GE(num_checked, 30);
}

}  // namespace
}  // namespace cellm
