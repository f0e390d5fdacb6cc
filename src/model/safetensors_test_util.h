// Test-only helpers: build `.safetensors` bytes and files by hand (the reader's tests, its
// mutation test and fuzz seeds, and the export suites' synthetic checkpoints). Not part of
// cellm_model. The layout written is the format's plain one: 8-byte little-endian header length,
// the JSON header (nlohmann-json, keys sorted), the tensors' bytes back to back in the given
// order. Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/float16.h"

namespace cellm::safetensors_testing {

struct TensorBytes {
  std::string name;
  std::string dtype;            // "F32", "BF16", "I32", ...
  std::vector<uint64_t> shape;  // outermost first
  std::vector<uint8_t> bytes;
};

inline std::vector<uint8_t> f32_bytes(const std::vector<float>& values) {
  std::vector<uint8_t> bytes(values.size() * 4);
  if (!values.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

inline std::vector<uint8_t> bf16_bytes(const std::vector<float>& values) {
  std::vector<uint8_t> bytes(values.size() * 2);
  for (size_t i = 0; i < values.size(); ++i) {
    const uint16_t bits = f32_to_bf16(values[i]);
    std::memcpy(bytes.data() + 2 * i, &bits, 2);
  }
  return bytes;
}

inline std::vector<uint8_t> f16_bytes(const std::vector<float>& values) {
  std::vector<uint8_t> bytes(values.size() * 2);
  for (size_t i = 0; i < values.size(); ++i) {
    const uint16_t bits = f32_to_f16(values[i]);
    std::memcpy(bytes.data() + 2 * i, &bits, 2);
  }
  return bytes;
}

template <typename T>
std::vector<uint8_t> raw_bytes(const std::vector<T>& values) {
  std::vector<uint8_t> bytes(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

// The header JSON of `tensors` laid out back to back.
inline nlohmann::json header_json(const std::vector<TensorBytes>& tensors,
                                  const nlohmann::json& metadata = nullptr) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.is_null()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const TensorBytes& t : tensors) {
    header[t.name] = {{"dtype", t.dtype},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
  }
  return header;
}

// A whole file from a header text and the data section.
inline std::vector<uint8_t> file_bytes(const std::string& header,
                                       const std::vector<uint8_t>& data) {
  std::vector<uint8_t> out(8 + header.size() + data.size());
  const uint64_t length = header.size();
  std::memcpy(out.data(), &length, 8);
  if (!header.empty()) std::memcpy(out.data() + 8, header.data(), header.size());
  if (!data.empty()) std::memcpy(out.data() + 8 + header.size(), data.data(), data.size());
  return out;
}

inline std::vector<uint8_t> build(const std::vector<TensorBytes>& tensors,
                                  const nlohmann::json& metadata = nullptr) {
  std::vector<uint8_t> data;
  for (const TensorBytes& t : tensors) data.insert(data.end(), t.bytes.begin(), t.bytes.end());
  return file_bytes(header_json(tensors, metadata).dump(), data);
}

inline bool write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  return static_cast<bool>(out);
}

inline bool write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  return static_cast<bool>(out);
}

}  // namespace cellm::safetensors_testing
