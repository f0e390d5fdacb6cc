// An independent judge of JSON prefixes for tests: nlohmann::json's parser (default flags: strict,
// no comments) deciding whether a text can still be extended to one JSON text (RFC 8259), with its
// departures from the RFC's grammar worked around (json_prefix_test shows each is real). Used by
// json_prefix_test (against JsonPrefix), runner_json_test and the server's format test. Test code
// only. Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace cellm::testing {

struct OracleOutcome {
  bool accepted = false;
  size_t error_byte = 0;  // nlohmann's count of bytes read when it stopped; the end counts as one
  std::string message;
};

class ErrorRecordingSax : public nlohmann::json_sax<nlohmann::json> {
 public:
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return true; }
  bool key(string_t&) override { return true; }
  bool end_object() override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception& error) override {
    outcome.error_byte = position;
    outcome.message = error.what();
    return false;
  }
  OracleOutcome outcome;
};

inline OracleOutcome oracle_parse(const std::string& text) {
  ErrorRecordingSax sax;
  sax.outcome.accepted =
      nlohmann::json::sax_parse(text, &sax, nlohmann::json::input_format_t::json, /*strict=*/true,
                                /*ignore_comments=*/false);
  return sax.outcome;
}

// Whether nlohmann took every token of `text` as grammatical and only wanted more: it accepts, or
// its parser (not its lexer, midway through a token) reports the end of input.
inline bool oracle_wants_more_or_accepts(const std::string& text) {
  const OracleOutcome outcome = oracle_parse(text);
  if (outcome.accepted) return true;
  const size_t reason = outcome.message.find(" - ");
  return outcome.error_byte == text.size() + 1 && reason != std::string::npos &&
         outcome.message.compare(reason + 3, 23, "unexpected end of input") == 0;
}

// Completions of whatever token a prefix may stop inside: a literal, a number, a string (after
// '\', inside \uXXXX, around a surrogate pair, inside a UTF-8 character). "" for none.
inline const std::vector<std::string>& token_completions() {
  static const std::vector<std::string> completions = [] {
    std::vector<std::string> all = {"", "0", "\"", "n\""};
    for (std::string_view literal : {"true", "false", "null"}) {
      for (size_t i = 1; i < literal.size(); ++i) all.emplace_back(literal.substr(i));
    }
    for (size_t missing_digits = 1; missing_digits <= 4; ++missing_digits) {
      all.push_back(std::string(missing_digits, '0') + "\"");
      all.push_back(std::string(missing_digits, '0') + "\\uDC00\"");
    }
    for (std::string_view low_surrogate : {"\\uDC00\"", "uDC00\"", "DC00\"", "C00\""}) {
      all.emplace_back(low_surrogate);
    }
    for (size_t continuations = 1; continuations <= 3; ++continuations) {
      for (char first : {'\x80', '\x90', '\xA0'}) {
        all.push_back(first + std::string(continuations - 1, '\x80') + "\"");
      }
    }
    return all;
  }();
  return completions;
}

// Whether `prefix` can be extended to a JSON text, by nlohmann. Its lexer reports a token cut
// short by the end of input before its parser sees whether the token may stand there ("[0t" is
// reported like "[0,t"), and it checks a \u escape only after its fourth digit ("\uDC" is reported
// like "\uD8"): so the oracle completes the last token first, every way that matters, and asks
// whether the parser then only wants more.
inline bool oracle_is_prefix(const std::string& prefix) {
  for (const std::string& completion : token_completions()) {
    if (oracle_wants_more_or_accepts(prefix + completion)) return true;
  }
  return false;
}

// The oracle, less nlohmann's departures from RFC 8259's grammar (json_prefix_test:
// NlohmannQuirksTheOracleWorksAroundAreReal): it reads a NUL byte outside strings as the end of the
// input (C strings), and skips a UTF-8 byte order mark at the start (RFC 8259 8.1 lets a parser
// ignore one; a generator must not emit it).
inline bool is_prefix_of_json_text(const std::string& prefix) {
  if (prefix.find('\0') != std::string::npos) return false;  // never valid: not even in strings
  if (!prefix.empty() && prefix[0] == '\xEF') return false;
  return oracle_is_prefix(prefix);
}

// A prefix of one JSON object (OpenAI's json_object): whitespace, then '{' first.
inline bool is_prefix_of_json_object(const std::string& prefix) {
  const size_t first = prefix.find_first_not_of(" \t\r\n");
  return (first == std::string::npos || prefix[first] == '{') && is_prefix_of_json_text(prefix);
}

// One whole JSON object (what a json_object generation ends with).
inline bool is_json_object(const std::string& text) {
  const size_t first = text.find_first_not_of(" \t\r\n");
  return first != std::string::npos && text[first] == '{' && text.find('\0') == std::string::npos &&
         nlohmann::json::accept(text);
}

}  // namespace cellm::testing
