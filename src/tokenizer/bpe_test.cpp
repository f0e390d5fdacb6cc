// Byte-level BPE and pre-tokenizers on hand-built data: the byte-to-unicode mapping, merge
// order by rank, the pre-tokenizer table and its regex splitting.
#include "tokenizer/bpe.h"

#include <gtest/gtest.h>

#include "tokenizer/pretokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace cellm {
namespace {

using tokenizer_internal::byte_to_unicode;

// Ids 0..255: the mapped character of each byte; then the merge results in order.
Vocab bpe_vocab(const std::vector<std::string>& merges, std::string pre = "gpt-2") {
  Vocab v;
  v.kind = VocabKind::kBpe;
  v.pre = std::move(pre);
  for (int b = 0; b < 256; ++b) {
    std::string text;
    tokenizer_internal::append_utf8(byte_to_unicode(static_cast<uint8_t>(b)), &text);
    v.tokens.push_back(text);
  }
  for (const std::string& merge : merges) {
    const size_t space = merge.find(' ');
    v.tokens.push_back(merge.substr(0, space) + merge.substr(space + 1));
  }
  v.merges = merges;
  return v;
}

std::vector<int32_t> encode(const Vocab& v, std::string_view text) {
  StatusOr<Tokenizer> t = Tokenizer::from_vocab(v);
  EXPECT_TRUE(t.ok()) << t.status().to_string();
  if (!t.ok()) return {};
  StatusOr<std::vector<int32_t>> ids = t->encode(text, {});
  EXPECT_TRUE(ids.ok()) << ids.status().to_string();
  return ids.ok() ? *ids : std::vector<int32_t>{};
}

TEST(BpeTest, ByteToUnicodeFollowsGpt2) {
  EXPECT_EQ(byte_to_unicode('A'), static_cast<uint32_t>('A'));
  EXPECT_EQ(byte_to_unicode(' '), 0x120u);   // 'Ġ': the 33rd unprintable byte
  EXPECT_EQ(byte_to_unicode('\n'), 0x10Au);  // 'Ċ'
  EXPECT_EQ(byte_to_unicode(0x00), 0x100u);
  EXPECT_EQ(byte_to_unicode(0xAD), 0x143u);  // soft hyphen, the last unprintable one
  EXPECT_EQ(byte_to_unicode(0xAE), 0xAEu);
}

TEST(BpeTest, LowestRankMergesFirst) {
  // "abc": with "b c" ranked first, "a" + "bc"; with "a b" first, "ab" + "c".
  EXPECT_EQ(encode(bpe_vocab({"b c", "a b"}), "abc"), (std::vector<int32_t>{'a', 256}));
  EXPECT_EQ(encode(bpe_vocab({"a b", "b c"}), "abc"), (std::vector<int32_t>{256, 'c'}));
  // Chained merges build a whole word. " hello" is its own pre-token; its "Ġ h" merge (rank 0)
  // takes the 'h' before "h e" can.
  const Vocab v = bpe_vocab({"\xC4\xA0 h", "l l", "h e", "he ll", "hell o"});
  EXPECT_EQ(encode(v, "hello"), (std::vector<int32_t>{260}));
  EXPECT_EQ(encode(v, "hello hello"), (std::vector<int32_t>{260, 256, 'e', 257, 'o'}));
}

TEST(BpeTest, DecodeMapsCharactersBackToBytes) {
  StatusOr<Tokenizer> t = Tokenizer::from_vocab(bpe_vocab({"\xC4\xA0 h"}));
  ASSERT_TRUE(t.ok());
  const std::vector<int32_t> ids = {256, 'i', 0xC3, 0xA9};
  EXPECT_EQ(*t->decode(ids, {}), " hi\xC3\xA9");
  // Invalid UTF-8 input is encoded as U+FFFD, like llama.cpp.
  EXPECT_EQ(*t->encode("\xFF", {}), (std::vector<int32_t>{0xEF, 0xBF, 0xBD}));
}

TEST(BpeTest, UnknownPreTokenizerIsAnErrorNamingTheKnownOnes) {
  StatusOr<Tokenizer> t = Tokenizer::from_vocab(bpe_vocab({}, "no-such-pre"));
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("no-such-pre"), std::string::npos);
  EXPECT_NE(t.status().message().find("llama-bpe"), std::string::npos);
  // No pre at all: llama.cpp's "default" set.
  EXPECT_TRUE(Tokenizer::from_vocab(bpe_vocab({}, "")).ok());
}

std::vector<std::string> split(std::string_view pre, std::string_view text) {
  const PreTokenizerSpec* spec = find_pre_tokenizer(pre);
  EXPECT_NE(spec, nullptr) << pre;
  if (spec == nullptr) return {};
  StatusOr<PreTokenizer> compiled = PreTokenizer::compile(*spec);
  EXPECT_TRUE(compiled.ok()) << compiled.status().to_string();
  std::vector<TextPiece> pieces;
  EXPECT_TRUE(compiled->split(text, &pieces).ok());
  std::vector<std::string> out;
  for (const TextPiece& p : pieces) out.emplace_back(text.substr(p.offset, p.length));
  return out;
}

using Words = std::vector<std::string>;

TEST(PreTokenizerTest, Gpt2SplitsWordsContractionsAndSpaces) {
  EXPECT_EQ(split("gpt-2", "Hello world's  x\n"),
            (Words{"Hello", " world", "'s", " ", " x", "\n"}));
  EXPECT_EQ(split("gpt-2", "a\tb 42!?"), (Words{"a", "\t", "b", " 42", "!?"}));
}

TEST(PreTokenizerTest, Llama3GroupsDigitsByThreeAndContractionsIgnoreCase) {
  EXPECT_EQ(split("llama-bpe", "12345 I'VE\n\n x"),
            (Words{"123", "45", " I", "'VE", "\n\n", " x"}));
  EXPECT_EQ(split("qwen2", "123"), (Words{"1", "2", "3"}));
}

TEST(PreTokenizerTest, SequencesSplitEachPieceAgain) {
  // starcoder: digits first, then the GPT-2 pattern inside what is left.
  EXPECT_EQ(split("starcoder", "ab12 c"), (Words{"ab", "1", "2", " c"}));
  // deepseek-coder: newlines alone, letters with one leading space, CJK runs, single digits.
  EXPECT_EQ(split("deepseek-coder",
                  "x\n \xE4\xBD\xA0\xE5\xA5\xBD"
                  "12"),
            (Words{"x", "\n", " ", "\xE4\xBD\xA0\xE5\xA5\xBD", "1", "2"}));
}

TEST(PreTokenizerTest, EveryTableRowCompiles) {
  for (std::string_view name : pre_tokenizer_names()) {
    const PreTokenizerSpec* spec = find_pre_tokenizer(name);
    ASSERT_NE(spec, nullptr);
    EXPECT_TRUE(PreTokenizer::compile(*spec).ok()) << name;
  }
  EXPECT_EQ(find_pre_tokenizer("nope"), nullptr);
}

}  // namespace
}  // namespace cellm
