// StringPattern against an independent matcher: the standard library's ECMAScript regex
// (std::wregex over code points, regex_search: a JSON Schema pattern matches anywhere). Every
// string of a small alphabet up to three code points and random longer ones are matched by both;
// every prefix of an accepted string must be live; a live state that cannot end yet must have a
// code point that keeps it live (so a walker is never stranded); and what the compiler cannot
// read as a set of strings is refused by name.
#include "batching/string_pattern.h"

#include <gtest/gtest.h>

#include <random>
#include <regex>
#include <string>
#include <vector>

namespace cellm {
namespace {

std::wstring widen(const std::u32string& text) { return std::wstring(text.begin(), text.end()); }

std::u32string code_points(const std::string& utf8) {
  std::u32string out;
  for (size_t i = 0; i < utf8.size();) {
    const auto b = static_cast<unsigned char>(utf8[i]);
    const int extra = b < 0x80 ? 0 : b < 0xE0 ? 1 : b < 0xF0 ? 2 : 3;
    char32_t v = extra == 0 ? b : b & (0x3F >> extra);
    for (int k = 1; k <= extra; ++k)
      v = (v << 6) | (static_cast<unsigned char>(utf8[i + k]) & 0x3F);
    out.push_back(v);
    i += static_cast<size_t>(extra) + 1;
  }
  return out;
}

struct Case {
  std::string pattern;
  uint32_t min_length;
  uint32_t max_length;
};

// Walks `text`, checking the walker's promises on the way; returns whether it is accepted.
bool walk(const StringPattern& p, const std::u32string& text, const std::string& trace) {
  int32_t state = p.start();
  std::vector<int32_t> states = {state};
  for (const char32_t c : text) {
    state = p.next(state, static_cast<uint32_t>(c));
    if (state == StringPattern::kDead) return false;
    states.push_back(state);
  }
  const bool accepted = p.accepts(state, static_cast<uint32_t>(text.size()));
  for (size_t i = 0; i < states.size(); ++i) {
    const auto length = static_cast<uint32_t>(i);
    if (accepted) {
      EXPECT_TRUE(p.live(states[i], length)) << trace << " prefix " << i;
    }
    if (p.live(states[i], length) && !p.accepts(states[i], length)) {
      EXPECT_TRUE(p.any_live(states[i], length, 0, 0x10FFFF)) << trace << " stranded at " << i;
    }
  }
  return accepted;
}

TEST(StringPatternTest, MatchesWhatAnEcmaScriptRegexSearchMatchesWithinTheLengths) {
  const std::vector<std::string> patterns = {
      "^[a-c]+$",
      "abc",
      "^a|b$",
      "^(ab|a)*c?$",
      "[0-9]{2,3}-\\d",
      "^\\d{2}-\\d$",
      "^[^a]*$",
      "(a|é)+x",
      "^.{2,4}$",
      "^$",
      "^\\w+@\\w\\.c$",
      "x*",
      "^(?:a{2}){1,2}$",
      "\\sa",
      "^\\S+$",
      "é|€",
      "^[a-c\\d_-]+$",
      "^é\\x41$",
      "a.b",
      "^(a|b)*abb$",
      "^[^\\d\\s]{3}$",
      "b+?c",
      "^(a|)+$",
      "[€-😀]",
      "^[\\W]a",
  };
  const std::vector<std::pair<uint32_t, uint32_t>> lengths = {
      {0, StringPattern::kUnbounded}, {2, 5}, {3, 3}, {0, 2}, {4, StringPattern::kUnbounded}};
  const std::u32string alphabet = U"abcx05-@. é€😀A_\n";
  std::mt19937 rng(20261205);
  for (const std::string& pattern : patterns) {
    const std::wregex oracle(widen(code_points(pattern)), std::regex::ECMAScript);
    for (const auto& [min_length, max_length] : lengths) {
      const std::string trace = pattern + " [" + std::to_string(min_length) + ", " +
                                std::to_string(static_cast<int64_t>(max_length)) + "]";
      StatusOr<std::shared_ptr<const StringPattern>> compiled =
          StringPattern::compile(pattern, min_length, max_length);
      ASSERT_TRUE(compiled.ok()) << trace << ": " << compiled.status().message();
      const StringPattern& p = **compiled;
      std::vector<std::u32string> texts = {U""};
      std::vector<std::u32string> layer = {U""};
      for (int n = 0; n < 3; ++n) {  // every string of up to three code points
        std::vector<std::u32string> longer;
        for (const std::u32string& text : layer) {
          for (const char32_t c : alphabet) longer.push_back(text + c);
        }
        texts.insert(texts.end(), longer.begin(), longer.end());
        layer = std::move(longer);
      }
      for (int r = 0; r < 1500; ++r) {  // and longer ones
        std::u32string text;
        const size_t size = 4 + rng() % 6;
        for (size_t i = 0; i < size; ++i) text.push_back(alphabet[rng() % alphabet.size()]);
        texts.push_back(text);
      }
      int num_accepted = 0;
      for (const std::u32string& text : texts) {
        const bool expected = std::regex_search(widen(text), oracle) && text.size() >= min_length &&
                              text.size() <= max_length;
        const bool accepted = walk(p, text, trace);
        num_accepted += accepted;
        ASSERT_EQ(accepted, expected)
            << trace << " on \"" << std::string(text.begin(), text.end()) << "\"";
      }
      if (num_accepted > 0) {
        EXPECT_TRUE(p.matches_something()) << trace;
      }
    }
  }
}

// The product of two patterns takes a string exactly when both do, within its own lengths, and
// keeps the walker's promises (walk()): every string of up to three code points of an alphabet,
// and random walks of the product.
TEST(StringPatternTest, AnIntersectionMatchesWhatBothMatch) {
  const std::vector<std::pair<std::string, std::string>> pairs = {
      {"^[a-c]+$", "b"},
      {"^(ab|a)*c?$", "^.{2,4}$"},
      {"[0-9]{2,3}", "^\\d-?\\d*$"},
      {"a|é", "^[^b]*$"},
      {"^x*$", "^a"},
      {"^(a|b)*abb$", "(b|c)a"},
      {"[€-😀]", "^\\S+$"},
  };
  const std::vector<std::pair<uint32_t, uint32_t>> lengths = {
      {0, StringPattern::kUnbounded}, {2, 5}, {1, 1}};
  const std::u32string alphabet = U"abcx05-é€😀 ";
  std::mt19937 rng(7);
  for (const auto& [first, second] : pairs) {
    const auto a = StringPattern::compile(first, 0, StringPattern::kUnbounded);
    const auto b = StringPattern::compile(second, 0, StringPattern::kUnbounded);
    ASSERT_TRUE(a.ok() && b.ok()) << first << " " << second;
    for (const auto& [min_length, max_length] : lengths) {
      const std::string trace = first + " & " + second + " [" + std::to_string(min_length) + "]";
      const auto both = StringPattern::intersect(**a, **b, min_length, max_length);
      ASSERT_TRUE(both.ok()) << trace << ": " << both.status().message();
      const auto within = [&](size_t n) { return n >= min_length && n <= max_length; };
      std::vector<std::u32string> texts = {U""};
      for (size_t begin = 0; texts.size() < 2000;) {  // breadth first: lengths 0 to 3
        const size_t end = texts.size();
        if (texts[end - 1].size() == 3) break;
        for (size_t i = begin; i < end; ++i) {
          for (const char32_t c : alphabet) texts.push_back(texts[i] + c);
        }
        begin = end;
      }
      for (const std::u32string& text : texts) {
        const bool expected =
            within(text.size()) && walk(**a, text, trace + " a") && walk(**b, text, trace + " b");
        ASSERT_EQ(walk(**both, text, trace), expected) << trace << " on " << text.size();
      }
      // Random walks of the product: live prefixes go on, ends are matches of both.
      for (int i = 0; i < 200; ++i) {
        const StringPattern& p = **both;
        if (!p.matches_something()) break;
        std::u32string text;
        int32_t state = p.start();
        while (!(p.accepts(state, static_cast<uint32_t>(text.size())) && rng() % 3 == 0)) {
          std::vector<char32_t> next;
          for (const char32_t c : alphabet) {
            if (p.live(p.next(state, c), static_cast<uint32_t>(text.size()) + 1)) next.push_back(c);
          }
          if (next.empty()) break;
          text.push_back(next[rng() % next.size()]);
          state = p.next(state, text.back());
          if (text.size() > 12) break;
        }
        if (!p.accepts(state, static_cast<uint32_t>(text.size()))) continue;
        EXPECT_TRUE(within(text.size()) && walk(**a, text, trace) && walk(**b, text, trace))
            << trace;
      }
    }
  }
}

TEST(StringPatternTest, ADeadEndIsNeverLive) {
  // "ab" then only digits; at most four code points: after "ab12" nothing may follow but the end.
  StatusOr<std::shared_ptr<const StringPattern>> compiled =
      StringPattern::compile("^ab\\d*$", 0, 4);
  ASSERT_TRUE(compiled.ok());
  const StringPattern& p = **compiled;
  int32_t s = p.start();
  EXPECT_TRUE(p.live(s, 0));
  EXPECT_FALSE(p.accepts(s, 0));
  EXPECT_EQ(p.next(s, 'b'), StringPattern::kDead);
  s = p.next(p.next(s, 'a'), 'b');
  EXPECT_TRUE(p.accepts(s, 2));
  EXPECT_TRUE(p.any_live(s, 2, '0', '9'));
  EXPECT_FALSE(p.any_live(s, 2, 'a', 'z'));
  s = p.next(p.next(s, '1'), '2');
  EXPECT_TRUE(p.accepts(s, 4));
  EXPECT_FALSE(p.any_live(s, 4, 0, 0x10FFFF));  // the fifth code point would pass maxLength
  // No string of at least five code points matches "^ab$" or lies within [5, 4].
  EXPECT_FALSE(
      (*StringPattern::compile("^ab$", 5, StringPattern::kUnbounded))->matches_something());
  EXPECT_FALSE((*StringPattern::compile("a", 5, 4))->matches_something());
}

TEST(StringPatternTest, ControlCharactersWithoutATwoCharacterEscapeAreNeverWritten) {
  // U+0001 matches the pattern but a JSON string could only hold it as \u0001.
  StatusOr<std::shared_ptr<const StringPattern>> compiled =
      StringPattern::compile("^[\\x01\\n]$", 0, StringPattern::kUnbounded);
  ASSERT_TRUE(compiled.ok());
  EXPECT_EQ((*compiled)->next(0, 1), StringPattern::kDead);
  EXPECT_TRUE((*compiled)->accepts((*compiled)->next(0, '\n'), 1));
  EXPECT_FALSE(
      (*StringPattern::compile("^\\x01$", 0, StringPattern::kUnbounded))->matches_something());
}

TEST(StringPatternTest, WhatIsNotASetOfStringsIsRefusedByName) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"(a)\\1", "backreferences"},
      {"(?<n>a)\\k<n>", "backreferences"},
      {"a(?=b)", "lookaround"},
      {"(?<!a)b", "lookaround"},
      {"\\bword", "word boundaries"},
      {"\\p{L}", "Unicode property"},
      {"\\Z", "the escape \\Z"},
      {"a{1001}", "above 1000"},
      {"a{3,2}", "below its minimum"},
      {"(a", "unterminated group"},
      {"a)", "unmatched ')'"},
      {"[a", "unterminated character class"},
      {"[z-a]", "out of order"},
      {"*a", "nothing to repeat"},
      {"a**", "nothing to repeat"},
      {"^*", "quantifier after an assertion"},
      {"\xff", "not valid UTF-8"},
      {"((a{1000}){1000})", "too many"},
      {"(a|b)*a(a|b){12}", "automaton states"},
  };
  for (const auto& [pattern, why] : cases) {
    StatusOr<std::shared_ptr<const StringPattern>> compiled =
        StringPattern::compile(pattern, 0, StringPattern::kUnbounded);
    ASSERT_FALSE(compiled.ok()) << pattern;
    EXPECT_NE(compiled.status().message().find(why), std::string::npos)
        << pattern << ": " << compiled.status().message();
  }
}

TEST(StringPatternTest, APatternTooCostlyToCompileIsRefusedNotComputed) {
  // 1,000 one-character ranges (2,001 classes) a thousand times: about 10^9 steps of liveness.
  std::string pattern = "^[";
  for (uint32_t c = 0x1000; c < 0x1000 + 2000; c += 2) {  // three UTF-8 bytes each
    pattern += static_cast<char>(0xE0 | (c >> 12));
    pattern += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    pattern += static_cast<char>(0x80 | (c & 0x3F));
  }
  pattern += "]{1000}$";
  StatusOr<std::shared_ptr<const StringPattern>> compiled =
      StringPattern::compile(pattern, 0, StringPattern::kUnbounded);
  ASSERT_FALSE(compiled.ok());
  EXPECT_NE(compiled.status().message().find("too complex"), std::string::npos)
      << compiled.status().message();
}

TEST(StringPatternTest, LiteralBracesAndEscapedPunctuationStandForThemselves) {
  for (const auto& [pattern, text] :
       std::vector<std::pair<std::string, std::u32string>>{{"^a{$", U"a{"},
                                                           {"^\\{\\}\\.\\-\\/$", U"{}.-/"},
                                                           {"^x{,2}$", U"x{,2}"},
                                                           {"^]$", U"]"}}) {
    StatusOr<std::shared_ptr<const StringPattern>> compiled =
        StringPattern::compile(pattern, 0, StringPattern::kUnbounded);
    ASSERT_TRUE(compiled.ok()) << pattern << ": " << compiled.status().message();
    EXPECT_TRUE(walk(**compiled, text, pattern)) << pattern;
  }
}

}  // namespace
}  // namespace cellm
