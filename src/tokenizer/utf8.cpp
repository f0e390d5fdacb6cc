#include "tokenizer/utf8.h"

namespace cellm::tokenizer_internal {

size_t utf8_length_from_lead(uint8_t lead) {
  static constexpr size_t kLengths[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLengths[lead >> 4];
}

Utf8Scan scan_utf8(std::string_view text, size_t* length, uint32_t* code_point) {
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(text[i]); };
  const uint8_t lead = byte(0);
  size_t n = 0;
  uint32_t cp = 0;
  uint32_t min_cp = 0;
  if (lead < 0x80) {
    *length = 1;
    *code_point = lead;
    return Utf8Scan::kValid;
  } else if (lead >= 0xC2 && lead <= 0xDF) {
    n = 2, cp = lead & 0x1F, min_cp = 0x80;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    n = 3, cp = lead & 0x0F, min_cp = 0x800;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    n = 4, cp = lead & 0x07, min_cp = 0x10000;
  } else {
    return Utf8Scan::kInvalid;
  }
  for (size_t i = 1; i < n; ++i) {
    // Every byte so far fits (the second byte's check below already rejected the prefixes that
    // no continuation can rescue).
    if (i >= text.size()) return Utf8Scan::kIncomplete;
    if ((byte(i) & 0xC0) != 0x80) return Utf8Scan::kInvalid;
    cp = (cp << 6) | (byte(i) & 0x3F);
    if (i == 1) {
      // Overlong, surrogate and out-of-range forms are decided by the first two bytes.
      const uint32_t low = cp << (6 * (n - 2));
      const uint32_t high = low | ((1u << (6 * (n - 2))) - 1);
      if (high < min_cp || (low >= 0xD800 && high <= 0xDFFF) || low > 0x10FFFF) {
        return Utf8Scan::kInvalid;
      }
    }
  }
  *length = n;
  *code_point = cp;
  return Utf8Scan::kValid;
}

std::string sanitize_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    size_t length = 0;
    uint32_t cp = 0;
    if (scan_utf8(text.substr(i), &length, &cp) == Utf8Scan::kValid) {
      out.append(text.substr(i, length));
      i += length;
    } else {
      out.append(kReplacementCharacter);
      ++i;
    }
  }
  return out;
}

bool is_valid_utf8(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    size_t length = 0;
    uint32_t cp = 0;
    if (scan_utf8(text.substr(i), &length, &cp) != Utf8Scan::kValid) return false;
    i += length;
  }
  return true;
}

void append_utf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace cellm::tokenizer_internal
