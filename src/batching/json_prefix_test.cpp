#include "batching/json_prefix.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "batching/json_oracle_test_util.h"
#include "batching/random_json_test_util.h"

namespace cellm::testing {
namespace {

using nlohmann::json;

constexpr int kAccepted = -1;

// Feeds `text` byte by byte: the index of the first refused byte, or kAccepted.
int first_refused_byte(JsonPrefix& prefix, std::string_view text) {
  for (size_t i = 0; i < text.size(); ++i) {
    if (!prefix.feed(static_cast<unsigned char>(text[i]))) return static_cast<int>(i);
  }
  return kAccepted;
}

// Bytes outside printable ASCII as \xNN, for failure messages.
std::string printable(std::string_view text) {
  std::string out;
  for (char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte < 0x7F) {
      out.push_back(c);
    } else {
      out += "\\x";
      out.push_back("0123456789ABCDEF"[byte >> 4]);
      out.push_back("0123456789ABCDEF"[byte & 0xF]);
    }
  }
  return out;
}

// ----- Tests. -----

TEST(JsonPrefixTest, TheStateIsASmallTriviallyCopyableValue) {
  static_assert(std::is_trivially_copyable_v<JsonPrefix>);
  EXPECT_LE(sizeof(JsonPrefix), 32u);
}

struct HandCase {
  std::string_view text;
  bool object_only;
  int refused_at;  // the index of the first refused byte, or kAccepted
  bool complete;   // when accepted
};

TEST(JsonPrefixTest, HandWrittenTextsAreAcceptedRefusedAndCompletedAsTheGrammarSays) {
  const HandCase cases[] = {
      // Objects, and object_only at the top.
      {"{}", true, kAccepted, true},
      {" \t\r\n{ \t\r\n\"a\" \t\r\n: \t\r\n1 \t\r\n} \t\r\n", true, kAccepted, true},
      {"{\"a\":1", true, kAccepted, false},
      {"{\"a\" : [1, 2.5, -3e4, true, false, null, \"x\", {}], \"b\":{\"c\":{}}}", true, kAccepted,
       true},
      {"{\"\\u00e9\":{\"\":[]}}", true, kAccepted, true},
      {"{\"a\" 1}", true, 5, false},
      {"{\"a\":1,}", true, 7, false},
      {"{,}", true, 1, false},
      {"{1:2}", true, 1, false},
      {"{\"a\":}", true, 5, false},
      {"{\"a\"::1}", true, 5, false},
      {"{\"a\":1 \"b\":2}", true, 7, false},
      {"{\"a\":1}x", true, 7, false},
      {"{\"a\":1} {}", true, 8, false},
      {"{]", true, 1, false},
      {"{\"a\":[}", true, 6, false},
      {"{\"a\":[1}", true, 7, false},
      {"{\"a\":1.}", true, 7, false},
      {"[", true, 0, false},
      {"\"x\"", true, 0, false},
      {"1", true, 0, false},
      {"  true", true, 2, false},
      {"", true, kAccepted, false},
      {"   ", true, kAccepted, false},
      // Arrays, and any value at the top.
      {"[]", false, kAccepted, true},
      {"[[]", false, kAccepted, false},
      {"[1,]", false, 3, false},
      {"[,1]", false, 1, false},
      {"[1 2]", false, 3, false},
      {"[1,,2]", false, 3, false},
      {"[]]", false, 2, false},
      {"[}", false, 1, false},
      {"\"x\"", false, kAccepted, true},
      {"true", false, kAccepted, true},
      {"tru", false, kAccepted, false},
      {"trux", false, 3, false},
      {"null ", false, kAccepted, true},
      {"False", false, 0, false},
      // Numbers.
      {"0", false, kAccepted, true},
      {"-0", false, kAccepted, true},
      {"12", false, kAccepted, true},
      {"-", false, kAccepted, false},
      {"12.", false, kAccepted, false},
      {"1.5", false, kAccepted, true},
      {"1.5e", false, kAccepted, false},
      {"1.5e+", false, kAccepted, false},
      {"1.5E-07", false, kAccepted, true},
      {"1e05 ", false, kAccepted, true},
      {"[-1.5e-3,0,10E2,1e5]", false, kAccepted, true},
      {"01", false, 1, false},
      {"-01", false, 2, false},
      {"00", false, 1, false},
      {"1.e5", false, 2, false},
      {".5", false, 0, false},
      {"+1", false, 0, false},
      {"-a", false, 1, false},
      {"1e+-1", false, 3, false},
      {"1.2.3", false, 3, false},
      {"1ee", false, 2, false},
      {"0x1", false, 1, false},
      {"1 2", false, 2, false},
      {"[-]", false, 2, false},
      {"[1.]", false, 3, false},
      {"NaN", false, 0, false},
      {"-Infinity", false, 1, false},
      // Strings: escapes, \u surrogate pairs, control characters.
      {"\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\"", false, kAccepted, true},
      {"\"\\x\"", false, 2, false},
      {"\"\\u00e9\\u00E9\"", false, kAccepted, true},
      {"\"\\u12G4\"", false, 5, false},
      {"\"\\uD83D\\uDE00\"", false, kAccepted, true},
      {"\"\\ud83d\\ude00\"", false, kAccepted, true},
      {"\"\\uD83D", false, kAccepted, false},
      {"\"\\uD83D\"", false, 7, false},
      {"\"\\uD83D\\n\"", false, 8, false},
      {"\"\\uD83D\\u0041\"", false, 9, false},
      {"\"\\uD83D\\uD83D\"", false, 10, false},
      {"\"\\uDE00\"", false, 4, false},
      {"\"tab\there\"", false, 4, false},
      {"\"\x7F\"", false, kAccepted, true},
      // UTF-8 inside strings.
      {"\"\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\"", false, kAccepted, true},
      {"\"\xE2\x82", false, kAccepted, false},
      {"\"\x80\"", false, 1, false},
      {"\"\xC0\x80\"", false, 1, false},
      {"\"\xC1\xBF\"", false, 1, false},
      {"\"\xF5\x80\x80\x80\"", false, 1, false},
      {"\"\xFF\"", false, 1, false},
      {"\"\xE0\x80\x80\"", false, 2, false},
      {"\"\xE0\xA0\x80\"", false, kAccepted, true},
      {"\"\xED\xA0\x80\"", false, 2, false},
      {"\"\xED\x9F\xBF\"", false, kAccepted, true},
      {"\"\xF0\x8F\xBF\xBF\"", false, 2, false},
      {"\"\xF0\x90\x80\x80\"", false, kAccepted, true},
      {"\"\xF4\x90\x80\x80\"", false, 2, false},
      {"\"\xF4\x8F\xBF\xBF\"", false, kAccepted, true},
      {"\"\xC3\"", false, 2, false},
      {"\"\xE2\x82\xC3", false, 3, false},
      // Only JSON's whitespace; no comments, BOM or NUL.
      {"\f{}", true, 0, false},
      {"\v{}", true, 0, false},
      {"{}\f", true, 2, false},
      {"\xC2\xA0{}", true, 0, false},
      {"{}//", true, 2, false},
      {"/*x*/{}", true, 0, false},
      {"\xEF\xBB\xBF{}", true, 0, false},
      {std::string_view("{\0", 2), true, 1, false},
      {std::string_view("{}\0", 3), true, 2, false},
  };
  for (const HandCase& c : cases) {
    JsonPrefix prefix(c.object_only);
    EXPECT_EQ(first_refused_byte(prefix, c.text), c.refused_at) << printable(c.text);
    if (c.refused_at == kAccepted) {
      EXPECT_EQ(prefix.complete(), c.complete) << printable(c.text);
    }
    EXPECT_EQ(JsonPrefix(c.object_only).accepts(c.text), c.refused_at == kAccepted);
  }
}

TEST(JsonPrefixTest, AWhitespaceRunLongerThanItsLimitIsRefusedBetweenTokensOnly) {
  JsonPrefix limited(/*object_only=*/true, /*max_whitespace_run=*/3);
  EXPECT_EQ(first_refused_byte(limited, " \n\t{  \n\"a  b   c\"\r\n :1 \t,\"d\":[ 2 ,   3]  }   "),
            kAccepted);
  EXPECT_TRUE(limited.complete());
  for (const std::string_view text : {"    {", "{    \"a\":1}", "{\"a\"    :1}", "{\"a\":1    }",
                                      "{\"a\":[1,    2]}", "{\"a\":1}    "}) {
    JsonPrefix prefix(true, 3);
    const size_t fourth = text.find("    ") + 3;
    EXPECT_EQ(first_refused_byte(prefix, text), static_cast<int>(fourth)) << text;
  }
  JsonPrefix unlimited;
  EXPECT_EQ(first_refused_byte(unlimited, std::string(1000, ' ') + "{" + std::string(1000, '\n')),
            kAccepted);
}

TEST(JsonPrefixTest, APlainStringPieceIsAcceptedWhereverAStringIsBetweenCharacters) {
  EXPECT_TRUE(JsonPrefix::plain_string_piece("a b/c\xC3\xA9\xF0\x9F\x98\x80"));
  for (const std::string_view piece : {"a\"", "\\n", "a\nb", "\xC3", "\xA9", "\xED\xA0\x80"}) {
    EXPECT_FALSE(JsonPrefix::plain_string_piece(piece)) << printable(piece);
  }
  // Inside strings of every kind: a key, a value, in an array, after an escape or a character.
  std::vector<JsonPrefix> inside;
  for (const std::string_view text :
       {"{\"", "{\"k\": \"ab", "[1, \"", "{\"a\": [\"\\n", "[\"\xC3\xA9", "[\"\\ud83d\\ude00"}) {
    JsonPrefix prefix;
    JsonPrefix any(/*object_only=*/false);
    ASSERT_TRUE(prefix.feed(text) || any.feed(text)) << printable(text);
    inside.push_back(text[0] == '{' ? prefix : any);
    ASSERT_TRUE(inside.back().between_string_characters()) << printable(text);
  }
  std::mt19937 rng(5);
  int num_plain = 0;
  for (int n = 0; n < 20000; ++n) {
    std::string piece;
    for (int k = 1 + static_cast<int>(rng() % 6); k > 0; --k) {
      static constexpr char kBytes[] = "ab \"\\\n\x7F\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\xED\xC0";
      piece.push_back(rng() % 3 == 0 ? static_cast<char>(rng() % 256)
                                     : kBytes[rng() % (sizeof(kBytes) - 1)]);
    }
    if (!JsonPrefix::plain_string_piece(piece)) continue;
    ++num_plain;
    for (JsonPrefix prefix : inside) {
      ASSERT_TRUE(prefix.feed(piece)) << printable(piece);
      EXPECT_TRUE(prefix.between_string_characters()) << printable(piece);
    }
  }
  EXPECT_GT(num_plain, 1000) << "the random pieces hold too few plain ones to show anything";
}

TEST(JsonPrefixTest, DepthCountsOpenContainersUpToSixtyFour) {
  JsonPrefix prefix;
  ASSERT_TRUE(prefix.feed("{\"a\":[1,{\"b\":[[]"));
  EXPECT_EQ(prefix.depth(), 4);
  std::string deepest;  // {"k":[{"k":[ ... 64 deep, alternating
  for (int depth = 0; depth < JsonPrefix::kMaxDepth; ++depth)
    deepest += depth % 2 ? "[" : "{\"k\":";
  JsonPrefix deep;
  ASSERT_TRUE(deep.feed(deepest));
  EXPECT_EQ(deep.depth(), JsonPrefix::kMaxDepth);
  EXPECT_FALSE(deep.accepts("["));
  EXPECT_FALSE(deep.accepts("{"));
  EXPECT_FALSE(deep.accepts("}"));
  ASSERT_TRUE(deep.feed("0"));
  for (int depth = JsonPrefix::kMaxDepth; depth > 0; --depth) {
    ASSERT_TRUE(deep.feed(depth % 2 ? "}" : "]")) << depth;
    EXPECT_EQ(deep.depth(), depth - 1);
  }
  EXPECT_TRUE(deep.complete());
  JsonPrefix arrays(false);
  EXPECT_TRUE(arrays.feed(std::string(JsonPrefix::kMaxDepth, '[')));
  EXPECT_FALSE(arrays.feed('['));
  EXPECT_EQ(arrays.depth(), JsonPrefix::kMaxDepth);
}

TEST(JsonPrefixTest, TheOracleCountsTheEndOfTheInputAsOneMoreByteRead) {
  // nlohmann's parse_error position is the count of bytes read, the end of the input included.
  for (std::string text : {"{", "[1,", "\"ab", "1.", "tru", "\"\\u12", "[1", ""}) {
    EXPECT_EQ(oracle_parse(text).error_byte, text.size() + 1) << text;
    EXPECT_TRUE(oracle_is_prefix(text)) << text;
  }
  for (std::string text : {"[1,]", "01", "trx", "\"\\uDC00", "{\"a\" 1"}) {
    EXPECT_EQ(oracle_parse(text).error_byte, text.size()) << text;
    EXPECT_FALSE(oracle_is_prefix(text)) << text;
  }
  // A token cut short, and a \u escape short of its fourth digit, also stop at the end: the
  // oracle completes them before judging.
  EXPECT_EQ(oracle_parse("[0t").error_byte, 4u);
  EXPECT_FALSE(oracle_is_prefix("[0t"));
  EXPECT_TRUE(oracle_is_prefix("[0,t"));
  EXPECT_FALSE(oracle_is_prefix("{\"a\" \"b"));
  EXPECT_TRUE(oracle_is_prefix("{\"a\": \"b"));
  EXPECT_EQ(oracle_parse("\"\\uDC").error_byte, 6u);
  EXPECT_FALSE(oracle_is_prefix("\"\\uDC"));
  EXPECT_TRUE(oracle_is_prefix("\"\\uD8"));
  EXPECT_TRUE(oracle_is_prefix("\"\\uD800\\u"));
  EXPECT_FALSE(oracle_is_prefix("\"\\uD800\\u0"));
  EXPECT_TRUE(oracle_is_prefix("\"\xF0\x90"));
  EXPECT_FALSE(oracle_is_prefix("\"\xF0\x80"));
}

TEST(JsonPrefixTest, NlohmannQuirksTheOracleWorksAroundAreReal) {
  EXPECT_TRUE(json::accept(std::string("{}\0garbage", 10)));  // NUL outside strings: the end
  EXPECT_TRUE(json::accept("\xEF\xBB\xBF{}"));                // a leading BOM is skipped
  EXPECT_FALSE(json::accept("[1e999]"));                      // overflows a double
  EXPECT_FALSE(JsonPrefix().accepts(std::string("{}\0", 3)));
  EXPECT_FALSE(JsonPrefix().accepts("\xEF"));
  EXPECT_TRUE(JsonPrefix(false).accepts("[1e999]"));  // RFC 8259: any number of digits
}

TEST(JsonPrefixTest, EveryPrefixOfAValidTextIsAcceptedAndCompleteExactlyWhereTheOracleParsesIt) {
  RandomJson random(7);
  for (int i = 0; i < 1500; ++i) {
    const bool object_at_top = random.below(2) == 0;
    const json value = object_at_top ? random.object(3) : random.value(3);
    for (int style = 0; style < 3; ++style) {
      const std::string text = serialize(random, value, style);
      ASSERT_TRUE(json::accept(text)) << printable(text);  // the generator's own check
      JsonPrefix prefix(object_at_top && random.below(2) == 0);
      EXPECT_FALSE(prefix.complete());
      for (size_t length = 1; length <= text.size(); ++length) {
        ASSERT_TRUE(prefix.feed(static_cast<unsigned char>(text[length - 1])))
            << printable(text) << " refused at byte " << length - 1;
        ASSERT_EQ(prefix.complete(), json::accept(text.substr(0, length)))
            << printable(text.substr(0, length));
      }
      EXPECT_EQ(prefix.depth(), 0);
    }
  }
}

TEST(JsonPrefixTest, AMutatedTextIsRefusedExactlyWhereTheOracleSaysItStopsBeingAPrefix) {
  RandomJson random(11);
  int compared = 0;
  int refused = 0;
  int overflowing = 0;
  for (int i = 0; i < 10000; ++i) {
    const std::string text = mutate_one_byte(random, serialize(random, random.value(3), i % 3));
    JsonPrefix prefix(false);
    const int refused_at = first_refused_byte(prefix, text);
    const size_t accepted = refused_at == kAccepted ? text.size() : static_cast<size_t>(refused_at);
    const std::string accepted_part = text.substr(0, accepted);
    // RFC 8259 allows numbers of any magnitude; nlohmann refuses those beyond a double's.
    if (oracle_parse(accepted_part).message.find("number overflow") != std::string::npos) {
      ++overflowing;
      continue;
    }
    ++compared;
    EXPECT_TRUE(is_prefix_of_json_text(accepted_part))
        << printable(text) << " accepted " << accepted;
    if (refused_at != kAccepted) {
      ++refused;
      EXPECT_FALSE(is_prefix_of_json_text(text.substr(0, accepted + 1)))
          << printable(text) << " refused at " << refused_at;
    }
    EXPECT_EQ(prefix.complete(), json::accept(accepted_part)) << printable(accepted_part);
  }
  EXPECT_GT(refused, compared / 2);  // most mutations break the text
  EXPECT_LT(overflowing, compared / 100);
}

TEST(JsonPrefixTest, AcceptsLeavesTheStateAloneAndFeedingBytesIsAllOrNothing) {
  RandomJson random(3);
  for (int i = 0; i < 400; ++i) {
    std::string text = serialize(random, random.value(3), i % 3);
    if (i % 2 == 1) text = mutate_one_byte(random, text);
    JsonPrefix prefix(false);
    for (size_t at = 0; at < text.size();) {
      const std::string_view chunk =
          std::string_view(text).substr(at, static_cast<size_t>(1 + random.below(6)));
      const JsonPrefix before = prefix;
      JsonPrefix byte_by_byte = prefix;
      bool all_accepted = true;
      for (char c : chunk) {
        const JsonPrefix before_byte = byte_by_byte;
        if (byte_by_byte.feed(static_cast<unsigned char>(c))) continue;
        EXPECT_EQ(byte_by_byte, before_byte);  // a refused byte changes nothing
        all_accepted = false;
        break;
      }
      EXPECT_EQ(prefix.accepts(chunk), all_accepted) << printable(text);
      EXPECT_EQ(prefix, before);
      EXPECT_EQ(prefix.feed(chunk), all_accepted);
      EXPECT_EQ(prefix, all_accepted ? byte_by_byte : before);
      if (!all_accepted) break;
      at += chunk.size();
    }
  }
  JsonPrefix fresh(false);
  EXPECT_FALSE(fresh.feed("[1,]"));
  EXPECT_EQ(fresh, JsonPrefix(false));
  EXPECT_TRUE(fresh.feed(""));
  EXPECT_TRUE(fresh.feed("[1,"));
  EXPECT_EQ(fresh.depth(), 1);
}

}  // namespace
}  // namespace cellm::testing
