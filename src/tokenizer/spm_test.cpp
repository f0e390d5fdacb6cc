// SPM encoding and decoding on hand-built vocabularies: merge order by score, byte fallback,
// the space prefix, special-token parsing, decode's leading-space rule.
#include <gtest/gtest.h>

#include "tokenizer/tokenizer.h"

namespace cellm {
namespace {

// Ids: 0 <unk>, 1 <s>, 2 </s>, 3..: the listed pieces, then <0x00>..<0xFF>.
Vocab spm_vocab(const std::vector<std::pair<std::string, float>>& pieces) {
  Vocab v;
  v.kind = VocabKind::kSpm;
  v.tokens = {"<unk>", "<s>", "</s>"};
  v.scores = {0, 0, 0};
  v.token_types = {TokenType::kUnknown, TokenType::kControl, TokenType::kControl};
  for (const auto& [text, score] : pieces) {
    v.tokens.push_back(text);
    v.scores.push_back(score);
    v.token_types.push_back(TokenType::kNormal);
  }
  for (int b = 0; b < 256; ++b) {
    char hex[8];
    std::snprintf(hex, sizeof(hex), "<0x%02X>", b);
    v.tokens.push_back(hex);
    v.scores.push_back(0);
    v.token_types.push_back(TokenType::kByte);
  }
  v.special = {.bos = 1, .eos = 2, .unk = 0};
  v.add_bos = true;
  v.add_space_prefix = true;
  return v;
}

int32_t byte_id(uint8_t b) { return 3 + 6 + b; }  // after the six pieces of kPieces

const std::vector<std::pair<std::string, float>> kPieces = {
    {"a", -1},
    {"b", -1},
    {"c", -1},
    {"ab", -5},
    {"bc", -2},
    {"\xE2\x96\x81"
     "a",
     -3},
};

Tokenizer make(Vocab v) {
  StatusOr<Tokenizer> t = Tokenizer::from_vocab(std::move(v));
  EXPECT_TRUE(t.ok()) << t.status().to_string();
  return *std::move(t);
}

std::vector<int32_t> encode(const Tokenizer& t, std::string_view text, EncodeOptions o = {}) {
  StatusOr<std::vector<int32_t>> ids = t.encode(text, o);
  EXPECT_TRUE(ids.ok()) << ids.status().to_string();
  return ids.ok() ? *ids : std::vector<int32_t>{};
}

TEST(SpmTest, HighestScoringPairMergesFirst) {
  const Tokenizer t = make(spm_vocab(kPieces));
  Vocab plain = spm_vocab(kPieces);
  plain.add_space_prefix = false;
  const Tokenizer no_prefix = make(plain);
  // "abc": "bc" (-2) beats "ab" (-5); then "a" + "bc" is no token.
  EXPECT_EQ(encode(no_prefix, "abc"), (std::vector<int32_t>{3, 7}));
  // With the prefix: "▁a" (-3) and "bc" (-2): "bc" first, then "▁a".
  EXPECT_EQ(encode(t, "abc"), (std::vector<int32_t>{8, 7}));
}

TEST(SpmTest, UnknownCharactersFallBackToBytes) {
  Vocab v = spm_vocab(kPieces);
  v.add_space_prefix = false;
  const Tokenizer t = make(v);
  // "é" is C3 A9; a space with no "▁" piece is E2 96 81.
  EXPECT_EQ(encode(t, "a\xC3\xA9 "),
            (std::vector<int32_t>{3, byte_id(0xC3), byte_id(0xA9), byte_id(0xE2), byte_id(0x96),
                                  byte_id(0x81)}));
  // No byte tokens: each byte becomes <unk>.
  Vocab no_bytes = v;
  no_bytes.tokens.resize(9), no_bytes.scores.resize(9), no_bytes.token_types.resize(9);
  EXPECT_EQ(encode(make(no_bytes), "\xC3\xA9"), (std::vector<int32_t>{0, 0}));
}

TEST(SpmTest, AddSpecialPutsBosFirstAndSpecialTextIsPlainUnlessParsed) {
  const Tokenizer t = make(spm_vocab(kPieces));
  EXPECT_EQ(encode(t, "a", {.add_special = true}), (std::vector<int32_t>{1, 8}));
  EXPECT_EQ(encode(t, "", {.add_special = true}), (std::vector<int32_t>{1}));
  EXPECT_EQ(encode(t, ""), (std::vector<int32_t>{}));
  // "<s>" as text: "▁" and "<", "s", ">" as bytes.
  const std::vector<int32_t> plain = encode(t, "<s>");
  EXPECT_EQ(plain.size(), 6u);
  EXPECT_EQ(plain[3], byte_id('<'));
  // Parsed: the control token, and the text after it gets the space prefix again.
  EXPECT_EQ(encode(t, "<s>a", {.parse_special = true}), (std::vector<int32_t>{1, 8}));
  EXPECT_EQ(encode(t, "a</s>", {.parse_special = true}), (std::vector<int32_t>{8, 2}));
}

TEST(SpmTest, DecodeTurnsMarkersAndBytesBackAndDropsOneLeadingSpace) {
  const Tokenizer t = make(spm_vocab(kPieces));
  const std::vector<int32_t> ids = {8, byte_id(0xC3), byte_id(0xA9), 2};
  EXPECT_EQ(*t.decode(ids, {}), "a\xC3\xA9");
  EXPECT_EQ(*t.decode(ids, {.render_special = true}), "a\xC3\xA9</s>");
  EXPECT_EQ(*t.decode(ids, {.strip_leading_space = false}), " a\xC3\xA9");
  // BOS first takes the strip: the space of the next piece stays (llama.cpp's detokenizer).
  const std::vector<int32_t> with_bos = {1, 8};
  EXPECT_EQ(*t.decode(with_bos, {}), " a");
  const std::vector<int32_t> bad = {8, 9999};
  StatusOr<std::string> error = t.decode(bad, {});
  ASSERT_FALSE(error.ok());
  EXPECT_NE(error.status().message().find("9999"), std::string::npos);
}

TEST(SpmTest, UserDefinedTokensAreSplitOutEvenWithoutParsing) {
  Vocab v = spm_vocab(kPieces);
  v.tokens.push_back("<tool>");
  v.scores.push_back(0);
  v.token_types.push_back(TokenType::kUserDefined);
  const int32_t tool = v.num_tokens() - 1;
  v.rstrip_ids = {tool};
  const Tokenizer t = make(v);
  EXPECT_EQ(encode(t, "a<tool>  a"), (std::vector<int32_t>{8, tool, 8}));
  EXPECT_EQ(*t.decode(std::vector<int32_t>{tool}, {}), "<tool>");
}

}  // namespace
}  // namespace cellm
