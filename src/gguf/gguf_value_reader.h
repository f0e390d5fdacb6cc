// Reading GGUF metadata values (scalars, strings, arrays of arrays) from a bounded cursor.
//
// Internal to the GGUF reader (gguf_file.cpp). Every length and count is checked against the
// bytes left before anything is allocated: an array's count times the smallest size of its
// element type must fit in what remains, so a count of 2^60 fails at once. Arrays nest at most
// kGgufMaxArrayDepth deep (bounded recursion). Errors are DataLoss naming the offset and the key.
// Thread-safety: pure functions over the caller's cursor.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"
#include "gguf/gguf_cursor.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_format.h"

namespace cellm {

inline constexpr int kGgufMaxArrayDepth = 16;
// Array elements in all of a file's metadata. Each element becomes a GgufValue (about 48 bytes),
// so a 1-byte u8 element would otherwise cost 48 times its size; 2^24 is far above any real
// vocabulary (Gemma's 262,144 tokens times 3 arrays) and bounds that cost to under 1 GiB.
inline constexpr uint64_t kGgufMaxMetadataElements = uint64_t{1} << 24;

// A DataLoss for a string whose length (read just before the cursor) exceeds the bytes left.
Status gguf_string_past_end(const GgufCursor& cursor, uint64_t length, std::string_view what);

// Reads a u64 length and that many bytes. `describe()` names the string for errors ("the name of
// key #4"); it is called only on failure, so reading 32000 tokens builds no messages.
template <typename Describe>
StatusOr<std::string_view> read_gguf_string(GgufCursor& cursor, const Describe& describe) {
  uint64_t length = 0;
  if (!cursor.read(&length)) return gguf_truncated(cursor, "the length of " + describe());
  std::string_view text;
  if (!cursor.read_bytes(length, &text)) return gguf_string_past_end(cursor, length, describe());
  return text;
}

// Reads one value of `type_id` for key #key_index named `key` (the names are only for messages).
// `elements_left` is the file's remaining budget of array elements (kGgufMaxMetadataElements at
// the first key); arrays spend it, and one that would overdraw it is ResourceExhausted.
StatusOr<GgufValue> read_gguf_value(GgufCursor& cursor, uint32_t type_id, uint64_t key_index,
                                    std::string_view key, uint64_t* elements_left);

}  // namespace cellm
