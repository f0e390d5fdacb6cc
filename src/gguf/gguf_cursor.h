// GgufCursor: a bounded little-endian reader over a byte span, for the GGUF parser only.
//
// Every read first checks the bytes left and returns false instead of reading past the end; it
// never allocates. The parser turns a false into a Status naming the offset and what it was
// reading (gguf_truncated), so the cursor itself knows nothing about keys, tensors or messages.
// Thread-safety: a cursor is a plain value used by one thread.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

#include "core/status.h"

namespace cellm {

static_assert(std::endian::native == std::endian::little,
              "the GGUF reader and writer assume a little-endian host");

class GgufCursor {
 public:
  explicit GgufCursor(std::span<const uint8_t> bytes) : bytes_(bytes) {}

  uint64_t offset() const { return offset_; }
  uint64_t size() const { return bytes_.size(); }
  uint64_t remaining() const { return bytes_.size() - offset_; }

  // Reads one little-endian integer or float; false (nothing consumed) if too few bytes remain.
  template <typename T>
  requires std::is_arithmetic_v<T>
  bool read(T* out) {
    if (remaining() < sizeof(T)) return false;
    std::memcpy(out, bytes_.data() + offset_, sizeof(T));
    offset_ += sizeof(T);
    return true;
  }

  // A view of the next `length` bytes; false (nothing consumed) if fewer remain.
  bool read_bytes(uint64_t length, std::string_view* out) {
    if (remaining() < length) return false;
    *out = std::string_view(reinterpret_cast<const char*>(bytes_.data() + offset_), length);
    offset_ += length;
    return true;
  }

 private:
  std::span<const uint8_t> bytes_;
  uint64_t offset_ = 0;  // invariant: offset_ <= bytes_.size()
};

// "gguf: truncated at offset 123 while reading <what> (file size 130)".
inline Status gguf_truncated(const GgufCursor& cursor, std::string_view what) {
  return data_loss("gguf: truncated at offset " + std::to_string(cursor.offset()) +
                   " while reading " + std::string(what) + " (file size " +
                   std::to_string(cursor.size()) + ")");
}

}  // namespace cellm
