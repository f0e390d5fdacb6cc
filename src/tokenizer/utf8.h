// UTF-8 helpers shared by the tokenizer's encoders and detokenizers.
//
// One rule for what is valid everywhere: a sequence is valid when it is the shortest encoding of
// a scalar value (no overlongs, no surrogates, nothing above U+10FFFF). Where invalid bytes must
// become text, each byte that cannot start a valid sequence becomes U+FFFD and scanning resumes
// at the next byte (as llama.cpp does). Knows bytes and code points, nothing about vocabularies.
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace cellm::tokenizer_internal {

// The length llama.cpp gives a sequence from its first byte alone (1 for ASCII and for stray
// continuation bytes, 2, 3 or 4 by the high bits). Used where bytes are split into symbols.
size_t utf8_length_from_lead(uint8_t lead);

enum class Utf8Scan { kValid, kIncomplete, kInvalid };

// Looks at the sequence starting at text[0]: kValid with *length set, kIncomplete when the
// bytes present are a valid start but the sequence runs past the end, kInvalid otherwise.
Utf8Scan scan_utf8(std::string_view text, size_t* length, uint32_t* code_point);

// The text with every invalid byte replaced by U+FFFD (an incomplete sequence at the end counts
// as invalid). Valid input comes back unchanged.
std::string sanitize_utf8(std::string_view text);

bool is_valid_utf8(std::string_view text);

void append_utf8(uint32_t code_point, std::string* out);

inline constexpr std::string_view kReplacementCharacter = "\xEF\xBF\xBD";

}  // namespace cellm::tokenizer_internal
