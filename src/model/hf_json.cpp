#include "model/hf_json.h"

#include <fmt/format.h>

#include <algorithm>

namespace cellm {
namespace {

constexpr size_t kMaxMessageValueChars = 60;
constexpr size_t kMaxParserMessageChars = 160;

}  // namespace

int json_depth(std::string_view text, int limit) {
  int depth = 0;
  int deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit) return deepest;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

namespace {

std::string cut(std::string text, size_t max_chars) {
  if (text.size() <= max_chars) return text;
  size_t end = max_chars - 3;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;  // UTF-8
  text.resize(end);
  return text + "...";
}

}  // namespace

StatusOr<nlohmann::json> parse_hf_json(std::string_view text, std::string_view where) {
  if (json_depth(text, kMaxHfJsonDepth) > kMaxHfJsonDepth) {
    return data_loss(fmt::format("{}: JSON nests deeper than {} levels", where, kMaxHfJsonDepth));
  }
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    // nlohmann-json's messages are one line (it escapes control characters); the cut keeps a
    // long unterminated string from filling the message.
    return data_loss(
        fmt::format("{}: not valid JSON: {}", where, cut(e.what(), kMaxParserMessageChars)));
  }
}

std::string json_for_message(const nlohmann::json& value) {
  return cut(value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
             kMaxMessageValueChars);
}

std::string text_for_message(std::string_view text, size_t max_chars) {
  std::string quoted = nlohmann::json(std::string(text.substr(0, 4 * max_chars)))
                           .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return cut(quoted.substr(1, quoted.size() - 2), max_chars);
}

}  // namespace cellm
