#include "batching/string_format.h"

#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "batching/string_format_oracle_test_util.h"
#include "batching/string_pattern.h"

namespace cellm {
namespace {

using testing::format_outside_cellms_subset;
using testing::oracle_matches_format;

constexpr std::string_view kFormats[] = {"date", "time", "date-time", "duration", "uuid",
                                         "ipv4", "ipv6", "hostname",  "email"};
// The characters the random strings are made of: every one the formats use, and some none do.
constexpr std::string_view kAlphabet = "0123456789abcdefABCDEFTtZzPYMWDHSvx:.-+@_[]\"!#~ /?%=&";

std::shared_ptr<const StringPattern> compile_format(std::string_view name) {
  const std::optional<StringFormat> format = string_format(name);
  if (!format.has_value()) return nullptr;
  StatusOr<std::shared_ptr<const StringPattern>> pattern =
      StringPattern::compile(format->pattern, 0, format->max_length);
  EXPECT_TRUE(pattern.ok()) << name << ": " << pattern.status().message();
  return pattern.ok() ? *pattern : nullptr;
}

struct Example {
  std::string_view format;
  std::string_view text;
  bool valid;  // by the RFCs, as written by hand
};

// Valid and invalid strings of each format, from the RFCs' grammars and examples.
constexpr Example kExamples[] = {
    {"date", "2024-02-29", true},
    {"date", "2000-02-29", true},
    {"date", "0000-02-29", true},
    {"date", "1999-12-31", true},
    {"date", "2023-04-30", true},
    {"date", "2023-02-29", false},
    {"date", "1900-02-29", false},
    {"date", "2023-04-31", false},
    {"date", "2023-13-01", false},
    {"date", "2023-00-10", false},
    {"date", "2023-01-00", false},
    {"date", "2023-01-32", false},
    {"date", "2023-1-01", false},
    {"date", "20230101", false},
    {"time", "23:59:59Z", true},
    {"time", "00:00:00+01:00", true},
    {"time", "12:30:45.123-05:30", true},
    {"time", "08:30:06z", true},
    {"time", "23:59:60Z", true},       // a leap second: valid, outside cellm's subset
    {"time", "01:29:60+01:30", true},  // 23:59:60 UTC
    {"time", "22:59:60Z", false},
    {"time", "24:00:00Z", false},
    {"time", "12:60:00Z", false},
    {"time", "12:00:00", false},
    {"time", "12:00:00+1:00", false},
    {"time", "12:00:00+24:00", false},
    {"time", "12:00:00.Z", false},
    {"date-time", "2024-02-29T23:59:59Z", true},
    {"date-time", "1985-04-12t23:20:50.52z", true},
    {"date-time", "1996-12-19T16:39:57-08:00", true},
    {"date-time", "2024-02-29 23:59:59Z", false},
    {"date-time", "2023-02-29T00:00:00Z", false},
    {"date-time", "2024-02-29T23:59:59", false},
    {"duration", "P4DT12H30M5S", true},
    {"duration", "P1Y", true},
    {"duration", "PT36H", true},
    {"duration", "P1W", true},
    {"duration", "P1M2D", true},
    {"duration", "PT0S", true},
    {"duration", "P2Y3M", true},
    {"duration", "P", false},
    {"duration", "PT", false},
    {"duration", "P1D2Y", false},
    {"duration", "P1Y2D", false},
    {"duration", "PT1H2S", false},
    {"duration", "P1W2D", false},
    {"duration", "P1.5D", false},
    {"duration", "1D", false},
    {"uuid", "2EB8AA08-AA98-11EA-B4AA-73B441D16380", true},
    {"uuid", "2eb8aa08-aa98-11ea-b4aa-73b441d16380", true},
    {"uuid", "00000000-0000-0000-0000-000000000000", true},
    {"uuid", "2eb8aa08-aa98-11ea-b4aa-73b441d1638", false},
    {"uuid", "2eb8aa08aa9811eab4aa73b441d16380", false},
    {"uuid", "2eb8aa08-aa98-11ea-b4aa-73b441d1638g", false},
    {"ipv4", "192.168.0.1", true},
    {"ipv4", "0.0.0.0", true},
    {"ipv4", "255.255.255.255", true},
    {"ipv4", "256.0.0.1", false},
    {"ipv4", "01.2.3.4", false},
    {"ipv4", "1.2.3", false},
    {"ipv4", "1.2.3.4.5", false},
    {"ipv4", "1..2.3", false},
    {"ipv6", "::", true},
    {"ipv6", "::1", true},
    {"ipv6", "1::", true},
    {"ipv6", "2001:db8::ff00:42:8329", true},
    {"ipv6", "::ffff:192.0.2.128", true},
    {"ipv6", "1:2:3:4:5:6:7:8", true},
    {"ipv6", "1:2:3:4:5:6:1.2.3.4", true},
    {"ipv6", "1:2:3:4:5:6:7::", true},
    {"ipv6", "1:2:3:4:5:6:7:8:9", false},
    {"ipv6", "1::2::3", false},
    {"ipv6", "12345::", false},
    {"ipv6", ":1::", false},
    {"ipv6", "::01.2.3.4", false},
    {"ipv6", "1:2:3:4:5:6:7:1.2.3.4", false},
    {"hostname", "example.com", true},
    {"hostname", "a", true},
    {"hostname", "xn--bcher-kva.example", true},
    {"hostname", "1host.a-b.c", true},
    {"hostname", "-a.com", false},
    {"hostname", "a-.com", false},
    {"hostname", "a..b", false},
    {"hostname", "example.com.", false},
    {"hostname", "a_b.com", false},
    {"hostname", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.com", false},
    {"email", "joe.bloggs@example.com", true},
    {"email", "a+b@x.io", true},
    {"email", "o'reilly@a.b", true},
    {"email", "\"joe bloggs\"@example.com", true},  // quoted: outside cellm's subset
    {"email", "a@[127.0.0.1]", true},               // an address literal: outside it too
    {"email", "a..b@x.com", false},
    {"email", ".a@x.com", false},
    {"email", "a@", false},
    {"email", "@x.com", false},
    {"email", "a@-x.com", false},
    {"email", "ab", false},
    {"uri", "http://www.example.com/", true},
    {"uri", "https://user:pw@example.com:8080/a/b;c?q=1&r=%20#frag/?", true},
    {"uri", "mailto:joe@example.com", true},
    {"uri", "urn:isbn:0451450523", true},
    {"uri", "http://[2001:db8::1]:80/", true},
    {"uri", "http://[v1.fe:ed]/", true},
    {"uri", "file:///etc/hosts", true},
    {"uri", "a:", true},
    {"uri", "http://a/%7Eb%c3%A9?%Fa#%0d", true},
    {"uri", "a:/b//c", true},
    {"uri", "http://192.168.0.1/", true},
    {"uri", "//foo.bar/?baz=qux#quux", false},
    {"uri", "http:// shouldfail.com", false},
    {"uri", ":// should fail", false},
    {"uri", "bar,baz:foo", false},
    {"uri", "1http://a", false},
    {"uri", "http://a/%zz", false},
    {"uri", "http://a/%2", false},
    {"uri", "http://[::1/", false},
    {"uri", "http://a:8b/", false},
    {"uri", "http://a#b#c", false},
    {"uri", "http://exa mple.com", false},
    {"uri", "http://a/[b]", false},
};

TEST(StringFormatTest, TheRfcsExamplesAreMatchedExceptTheLeftOutOnes) {
  for (const Example& example : kExamples) {
    SCOPED_TRACE(std::string(example.format) + " \"" + std::string(example.text) + "\"");
    // The oracle first: it must read the RFCs as the examples do.
    ASSERT_EQ(oracle_matches_format(example.format, example.text), example.valid);
    const std::shared_ptr<const StringPattern> pattern = compile_format(example.format);
    ASSERT_NE(pattern, nullptr);
    const bool left_out = format_outside_cellms_subset(example.format, example.text);
    EXPECT_EQ(pattern->matches(example.text), example.valid && !left_out);
  }
}

TEST(StringFormatTest, FormatsItDoesNotAssertStayAnnotations) {
  for (const std::string_view name :
       {"uri-reference", "regex", "iri", "json-pointer", "Date", ""}) {
    EXPECT_FALSE(string_format(name).has_value()) << name;
  }
  EXPECT_EQ(string_format("hostname")->max_length, 253u);
  EXPECT_EQ(string_format("email")->max_length, 254u);
}

// A string the pattern matches, written one character at a time among those that keep it live,
// ending at random where it may.
std::string random_walk(const StringPattern& pattern, std::mt19937& rng) {
  std::string text;
  int32_t state = pattern.start();
  for (uint32_t length = 0;; ++length) {
    std::vector<char> next;
    for (const char c : kAlphabet) {
      if (pattern.live(pattern.next(state, static_cast<unsigned char>(c)), length + 1)) {
        next.push_back(c);
      }
    }
    const bool may_end = pattern.accepts(state, length);
    if (may_end && (next.empty() || rng() % 8 == 0 || length > 300)) return text;
    if (next.empty()) {
      ADD_FAILURE() << "a live state with no way on after \"" << text << "\"";
      return text;
    }
    const char c = next[rng() % next.size()];
    text.push_back(c);
    state = pattern.next(state, static_cast<unsigned char>(c));
  }
}

TEST(StringFormatTest, EveryStringARandomWalkWritesIsValid) {
  std::mt19937 rng(20261205);
  for (const std::string_view format : kFormats) {
    const std::shared_ptr<const StringPattern> pattern = compile_format(format);
    ASSERT_NE(pattern, nullptr);
    for (int i = 0; i < 3000; ++i) {
      const std::string text = random_walk(*pattern, rng);
      ASSERT_TRUE(oracle_matches_format(format, text)) << format << " \"" << text << "\"";
      ASSERT_TRUE(pattern->matches(text));
    }
  }
}

// Strings one to three edits away from valid ones: the expression matches exactly those the
// oracle calls valid, less the left-out ones.
TEST(StringFormatTest, NearMissesAreMatchedExactlyWhereTheOracleSaysValid) {
  std::mt19937 rng(7);
  for (const std::string_view format : kFormats) {
    const std::shared_ptr<const StringPattern> pattern = compile_format(format);
    ASSERT_NE(pattern, nullptr);
    std::vector<std::string> seeds;
    for (const Example& example : kExamples) {
      if (example.format == format) seeds.emplace_back(example.text);
    }
    for (int i = 0; i < 200; ++i) seeds.push_back(random_walk(*pattern, rng));
    int num_valid = 0, num_invalid = 0;
    for (int i = 0; i < 40000; ++i) {
      std::string text = seeds[rng() % seeds.size()];
      for (int edits = 1 + static_cast<int>(rng() % 3); edits > 0; --edits) {
        const size_t at = text.empty() ? 0 : rng() % (text.size() + 1);
        const char c = kAlphabet[rng() % kAlphabet.size()];
        switch (rng() % 3) {
          case 0:
            if (at < text.size()) text[at] = c;
            break;
          case 1:
            text.insert(text.begin() + static_cast<std::ptrdiff_t>(at), c);
            break;
          default:
            if (at < text.size()) text.erase(at, 1);
        }
      }
      const bool valid =
          oracle_matches_format(format, text) && !format_outside_cellms_subset(format, text);
      ASSERT_EQ(pattern->matches(text), valid) << format << " \"" << text << "\"";
      ++(valid ? num_valid : num_invalid);
    }
    // Both kinds were met, so the comparison above means something.
    EXPECT_GT(num_valid, 100) << format;
    EXPECT_GT(num_invalid, 100) << format;
  }
}

TEST(StringFormatTest, LengthBoundsOfHostnamesAndEmailsHold) {
  const std::shared_ptr<const StringPattern> hostname = compile_format("hostname");
  std::string name;  // labels of 49 characters: one more keeps the last under 63
  while (name.size() < 253) name += std::string(49, 'a') + ".";
  name.resize(253);
  if (name.back() == '.') name.back() = 'b';
  EXPECT_TRUE(testing::oracle_is_hostname(name));
  EXPECT_TRUE(hostname->matches(name));
  EXPECT_FALSE(testing::oracle_is_hostname(name + "c"));
  EXPECT_FALSE(hostname->matches(name + "c"));
  const std::shared_ptr<const StringPattern> email = compile_format("email");
  const std::string address = "a@" + name.substr(0, 252);
  ASSERT_EQ(address.size(), 254u);
  EXPECT_EQ(email->matches(address), testing::oracle_is_email(address));
  EXPECT_FALSE(email->matches("b" + address));
  EXPECT_FALSE(testing::oracle_is_email("b" + address));
}

}  // namespace
}  // namespace cellm
