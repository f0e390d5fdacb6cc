#include "tokenizer/tokenizer_checks.h"

#include <algorithm>

#include "fmt/format.h"
#include "tokenizer/streaming_detokenizer.h"

namespace cellm::tokenizer_testing {

size_t valid_sequence_length(std::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<uint8_t>(text[i + k]); };
  const auto continuation = [&](size_t k) { return i + k < text.size() && (byte(k) >> 6) == 2; };
  const uint8_t lead = byte(0);
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return continuation(1) ? 2 : 0;
  if (lead >= 0xE0 && lead <= 0xEF) {
    if (!continuation(1) || !continuation(2)) return 0;
    if (lead == 0xE0 && byte(1) < 0xA0) return 0;   // overlong
    if (lead == 0xED && byte(1) >= 0xA0) return 0;  // surrogate
    return 3;
  }
  if (lead >= 0xF0 && lead <= 0xF4) {
    if (!continuation(1) || !continuation(2) || !continuation(3)) return 0;
    if (lead == 0xF0 && byte(1) < 0x90) return 0;   // overlong
    if (lead == 0xF4 && byte(1) >= 0x90) return 0;  // above U+10FFFF
    return 4;
  }
  return 0;
}

bool valid_utf8(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    const size_t length = valid_sequence_length(text, i);
    if (length == 0) return false;
    i += length;
  }
  return true;
}

std::string replace_invalid_bytes(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    const size_t length = valid_sequence_length(text, i);
    if (length == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else {
      out.append(text.substr(i, length));
      i += length;
    }
  }
  return out;
}

std::string escaped(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    const auto byte = static_cast<uint8_t>(c);
    if (byte < 0x20 || byte >= 0x7F || c == '"' || c == '\\') {
      out += fmt::format("\\x{:02x}", byte);
    } else {
      out += c;
    }
  }
  return out + "\"";
}

namespace {

// The one refusal tokenizer.h allows: a byte with no token in a vocabulary with no unknown token
// (Falcon's has none for 0x04).
bool documented_refusal(const Tokenizer& tokenizer, const Status& status) {
  const std::string& message = status.message();
  return status.code() == StatusCode::kInvalidArgument &&
         tokenizer.vocab().special.unk == kNoToken && message.find('\n') == std::string::npos &&
         message.starts_with("tokenizer: byte 0x") &&
         message.ends_with("has no token and the vocabulary has no unknown token");
}

}  // namespace

std::string check_encoding(const Tokenizer& tokenizer, std::string_view text,
                           const EncodeOptions& options, std::vector<int32_t>* ids_out) {
  StatusOr<std::vector<int32_t>> ids = tokenizer.encode(text, options);
  if (!ids.ok() && documented_refusal(tokenizer, ids.status())) {
    if (ids_out != nullptr) ids_out->clear();
    return "";
  }
  if (!ids.ok()) return "encode " + escaped(text) + " failed: " + ids.status().to_string();
  for (size_t i = 0; i < ids->size(); ++i) {
    const int32_t id = (*ids)[i];
    if (id < 0 || id >= tokenizer.vocab_size()) {
      return fmt::format("id {} of {} is outside the vocabulary", id, escaped(text));
    }
    if (options.parse_special) continue;
    const bool at_an_end = options.add_special && (i == 0 || i + 1 == ids->size());
    const bool unknown = id == tokenizer.vocab().special.unk;  // WordPiece's [UNK]
    if (!at_an_end && !unknown && tokenizer.vocab().type(id) == TokenType::kControl) {
      return fmt::format("control token {} from {} without parse_special", id, escaped(text));
    }
  }
  if (ids_out != nullptr) *ids_out = *std::move(ids);
  return "";
}

std::string check_round_trip(const Tokenizer& tokenizer, std::string_view text) {
  if (tokenizer.kind() == VocabKind::kWpm) return "";
  if (tokenizer.kind() == VocabKind::kSpm && text.find("\xE2\x96\x81") != std::string::npos) {
    return "";
  }
  StatusOr<std::vector<int32_t>> encoded = tokenizer.encode(text, {});
  if (!encoded.ok()) return check_encoding(tokenizer, text, {});  // "" for a documented refusal
  const std::vector<int32_t>& ids = *encoded;
  // A byte the vocabulary has no token for became the unknown token: nothing to give back.
  if (std::find(ids.begin(), ids.end(), tokenizer.vocab().special.unk) != ids.end()) return "";
  StatusOr<std::string> back = tokenizer.decode(ids, {});
  if (!back.ok()) return "decode failed: " + back.status().to_string();
  const std::string expected =
      tokenizer.kind() == VocabKind::kSpm ? std::string(text) : replace_invalid_bytes(text);
  if (*back != expected) {
    return "decodes to " + escaped(*back) + " instead of " + escaped(expected);
  }
  return "";
}

std::string check_stream(const Tokenizer& tokenizer, std::span<const int32_t> ids,
                         const DecodeOptions& options, const std::string& stop) {
  StatusOr<std::string> decoded = tokenizer.decode(ids, options);
  if (!decoded.ok()) return "decode failed: " + decoded.status().to_string();
  StreamingDetokenizer stream(tokenizer, options,
                              stop.empty() ? std::vector<std::string>{} : std::vector{stop});
  std::string streamed;
  for (const int32_t id : ids) {
    StatusOr<std::string> text = stream.push(id);
    if (!text.ok()) return "push failed: " + text.status().to_string();
    streamed += *text;
  }
  streamed += stream.finish();
  if (!valid_utf8(streamed)) return "streamed text is not UTF-8: " + escaped(streamed);
  if (!valid_utf8(*decoded)) return "";
  const size_t stop_at = stop.empty() ? std::string::npos : decoded->find(stop);
  const std::string expected = decoded->substr(0, stop_at);
  if (streamed != expected) {
    return "streamed " + escaped(streamed) + " instead of " + escaped(expected) + " (stop " +
           escaped(stop) + ")";
  }
  if (stream.stopped() != (stop_at != std::string::npos)) {
    return "stopped() is " + std::string(stream.stopped() ? "true" : "false") + " for stop " +
           escaped(stop) + " in " + escaped(*decoded);
  }
  return "";
}

}  // namespace cellm::tokenizer_testing
