#include "gguf/gguf_text.h"

namespace cellm {

std::string gguf_quote(std::string_view text, size_t max_bytes) {
  size_t cut = text.size();
  if (cut > max_bytes) {
    cut = max_bytes;
    // Back up over UTF-8 continuation bytes so a multi-byte character is never split.
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0u) == 0x80u) --cut;
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(cut + 8);
  out += '\'';
  for (size_t i = 0; i < cut; ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    switch (byte) {
      case '\\':
        out += "\\\\";
        break;
      case '\'':
        out += "\\'";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (byte < 0x20 || byte == 0x7F) {
          out += "\\x";
          out += kHex[byte >> 4];
          out += kHex[byte & 0xF];
        } else {
          out += static_cast<char>(byte);
        }
    }
  }
  out += '\'';
  if (cut < text.size()) out += "...";
  return out;
}

}  // namespace cellm
