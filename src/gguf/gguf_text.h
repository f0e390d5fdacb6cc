// Quoting untrusted text (metadata keys, tensor names, string values) for messages and dumps.
//
// A malformed file can put control bytes or megabytes of text where a name belongs; every error
// message and `cellm inspect` line goes through gguf_quote so it stays one short, printable line.
// Bytes >= 0x80 pass through (UTF-8 names stay readable); the cut never splits a UTF-8 sequence.
// Knows nothing about GGUF structure. Thread-safety: pure function.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace cellm {

// 'text' in single quotes with \\, \', \n, \r, \t and \xNN escapes; when the text is longer than
// max_bytes it is cut (at a character boundary) and "..." follows the closing quote.
std::string gguf_quote(std::string_view text, size_t max_bytes = 48);

}  // namespace cellm
