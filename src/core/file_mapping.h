// FileMapping: a read-only memory mapping of a whole file.
//
// Model files are mapped, never read into memory: GGUF tensor data is served as spans over the
// mapping. An empty file maps to an empty span. Errors name the path and the system's reason.
// Knows nothing about what the bytes mean. Thread-safety: the bytes are immutable; a mapping is
// move-only and may be read from any thread while it lives.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "core/status.h"

namespace cellm {

class FileMapping {
 public:
  static StatusOr<FileMapping> open(const std::string& path);

  FileMapping() = default;
  FileMapping(FileMapping&& other) noexcept;
  FileMapping& operator=(FileMapping&& other) noexcept;
  FileMapping(const FileMapping&) = delete;
  FileMapping& operator=(const FileMapping&) = delete;
  ~FileMapping();

  std::span<const uint8_t> bytes() const { return {data_, size_bytes_}; }
  size_t size_bytes() const { return size_bytes_; }
  const std::string& path() const { return path_; }

 private:
  void reset();

  const uint8_t* data_ = nullptr;
  size_t size_bytes_ = 0;
  std::string path_;
};

// Reads a whole (small) file into a string: configs, JSON, token lists.
StatusOr<std::string> read_file_to_string(const std::string& path);

}  // namespace cellm
