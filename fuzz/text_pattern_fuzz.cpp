// libFuzzer target for whole-text patterns (src/batching/string_pattern.h, Target::kWholeText)
// and their byte walker (text_pattern_prefix.h): vLLM's guided_regex. The input is a pattern, a
// NUL byte, then a text fed one byte at a time. Any pattern compiles or is refused with a message
// (never a crash, never a hang: the compiler caps its work); for one that compiles, the part of
// the text the walker accepts either must end or has a byte that continues it, a complete part is
// matched whole by the standard library's ECMAScript regex (where that library reads the
// pattern as ECMA-262 does: json_schema_oracle_test_util.h), and JsonTokenMask::compute_text
// there, over a small vocabulary (every byte, pieces of characters, pieces sharing prefixes), is
// every token the walker accepts. A broken promise aborts; ASan/UBSan catch the rest.
// Seeds: fuzz/text_pattern_seeds.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "batching/json_schema_oracle_test_util.h"
#include "batching/json_token_mask.h"
#include "batching/string_pattern.h"
#include "batching/text_pattern_prefix.h"

namespace {

void broken(const char* promise, const std::string& pattern, const std::string& text) {
  std::fprintf(stderr, "text_pattern_fuzz: %s\npattern: %s\ntext: %s\n", promise, pattern.c_str(),
               text.c_str());
  std::abort();
}

const cellm::JsonTokenMask& mask() {
  static const cellm::JsonTokenMask kMask = [] {
    std::vector<std::string> vocab = {""};
    for (int b = 1; b < 256; ++b) vocab.emplace_back(1, static_cast<char>(b));
    for (const char* piece : {"ab", "abc", "yes", "no", "12", "-1", "\xc3\xa9", "\xe2\x82",
                              "\xe2\x82\xac", "\xf0\x9f\x98\x80", " a", "\n\n", "\"q\"", "a.b"}) {
      vocab.emplace_back(piece);
    }
    return cellm::JsonTokenMask(vocab);
  }();
  return kMask;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t split = input.find('\0');
  const std::string pattern_text(input.substr(0, split));
  const std::string text(split == std::string_view::npos ? "" : input.substr(split + 1));
  cellm::StatusOr<std::shared_ptr<const cellm::StringPattern>> pattern =
      cellm::StringPattern::compile(pattern_text, 0, cellm::StringPattern::kUnbounded,
                                    cellm::StringPattern::Target::kWholeText);
  if (!pattern.ok()) {
    if (pattern.status().message().empty()) broken("a refusal without a message", pattern_text, "");
    return 0;
  }
  if (!(*pattern)->matches_something()) return 0;
  cellm::TextPatternPrefix walker(*pattern);
  size_t accepted = 0;
  while (accepted < text.size() && walker.feed(text.substr(accepted, 1))) ++accepted;
  const std::string part = text.substr(0, accepted);
  std::vector<uint8_t> allowed;
  cellm::JsonTokenMask::PatternMaskCache cache;
  for (int round = 0; round < 2; ++round) {  // computed, then from the cache
    mask().compute_text(walker, allowed, &cache);
    for (size_t t = 0; t < allowed.size(); ++t) {
      if ((allowed[t] != 0) != mask().allows_text(walker, static_cast<int32_t>(t))) {
        broken("a mask that differs from the walker", pattern_text, part);
      }
    }
  }
  bool any = false;
  for (int b = 0; b < 256 && !any; ++b) {
    const char c = static_cast<char>(b);
    any = walker.accepts(std::string_view(&c, 1));
  }
  if (any == walker.must_end())
    broken("must_end() and the bytes that follow disagree", pattern_text, part);
  if (walker.complete() &&
      !cellm::testing::oracle_matches_pattern("^(?:" + pattern_text + ")$", part)) {
    broken("a complete part the regex does not match whole", pattern_text, part);
  }
  return 0;
}
