// Random JSON values and serializations of them for tests (json_prefix_test): nlohmann's dumps
// and a writer of its own with random whitespace, escapes and number spellings; a one-byte
// mutator. Deterministic for a seed. Test code only. Thread-safety: one RandomJson per thread.
#pragma once

#include <cmath>
#include <cstdint>
#include <iterator>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace cellm::testing {

inline void append_utf8(uint32_t code_point, std::string& out) {
  auto byte = [&out](uint32_t value) { out.push_back(static_cast<char>(value)); };
  if (code_point < 0x80) {
    byte(code_point);
  } else if (code_point < 0x800) {
    byte(0xC0 | (code_point >> 6));
    byte(0x80 | (code_point & 0x3F));
  } else if (code_point < 0x10000) {
    byte(0xE0 | (code_point >> 12));
    byte(0x80 | ((code_point >> 6) & 0x3F));
    byte(0x80 | (code_point & 0x3F));
  } else {
    byte(0xF0 | (code_point >> 18));
    byte(0x80 | ((code_point >> 12) & 0x3F));
    byte(0x80 | ((code_point >> 6) & 0x3F));
    byte(0x80 | (code_point & 0x3F));
  }
}

inline std::vector<uint32_t> decode_valid_utf8(std::string_view text) {
  std::vector<uint32_t> code_points;
  for (size_t i = 0; i < text.size();) {
    const auto lead = static_cast<unsigned char>(text[i]);
    const size_t length = lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
    uint32_t code_point = length == 1 ? lead : lead & (0x7Fu >> length);
    for (size_t k = 1; k < length; ++k) {
      code_point = (code_point << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3Fu);
    }
    code_points.push_back(code_point);
    i += length;
  }
  return code_points;
}

class RandomJson {
 public:
  explicit RandomJson(uint32_t seed) : rng_(seed) {}

  std::mt19937& rng() { return rng_; }
  int below(int bound) { return std::uniform_int_distribution<int>(0, bound - 1)(rng_); }

  nlohmann::json value(int depth_left) {
    const int kind = below(depth_left > 0 ? 8 : 6);
    switch (kind) {
      case 0:
        return below(2) == 0   ? nlohmann::json(true)
               : below(2) == 0 ? nlohmann::json(false)
                               : nlohmann::json(nullptr);
      case 1:
        return nlohmann::json(string());
      case 2:
        return nlohmann::json(below(3) == 0 ? std::uniform_int_distribution<int64_t>()(rng_)
                                            : int64_t{below(2001) - 1000});
      case 3:
        return nlohmann::json(std::uniform_int_distribution<uint64_t>()(rng_));
      case 4:
      case 5: {
        const double mantissa = std::uniform_real_distribution<double>(-10, 10)(rng_);
        return nlohmann::json(below(4) == 0 ? std::round(mantissa)
                                            : mantissa * std::pow(10, below(81) - 40));
      }
      case 6:
        return object(depth_left - 1);
      default: {
        nlohmann::json array = nlohmann::json::array();
        for (int n = below(5); n > 0; --n) array.push_back(value(depth_left - 1));
        return array;
      }
    }
  }

  nlohmann::json object(int depth_left) {
    nlohmann::json object = nlohmann::json::object();
    for (int n = below(5); n > 0; --n) object[string()] = value(depth_left);
    return object;
  }

  // Up to 6 code points: ASCII, what must be escaped, and 2-, 3- and 4-byte UTF-8 characters.
  std::string string() {
    static constexpr uint32_t kEdges[] = {'"',   '\\',   '/',    '\b',   '\f',    '\n',    '\r',
                                          '\t',  0x01,   0x1F,   0x7F,   0x80,    0x7FF,   0x800,
                                          0xFFF, 0xD7FF, 0xE000, 0xFFFF, 0x10000, 0x10FFFF};
    std::string text;
    for (int n = below(7); n > 0; --n) {
      const int kind = below(10);
      uint32_t code_point = 0;
      if (kind < 4) {
        code_point = static_cast<uint32_t>(0x20 + below(0x5F));
      } else if (kind < 5) {
        code_point = kEdges[below(std::size(kEdges))];
      } else if (kind < 7) {
        code_point = static_cast<uint32_t>(0x80 + below(0x800 - 0x80));
      } else if (kind < 9) {
        code_point = static_cast<uint32_t>(0x800 + below(0x10000 - 0x800 - 0x800));
        if (code_point >= 0xD800) code_point += 0x800;  // skip the surrogates
      } else {
        code_point = static_cast<uint32_t>(0x10000 + below(0x100000));
      }
      append_utf8(code_point, text);
    }
    return text;
  }

  // A serialization of our own: random whitespace around every token, escapes chosen at random
  // (\/, \uXXXX in either case, surrogate pairs), numbers in other spellings ("1E+05", "7.0e0").
  void write(const nlohmann::json& value, std::string& out) {
    whitespace(out);
    if (value.is_object() || value.is_array()) {
      out.push_back(value.is_object() ? '{' : '[');
      bool first = true;
      for (const auto& [key, element] : value.items()) {
        if (!first) out.push_back(',');
        first = false;
        if (value.is_object()) {
          whitespace(out);
          write_string(key, out);
          whitespace(out);
          out.push_back(':');
        }
        write(element, out);
      }
      whitespace(out);
      out.push_back(value.is_object() ? '}' : ']');
    } else if (value.is_string()) {
      write_string(value.get<std::string>(), out);
    } else {
      std::string text = value.dump();
      for (char& c : text) {
        if (c == 'e' && value.is_number() && below(2) == 0) c = 'E';
      }
      static constexpr std::string_view kIntegerTails[] = {"", "e0", "E+00", ".0", ".000e-0"};
      if (value.is_number_integer()) text += kIntegerTails[below(std::size(kIntegerTails))];
      out += text;
    }
    whitespace(out);
  }

 private:
  void whitespace(std::string& out) {
    for (int n = below(4) == 0 ? below(3) + 1 : 0; n > 0; --n) out.push_back(" \t\n\r"[below(4)]);
  }

  void write_code_unit_escape(uint32_t unit, std::string& out) {
    out += "\\u";
    for (int shift = 12; shift >= 0; shift -= 4) {
      const char digit = "0123456789abcdef"[(unit >> shift) & 0xF];
      out.push_back(digit >= 'a' && below(2) == 0 ? static_cast<char>(digit - 'a' + 'A') : digit);
    }
  }

  void write_string(const std::string& text, std::string& out) {
    static constexpr std::string_view kEscaped = "\"\\\b\f\n\r\t", kEscapeLetters = "\"\\bfnrt";
    out.push_back('"');
    for (uint32_t code_point : decode_valid_utf8(text)) {
      const size_t short_escape =
          code_point < 0x80 ? kEscaped.find(static_cast<char>(code_point)) : std::string_view::npos;
      if (short_escape != std::string_view::npos && below(4) != 0) {
        out.push_back('\\');
        out.push_back(kEscapeLetters[short_escape]);
      } else if (code_point == '/' && below(2) == 0) {
        out += "\\/";
      } else if (short_escape != std::string_view::npos || code_point < 0x20 || below(4) == 0) {
        if (code_point < 0x10000) {
          write_code_unit_escape(code_point, out);
        } else {
          write_code_unit_escape(0xD800 + ((code_point - 0x10000) >> 10), out);
          write_code_unit_escape(0xDC00 + ((code_point - 0x10000) & 0x3FF), out);
        }
      } else {
        append_utf8(code_point, out);
      }
    }
    out.push_back('"');
  }

  std::mt19937 rng_;
};

// One of three serializations: nlohmann's UTF-8 dump, its ASCII-only dump (\u escapes, surrogate
// pairs) or ours (whitespace, other escapes and number spellings).
inline std::string serialize(RandomJson& random, const nlohmann::json& value, int style) {
  if (style == 0) return value.dump();
  if (style == 1) return value.dump(-1, ' ', /*ensure_ascii=*/true);
  std::string out;
  random.write(value, out);
  return out;
}

// Replaces, inserts or deletes one byte; the new byte is often one that means something in JSON.
inline std::string mutate_one_byte(RandomJson& random, std::string text) {
  static constexpr char kMeaningful[] =
      "{}[],:\"\\ \t\n\r0123456789-+.eEtrufalsnbuDCAF/x\x00\x1F\x7F\x80\xBF\xC0\xC1\xC2\xDF\xE0\xED"
      "\xEF\xF0\xF4\xF5\xFF";
  const char byte = random.below(2) == 0 ? kMeaningful[random.below(sizeof(kMeaningful) - 1)]
                                         : static_cast<char>(random.below(256));
  const auto position = static_cast<size_t>(random.below(static_cast<int>(text.size())));
  switch (random.below(3)) {
    case 0:
      text[position] = byte;
      break;
    case 1:
      text.insert(text.begin() + random.below(static_cast<int>(text.size()) + 1), byte);
      break;
    default:
      text.erase(position, 1);
  }
  return text;
}

}  // namespace cellm::testing
