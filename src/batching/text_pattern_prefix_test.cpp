// TextPatternPrefix against the standard library's ECMAScript regex (std::wregex, regex_match:
// the whole text): random walks over the bytes it accepts are never stranded and end in texts the
// regex matches; one-byte mutations it takes whole are matched too; malformed UTF-8 is refused;
// and JsonTokenMask::compute_text equals checking every token with accepts().
#include "batching/text_pattern_prefix.h"

#include <gtest/gtest.h>

#include <random>
#include <regex>
#include <string>
#include <vector>

#include "batching/json_schema_oracle_test_util.h"
#include "batching/json_token_mask.h"

namespace cellm {
namespace {

const std::vector<std::string>& patterns() {
  static const std::vector<std::string> kPatterns = {
      "yes|no|maybe",    "[0-9]{3}-[a-z]+", "(ab|é)*c", "\\w+@\\w+\\.com", ".{2,5}",
      "a\\nb|\"q\"\\\\", "(\\d+,)*\\d+",    "[^a-c]x?", "😀|€{2}|\\t",      "(?:x|y){0,3}z",
  };
  return kPatterns;
}

std::shared_ptr<const StringPattern> compiled(const std::string& pattern) {
  StatusOr<std::shared_ptr<const StringPattern>> p = StringPattern::compile(
      pattern, 0, StringPattern::kUnbounded, StringPattern::Target::kWholeText);
  EXPECT_TRUE(p.ok()) << pattern << ": " << p.status().message();
  return *p;
}

bool oracle_matches(const std::string& pattern, const std::string& text) {
  return std::regex_match(testing::utf8_to_wide(text),
                          std::wregex(testing::utf8_to_wide(pattern), std::regex::ECMAScript));
}

bool takes_whole(const std::shared_ptr<const StringPattern>& p, const std::string& text) {
  TextPatternPrefix walker(p);
  return walker.feed(text) && walker.complete();
}

TEST(TextPatternPrefixTest, RandomWalksAreNeverStrandedAndEndInMatches) {
  std::mt19937 rng(20261205);
  for (const std::string& pattern : patterns()) {
    const std::shared_ptr<const StringPattern> p = compiled(pattern);
    int num_ended = 0;
    for (int walk = 0; walk < 80; ++walk) {
      TextPatternPrefix walker(p);
      std::string text;
      for (int step = 0; step < 60; ++step) {
        if (walker.complete() && rng() % 3 == 0) break;
        std::vector<char> accepted;
        for (int b = 0; b < 256; ++b) {
          const char c = static_cast<char>(b);
          if (walker.accepts(std::string_view(&c, 1))) accepted.push_back(c);
        }
        EXPECT_EQ(accepted.empty(), walker.must_end()) << pattern << " after " << text;
        if (accepted.empty()) break;
        const char c = accepted[rng() % accepted.size()];
        ASSERT_TRUE(walker.feed(std::string_view(&c, 1)));
        text.push_back(c);
      }
      if (!walker.complete()) continue;  // stopped inside a longer match: too long a walk
      ++num_ended;
      EXPECT_TRUE(oracle_matches(pattern, text)) << pattern << ": " << text;
      for (int m = 0; m < 20; ++m) {
        std::string mutated = text;
        const size_t at = rng() % (mutated.size() + 1);
        static const std::string kBytes = "abcxyz0129-,@.\"\\\n\t\xc3\xa9\xe2\x82\xac";
        const char byte = kBytes[rng() % kBytes.size()];
        if (rng() % 2 == 0 && at < mutated.size()) {
          mutated[at] = byte;
        } else {
          mutated.insert(mutated.begin() + static_cast<std::ptrdiff_t>(at), byte);
        }
        if (takes_whole(p, mutated)) {
          EXPECT_TRUE(oracle_matches(pattern, mutated)) << pattern << ": " << mutated;
        }
      }
    }
    EXPECT_GE(num_ended, 20) << pattern;
  }
}

TEST(TextPatternPrefixTest, HandWrittenTextsAreTakenExactlyWhenTheyMatch) {
  for (const auto& [pattern, text] : std::vector<std::pair<std::string, std::string>>{
           {"yes|no|maybe", "yes"},
           {"yes|no|maybe", "ye"},
           {"yes|no|maybe", "yesno"},
           {"yes|no|maybe", "maybe"},
           {"[0-9]{3}-[a-z]+", "123-ab"},
           {"[0-9]{3}-[a-z]+", "12-ab"},
           {"(ab|é)*c", "abééc"},
           {"(ab|é)*c", "aéc"},
           {".{2,5}", "a\nb"},
           {".{2,5}", "😀😀"},
           {"a\\nb|\"q\"\\\\", "\"q\"\\"},
           {"[^a-c]x?", "\t"},
       }) {
    EXPECT_EQ(takes_whole(compiled(pattern), text), oracle_matches(pattern, text))
        << pattern << " on " << text;
  }
}

TEST(TextPatternPrefixTest, MalformedUtf8IsRefusedAtItsFirstWrongByte) {
  const std::shared_ptr<const StringPattern> any = compiled("[^]*");
  TextPatternPrefix walker(any);
  for (const char* bad : {"\x80", "\xc0\x80", "\xc1", "\xed\xa0", "\xe0\x9f", "\xf4\x90", "\xf5",
                          "\xff", "\xc3\x28"}) {
    EXPECT_FALSE(walker.accepts(bad)) << "byte " << static_cast<int>(bad[0] & 0xFF);
  }
  EXPECT_TRUE(walker.accepts("\xed\x9f\xbf\xf4\x8f\xbf\xbf\xc3\xa9"));
  ASSERT_TRUE(walker.feed("\xe2\x82"));  // two of the three bytes of U+20AC
  EXPECT_FALSE(walker.complete());
  EXPECT_FALSE(walker.pattern_place().has_value());
  EXPECT_TRUE(walker.feed("\xac"));
  EXPECT_TRUE(walker.complete());
}

TEST(TextPatternPrefixTest, TheTextMaskIsEveryTokenTheWalkerAccepts) {
  std::mt19937 rng(11);
  std::vector<std::string> vocab = {""};
  for (int b = 1; b < 256; ++b) vocab.emplace_back(1, static_cast<char>(b));
  static const std::string kAlphabet = "abcxyz0129-,@.\"\\\n\tyesnomab";
  for (const char* piece : {"\xc3\xa9", "\xe2\x82\xac", "\xe2\x82", "\xf0\x9f\x98\x80", "yes", "no",
                            "may", "be", "123", "-ab"}) {
    vocab.emplace_back(piece);
  }
  for (int i = 0; i < 2000; ++i) {
    std::string piece;
    const int length = 1 + static_cast<int>(rng() % 5);
    for (int k = 0; k < length; ++k) piece += kAlphabet[rng() % kAlphabet.size()];
    vocab.push_back(piece);
  }
  const JsonTokenMask mask(vocab);
  int num_states = 0;
  for (const std::string& pattern : patterns()) {
    const std::shared_ptr<const StringPattern> p = compiled(pattern);
    for (int generation = 0; generation < 6; ++generation) {
      TextPatternPrefix text(p);
      JsonTokenMask::PatternMaskCache cache;
      for (int step = 0; step < 20 && !text.must_end(); ++step) {
        std::vector<uint8_t> allowed;
        mask.compute_text(text, allowed, &cache);
        ASSERT_EQ(allowed.size(), vocab.size());
        std::vector<int32_t> choices;
        for (size_t t = 0; t < vocab.size(); ++t) {
          const bool expected = !vocab[t].empty() && text.accepts(vocab[t]);
          ASSERT_EQ(allowed[t] != 0, expected) << pattern << ": token '" << vocab[t] << "'";
          ASSERT_EQ(mask.allows_text(text, static_cast<int32_t>(t)), expected);
          if (expected) choices.push_back(static_cast<int32_t>(t));
        }
        ++num_states;
        if (choices.empty()) break;  // complete, and nothing of the vocabulary may follow
        ASSERT_TRUE(text.feed(vocab[static_cast<size_t>(choices[rng() % choices.size()])]));
      }
    }
  }
  EXPECT_GT(num_states, 150);
}

}  // namespace
}  // namespace cellm
