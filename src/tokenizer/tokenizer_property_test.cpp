// Property tests of the tokenizer on random input, for every vocabulary in the shared models
// (llama.cpp's vocabulary files, stories260K, llama-2-tiny-random and the four architecture
// models): thousands of texts from a fixed seed — words, digits, whitespace runs, accents,
// CJK, emoji, combining marks, pieces of the vocabulary's own tokens, special-token text whole
// and cut short, and (in the byte tests) bytes that are not UTF-8 — must keep the promises
// tokenizer.h and streaming_detokenizer.h make:
//   - encode succeeds on any bytes and gives ids inside the vocabulary; without parse_special no
//     control token comes out (only the ones add_special puts at the ends);
//   - parse_special changes nothing for text that holds no control token's text;
//   - decode(encode(text)) == text for SPM (any bytes) and byte-level BPE (valid UTF-8; invalid
//     bytes come back as U+FFFD each, as tokenizer_checks.h's own scanner finds them);
//   - every control token's text alone, parsed, is exactly that token;
//   - random ids streamed one at a time give valid UTF-8 always, exactly decode() when decode() is
//     valid UTF-8, and the text before the first stop string when one is given;
//   - 64 KB runs of one character encode (and decode back where the kind promises it).
// The checks are tokenizer_checks.h's (shared with fuzz/tokenizer_fuzz.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "tokenizer/tokenizer_checks.h"
#include "tokenizer/tokenizer_test_util.h"

namespace cellm {
namespace {

using tokenizer_testing::check_encoding;
using tokenizer_testing::check_round_trip;
using tokenizer_testing::check_stream;
using tokenizer_testing::escaped;
using tokenizer_testing::valid_sequence_length;
using tokenizer_testing::valid_utf8;

// Random text for one vocabulary.
class TextMaker {
 public:
  TextMaker(const Tokenizer& tokenizer, uint32_t seed) : tokenizer_(tokenizer), rng_(seed) {
    for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) {
      if (tokenizer.vocab().type(id) == TokenType::kControl) control_ids_.push_back(id);
    }
  }

  const std::vector<int32_t>& control_ids() const { return control_ids_; }

  // Up to `max_pieces` pieces; with `bad_bytes`, some are bytes that are not UTF-8.
  std::string text(int max_pieces, bool bad_bytes, bool special_text) {
    std::string out;
    const int num_pieces = uniform(0, max_pieces);
    for (int i = 0; i < num_pieces; ++i) append_piece(&out, bad_bytes, special_text);
    return out;
  }

  int uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  std::mt19937& rng() { return rng_; }

 private:
  void append_piece(std::string* out, bool bad_bytes, bool special_text) {
    static constexpr const char* kWords[] = {"the",   "Hello", "world",   "don't", "I'll",  "WE'RE",
                                             "naïve", "café",  "Ünïcödé", "ÆØÅ",   "straße"};
    static constexpr const char* kOther[] = {
        "Привет",
        "Ελληνικά",
        "日本語のテキスト",
        "中文字符",
        "한국어",
        "עברית",
        "العربية",
        "🙂",
        "👨‍👩‍👧",
        "🇺🇸",
        "e\xCC\x81",
        "\xE2\x80\x8B",
        "\xEF\xBB\xBF",
        "▁",
        "Ġ",
        "\t",
        "\r\n",
        "\n\n\n",
        "   ",
        "  \t ",
        "...",
        "!!",
        "?!",
        "```",
        "()",
        "{\"a\": 1}",
        "--",
        "\\n",
        "<",
        ">",
        "|",
        "[",
        "]",
    };
    static constexpr std::string_view kBad[] = {"\x80",
                                                "\xBF",
                                                "\xC0\xAF",
                                                "\xC3",
                                                "\xE2\x82",
                                                "\xED\xA0\x80",
                                                "\xF4\x90\x80\x80",
                                                "\xFF",
                                                "\xFE",
                                                "\xF0\x9F\x98",
                                                "\x04",
                                                "\x1B[0m",
                                                "\x7F",
                                                std::string_view("\0", 1)};
    switch (uniform(0, bad_bytes ? 9 : 8)) {
      case 0:
      case 1:
        *out += kWords[uniform(0, std::size(kWords) - 1)];
        break;
      case 2:
        for (int n = uniform(1, 12); n > 0; --n) *out += static_cast<char>('0' + uniform(0, 9));
        break;
      case 3:
        *out += std::string(static_cast<size_t>(uniform(1, 5)), " \n\t"[uniform(0, 2)]);
        break;
      case 4:
      case 5:
        *out += kOther[uniform(0, std::size(kOther) - 1)];
        break;
      case 6:  // a token of the vocabulary, as the text it stands for
        *out += tokenizer_.token_piece(uniform(0, tokenizer_.vocab_size() - 1), false);
        break;
      case 7:
        *out += static_cast<char>(uniform(0x20, 0x7E));
        break;
      case 8:  // a control token's text, whole or cut short
        if (special_text && !control_ids_.empty()) {
          const std::string_view t =
              tokenizer_.token_text(control_ids_[uniform(0, control_ids_.size() - 1)]);
          *out += t.substr(0, uniform(0, 1) ? t.size() : uniform(0, t.size()));
        } else {
          *out += ' ';
        }
        break;
      default:
        *out += kBad[uniform(0, std::size(kBad) - 1)];
        break;
    }
  }

  const Tokenizer& tokenizer_;
  std::mt19937 rng_;
  std::vector<int32_t> control_ids_;
};

std::vector<int32_t> encode_or_fail(const Tokenizer& tokenizer, std::string_view text,
                                    EncodeOptions options) {
  StatusOr<std::vector<int32_t>> ids = tokenizer.encode(text, options);
  EXPECT_TRUE(ids.ok()) << ids.status().to_string();
  return ids.ok() ? *ids : std::vector<int32_t>{};
}

constexpr int kTextsPerVocabulary = 400;

class TokenizerPropertyTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    // Loaded once per vocabulary: the large ones take seconds under ASan.
    static std::map<std::string, std::optional<Tokenizer>> loaded;
    auto [it, inserted] = loaded.try_emplace(GetParam());
    if (inserted) it->second = testing::load_tokenizer(GetParam());
    tokenizer_ = it->second;
    ASSERT_TRUE(tokenizer_.has_value()) << GetParam();
  }
  std::optional<Tokenizer> tokenizer_;
};

TEST_P(TokenizerPropertyTest, AnyBytesEncodeToIdsInsideTheVocabularyAndNoUnaskedControlToken) {
  const Tokenizer& tok = *tokenizer_;
  TextMaker maker(tok, 1);
  for (int n = 0; n < kTextsPerVocabulary; ++n) {
    const std::string text = maker.text(24, /*bad_bytes=*/true, /*special_text=*/true);
    for (const bool add_special : {false, true}) {
      for (const bool parse_special : {false, true}) {
        EXPECT_EQ(check_encoding(tok, text, {add_special, parse_special}), "") << GetParam();
      }
    }
  }
}

TEST_P(TokenizerPropertyTest, ParsingSpecialTokensChangesNothingForTextWithoutTheirText) {
  const Tokenizer& tok = *tokenizer_;
  TextMaker maker(tok, 2);
  for (int n = 0; n < kTextsPerVocabulary; ++n) {
    const std::string text = maker.text(24, /*bad_bytes=*/false, /*special_text=*/false);
    const bool holds_special_text =
        std::any_of(maker.control_ids().begin(), maker.control_ids().end(), [&](int32_t id) {
          const std::string_view t = tok.token_text(id);
          return !t.empty() && text.find(t) != std::string::npos;
        });
    if (holds_special_text) continue;
    EXPECT_EQ(encode_or_fail(tok, text, {false, true}), encode_or_fail(tok, text, {false, false}))
        << GetParam() << ": " << escaped(text);
  }
}

TEST_P(TokenizerPropertyTest, DecodeGivesTheTextBackAsTheVocabularyKindPromises) {
  const Tokenizer& tok = *tokenizer_;
  if (tok.kind() == VocabKind::kWpm) GTEST_SKIP() << "WordPiece decodes to its normalized form";
  TextMaker maker(tok, 3);
  for (int n = 0; n < kTextsPerVocabulary; ++n) {
    const std::string text = maker.text(24, /*bad_bytes=*/true, /*special_text=*/false);
    EXPECT_EQ(check_round_trip(tok, text), "") << GetParam();
  }
}

TEST_P(TokenizerPropertyTest, EachControlTokensTextAloneParsesToExactlyThatToken) {
  const Tokenizer& tok = *tokenizer_;
  TextMaker maker(tok, 4);
  int num_checked = 0;
  for (const int32_t id : maker.control_ids()) {
    const std::string_view text = tok.token_text(id);
    if (text.empty()) continue;
    // Another control token with the same text takes the match (the lowest id wins ties).
    if (tok.token_id(text) != id) continue;
    EXPECT_EQ(encode_or_fail(tok, text, {false, true}), std::vector<int32_t>{id})
        << GetParam() << ": " << escaped(text);
    ++num_checked;
  }
  if (maker.control_ids().size() > 1) {
    EXPECT_GT(num_checked, 0) << GetParam();
  }
}

TEST_P(TokenizerPropertyTest, StreamedRandomIdsAreValidUtf8AndAddUpToDecodeUntilAStopString) {
  const Tokenizer& tok = *tokenizer_;
  TextMaker maker(tok, 5);
  std::vector<int32_t> byte_ids;
  for (int32_t id = 0; id < tok.vocab_size(); ++id) {
    if (tok.vocab().type(id) == TokenType::kByte) byte_ids.push_back(id);
  }
  int num_valid = 0;
  for (int n = 0; n < kTextsPerVocabulary; ++n) {
    std::vector<int32_t> ids(static_cast<size_t>(maker.uniform(0, 16)));
    for (int32_t& id : ids) {
      const bool byte_token = !byte_ids.empty() && maker.uniform(0, 4) == 0;
      id = byte_token ? byte_ids[maker.uniform(0, byte_ids.size() - 1)]
                      : maker.uniform(0, tok.vocab_size() - 1);
    }
    const DecodeOptions options{.render_special = maker.uniform(0, 1) == 1,
                                .strip_leading_space = maker.uniform(0, 1) == 1};
    StatusOr<std::string> decoded = tok.decode(ids, options);
    ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
    // Half the time a stop string cut from the decoded text itself (whole characters).
    std::string stop;
    if (valid_utf8(*decoded) && decoded->size() >= 2 && maker.uniform(0, 1) == 1) {
      size_t begin = static_cast<size_t>(maker.uniform(0, decoded->size() - 1));
      while (begin > 0 && valid_sequence_length(*decoded, begin) == 0) --begin;
      stop = decoded->substr(begin, 1 + maker.uniform(0, 6));
      if (!valid_utf8(stop)) stop.clear();
    }
    if (valid_utf8(*decoded)) ++num_valid;
    EXPECT_EQ(check_stream(tok, ids, options, stop), "") << GetParam();
  }
  EXPECT_GT(num_valid, kTextsPerVocabulary / 8) << GetParam();
}

// A prompt can be one long run: a pasted blob, a wall of spaces, a file of bad bytes. Each must
// encode (BERT's pattern once ran out of PCRE2's JIT stack at 64 KB of U+FFFD) and, for SPM and
// byte-level BPE, decode back.
TEST_P(TokenizerPropertyTest, LongRunsOfOneCharacterEncodeAndDecodeBack) {
  const Tokenizer& tok = *tokenizer_;
  for (const std::string_view unit : {"a", "ab", " ", "\n", "7", "\xE4\xB8\xAD", "\xFF",
                                      "\xEF\xBF\xBD", "<|", "\xC3\xA9", "\x01"}) {
    std::string text;
    while (text.size() < 64 * 1024) text += unit;
    EXPECT_EQ(check_encoding(tok, text, {false, true}), "") << GetParam() << " " << escaped(unit);
    EXPECT_EQ(check_round_trip(tok, text).substr(0, 200), "") << GetParam() << " " << escaped(unit);
  }
}

INSTANTIATE_TEST_SUITE_P(EveryVocabulary, TokenizerPropertyTest,
                         ::testing::ValuesIn(testing::every_test_vocabulary()),
                         testing::vocabulary_test_name);

}  // namespace
}  // namespace cellm
