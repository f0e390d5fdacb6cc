// SafetensorsFile: a parsed, validated `.safetensors` file — tensor names, dtypes, shapes and
// spans over their bytes.
//
// The format: an 8-byte little-endian header length N, N bytes of JSON (an object mapping each
// tensor name to {"dtype", "shape", "data_offsets": [begin, end]}, plus an optional
// "__metadata__" object of strings), then the data section; offsets are relative to its start.
// Parsing checks everything before it returns: the header length against the file and a 100 MB
// cap, the JSON (nesting at most 8 deep, no duplicate keys), every dtype known, every shape a
// list of non-negative integers whose byte size does not overflow and equals end − begin, every
// range inside the data section, no two non-empty tensors overlapping. Any malformed input is a
// Status (DataLoss, or Unimplemented for a dtype name it does not know) naming the file and the
// tensor; never a crash or an exception (nlohmann-json errors are caught here).
// It knows bytes and shapes, not models: hf_checkpoint.h maps names. Sharded checkpoints are
// safetensors_set.h. Thread-safety: immutable after parse; read from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/file_mapping.h"
#include "core/status.h"

namespace cellm {

enum class SafetensorsDtype {
  kBool,
  kU8,
  kI8,
  kF8E5M2,
  kF8E4M3,
  kI16,
  kU16,
  kF16,
  kBF16,
  kI32,
  kU32,
  kF32,
  kF64,
  kI64,
  kU64,
};

std::string_view safetensors_dtype_name(SafetensorsDtype dtype);  // "F32", "BF16", ...
uint32_t safetensors_dtype_bytes(SafetensorsDtype dtype);         // bytes per element

struct SafetensorsTensor {
  std::string name;
  SafetensorsDtype dtype = SafetensorsDtype::kF32;
  std::vector<uint64_t> shape;    // outermost first (row-major, as PyTorch writes it)
  uint64_t num_elements = 0;      // product of shape (1 for a scalar)
  uint64_t offset_bytes = 0;      // begin, from the start of the data section
  std::span<const uint8_t> data;  // [num_elements * dtype bytes]

  // "[64, 512]".
  std::string shape_string() const;
};

class SafetensorsFile {
 public:
  // Maps and parses the file; errors are prefixed with the path.
  static StatusOr<SafetensorsFile> open(const std::string& path);
  // Parses bytes the caller keeps alive; errors are prefixed with `display_name`.
  static StatusOr<SafetensorsFile> parse(std::span<const uint8_t> bytes,
                                         std::string display_name = "safetensors bytes");

  SafetensorsFile(SafetensorsFile&&) noexcept = default;
  SafetensorsFile& operator=(SafetensorsFile&&) noexcept = default;

  const std::string& path() const { return path_; }  // or the display name
  // Tensors in the order of their data offsets.
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  const SafetensorsTensor* find(std::string_view name) const;
  // "__metadata__" entries, in name order.
  const std::vector<std::pair<std::string, std::string>>& metadata() const { return metadata_; }

 private:
  SafetensorsFile() = default;
  Status parse_header(std::string_view header, uint64_t data_size_bytes);

  std::shared_ptr<FileMapping> mapping_;  // null when parsed from caller-owned bytes
  std::string path_;
  std::span<const uint8_t> data_;  // the data section
  std::vector<SafetensorsTensor> tensors_;
  std::unordered_map<std::string, size_t> index_;  // name -> index into tensors_
  std::vector<std::pair<std::string, std::string>> metadata_;
};

}  // namespace cellm
