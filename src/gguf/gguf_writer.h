// GgufWriter: builds a GGUF v3 file — metadata of every value type and tensors given by name,
// type and dims, with bytes from a span or from a callback that fills one tensor at a time.
//
// Nothing is written until write_file / write_bytes; the add_* calls validate as they go (keys
// and names unique and non-empty, dims and byte sizes consistent with the type) and change
// nothing when they refuse. A callback tensor is produced into a buffer of that one tensor's
// size, so an exporter streams a large model with memory for one tensor at a time.
// write_file writes `<path>.tmp` and renames it over `path` only after every byte is written
// and flushed: a failure never leaves a truncated output. The alignment (default 32) is written
// as `general.alignment` when it is not 32 or when the caller adds that key itself. Knows bytes,
// not models. Thread-safety: one thread builds and writes a writer; callbacks run on that thread.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <unordered_set>
#include <vector>

#include "core/status.h"
#include "gguf/gguf_file.h"
#include "gguf/tensor_type.h"

namespace cellm {

class GgufSink;  // where the bytes go (gguf_writer.cpp)

class GgufWriter {
 public:
  // Fills `out` (exactly the tensor's size_bytes) with the tensor's bytes; an error aborts the
  // write and is returned from write_file / write_bytes with the tensor's name.
  using FillTensor = std::function<Status(std::span<uint8_t> out)>;

  GgufWriter() = default;

  // A nonzero power of two; InvalidArgument otherwise. Sets or adds `general.alignment`
  // (added only when not 32, unless the key is already present).
  Status set_alignment(uint32_t alignment_bytes);
  uint32_t alignment() const { return alignment_; }

  // Appends a key in order. InvalidArgument for an empty or duplicate key, and for a
  // `general.alignment` that is not a u32 power of two (a valid one sets the alignment).
  Status add_metadata(std::string key, GgufValue value);

  // Appends a tensor whose bytes the caller keeps alive until the write. InvalidArgument for an
  // empty or duplicate name, bad dims (1 to 4, innermost first, rows whole blocks) or a span
  // whose size is not the tensor's size.
  Status add_tensor(std::string name, TensorType type, std::vector<uint64_t> dims,
                    std::span<const uint8_t> bytes);
  // A temporary vector would dangle before the write: keep the bytes alive, or use a callback.
  Status add_tensor(std::string name, TensorType type, std::vector<uint64_t> dims,
                    std::vector<uint8_t>&& bytes) = delete;
  // Appends a tensor whose bytes `fill` produces during the write (called exactly once).
  Status add_tensor(std::string name, TensorType type, std::vector<uint64_t> dims, FillTensor fill);

  size_t num_tensors() const { return tensors_.size(); }
  // Total bytes the file will have.
  uint64_t file_size_bytes() const;

  // Writes `<path>.tmp`, then renames it to `path`; on any failure removes the temporary file and
  // leaves `path` as it was. Errors name the path (IoError) or the tensor whose callback failed.
  Status write_file(const std::string& path) const;
  // The same bytes in memory (tests, fuzz corpora).
  StatusOr<std::vector<uint8_t>> write_bytes() const;

 private:
  struct PendingTensor {
    std::string name;
    TensorType type;
    std::vector<uint64_t> dims;  // innermost first
    uint64_t size_bytes;
    std::span<const uint8_t> bytes;  // used when fill is empty
    FillTensor fill;
  };
  Status check_tensor(const std::string& name, TensorType type, const std::vector<uint64_t>& dims,
                      uint64_t* size_bytes) const;
  uint64_t header_size_bytes() const;
  Status write_to(GgufSink& sink) const;

  uint32_t alignment_ = 32;
  std::vector<std::pair<std::string, GgufValue>> metadata_;  // file order
  std::unordered_set<std::string> keys_;                     // the keys of metadata_
  std::vector<PendingTensor> tensors_;                       // file order
  std::unordered_set<std::string> tensor_names_;             // the names of tensors_
};

}  // namespace cellm
