// GGUF format facts shared by the reader, the writer and the typed getters: the magic, the
// default alignment and its key, and what each metadata value type is and takes on disk.
//
// Internal to src/gguf (callers use gguf_file.h and gguf_writer.h). Knows the encoding, not what
// any key means. Thread-safety: constants and pure functions.
#pragma once

#include <cstdint>
#include <string_view>

#include "gguf/gguf_file.h"

namespace cellm {

inline constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" read as a little-endian u32
inline constexpr uint32_t kGgufDefaultAlignment = 32;
inline constexpr std::string_view kGgufAlignmentKey = "general.alignment";

// True for the 13 value type ids GGUF defines.
bool is_gguf_value_type(uint32_t type_id);
bool is_gguf_unsigned_type(GgufValueType type);  // u8, u16, u32, u64
bool is_gguf_signed_type(GgufValueType type);    // i8, i16, i32, i64
bool is_gguf_float_type(GgufValueType type);     // f32, f64

// Smallest encoded size of a value of the type: its size for a scalar (bool: 1), 8 for a string
// (its length), 12 for an array (element type and count).
uint64_t gguf_min_value_bytes(GgufValueType type);

}  // namespace cellm
