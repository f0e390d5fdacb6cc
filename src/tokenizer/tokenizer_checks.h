// Test support for the tokenizer (not part of cellm_tokenizer): independent checks of the
// promises tokenizer.h and streaming_detokenizer.h make, for the property test and the libFuzzer
// target. Each check returns "" when the promise holds, else what broke.
//
// The UTF-8 rules here are written from RFC 3629 §3–4 (shortest form, no surrogates, nothing
// above U+10FFFF), not taken from the tokenizer's utf8.h, so a bug there cannot hide itself.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace cellm::tokenizer_testing {

// The length of the valid UTF-8 sequence at text[i], or 0 when none starts there.
size_t valid_sequence_length(std::string_view text, size_t i);
bool valid_utf8(std::string_view text);
// Each byte that starts no valid sequence becomes U+FFFD.
std::string replace_invalid_bytes(std::string_view text);
// Non-printable and non-ASCII bytes as \xNN, in double quotes: for failure messages.
std::string escaped(std::string_view text);

// Encodes `text` (any bytes) and checks: success (or the one documented refusal: a byte with no
// token in a vocabulary without an unknown token, *ids then empty), every id inside the
// vocabulary, and without parse_special no control token other than the unknown token and what
// add_special puts at the ends. Fills *ids when given.
std::string check_encoding(const Tokenizer& tokenizer, std::string_view text,
                           const EncodeOptions& options, std::vector<int32_t>* ids = nullptr);

// decode(encode(text)) against what the vocabulary kind promises: the bytes for SPM (text with
// U+2581 excepted: it decodes as a space), the text with invalid bytes as U+FFFD for byte-level
// BPE; nothing is promised for WordPiece, for a documented refusal or when the encoding holds the
// unknown token (a byte the vocabulary has no token for: refact's 0xF1).
std::string check_round_trip(const Tokenizer& tokenizer, std::string_view text);

// Streams `ids` one at a time (stop string `stop` when not empty) and checks: every push
// succeeds, the streamed text is valid UTF-8, and when decode(ids) is valid UTF-8 the stream is
// exactly decode(ids) — cut before the first `stop` when it occurs, with stopped() set.
std::string check_stream(const Tokenizer& tokenizer, std::span<const int32_t> ids,
                         const DecodeOptions& options, const std::string& stop);

}  // namespace cellm::tokenizer_testing
