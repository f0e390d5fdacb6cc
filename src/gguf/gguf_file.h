// GgufFile: a parsed, validated GGUF v2/v3 file — metadata, tensor infos, tensor bytes.
//
// `GgufFile::open(path)` maps the file and parses it; `GgufFile::parse(bytes)` parses bytes the
// caller keeps alive (fuzzing, files built in memory). Parsing validates everything before it
// returns: every length and count against the bytes left, every tensor's dims, type, size,
// alignment and place inside the data section, no two tensors overlapping, no duplicate names or
// keys. Any malformed input is a Status naming the problem and the byte offset; never a crash,
// an abort or an allocation larger than the input justifies. Versions other than 2 and 3 are
// Unimplemented; metadata arrays may hold at most 2^24 elements in all (ResourceExhausted);
// everything else malformed is DataLoss. A dim of 0 is allowed (an empty tensor, as in GGML);
// a file without tensors may end right after its metadata (llama.cpp's vocab-only files).
//
// It knows bytes, not models: what a key means is model/'s and tokenizer/'s business.
// Writing is gguf_writer.h. Thread-safety: immutable after parse; read from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "core/file_mapping.h"
#include "core/status.h"
#include "gguf/tensor_type.h"

namespace cellm {

class GgufCursor;

// On-disk metadata value type ids.
enum class GgufValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

std::string_view gguf_value_type_name(GgufValueType type);

// One metadata value: a scalar, a string, or an array of values of one element type (arrays of
// arrays allowed). Integers keep their on-disk type; the accessors convert when the value fits.
class GgufValue {
 public:
  struct Array {
    GgufValueType element_type = GgufValueType::kUint8;
    std::vector<GgufValue> elements;
  };

  GgufValue() = default;
  static GgufValue u8(uint8_t v);
  static GgufValue i8(int8_t v);
  static GgufValue u16(uint16_t v);
  static GgufValue i16(int16_t v);
  static GgufValue u32(uint32_t v);
  static GgufValue i32(int32_t v);
  static GgufValue u64(uint64_t v);
  static GgufValue i64(int64_t v);
  static GgufValue f32(float v);
  static GgufValue f64(double v);
  static GgufValue boolean(bool v);
  static GgufValue string(std::string v);
  static GgufValue array(GgufValueType element_type, std::vector<GgufValue> elements);

  GgufValueType type() const { return type_; }

  // Integer of any integer type, if its value fits the requested type.
  std::optional<uint64_t> as_u64() const;
  std::optional<int64_t> as_i64() const;
  // f32 or f64 (integers are not silently treated as floats).
  std::optional<double> as_f64() const;
  std::optional<bool> as_bool() const;
  const std::string* as_string() const;  // nullptr unless a string
  const Array* as_array() const;         // nullptr unless an array

  // A short human rendering for `cellm inspect` ("[32000 strings: '<unk>', '<s>', ...]").
  std::string summary(size_t max_elements = 6) const;

  friend bool operator==(const GgufValue& a, const GgufValue& b);

 private:
  template <typename T>
  static GgufValue make(GgufValueType type, T data) {
    GgufValue value;
    value.type_ = type;
    value.data_ = std::move(data);
    return value;
  }

  GgufValueType type_ = GgufValueType::kUint8;
  // Integers widened to 64 bits (signedness from type_), floats as double (f32 exact), bool,
  // string, or array.
  std::variant<uint64_t, int64_t, double, bool, std::string, std::shared_ptr<const Array>> data_;
};

struct GgufTensorInfo {
  std::string name;
  TensorType type = TensorType::kF32;
  std::vector<uint64_t> dims;  // innermost first (GGML "ne"): a [rows, cols] matrix is {cols, rows}
  uint64_t offset_bytes = 0;   // from the start of the data section, a multiple of the alignment
  uint64_t size_bytes = 0;     // rows × row_size_bytes(type, dims[0])
  uint64_t num_elements = 0;   // product of dims

  // dims[i], or 1 past the last dimension (so a vector is a 1-row matrix).
  uint64_t dim(size_t i) const { return i < dims.size() ? dims[i] : 1; }
  // "64x512" as llama.cpp prints it (innermost first).
  std::string shape_string() const;
};

class GgufFile {
 public:
  // Maps and parses the file; errors are prefixed with the path.
  static StatusOr<GgufFile> open(const std::string& path);
  // Parses bytes the caller keeps alive while the GgufFile is used.
  static StatusOr<GgufFile> parse(std::span<const uint8_t> bytes);

  GgufFile(GgufFile&&) noexcept = default;
  GgufFile& operator=(GgufFile&&) noexcept = default;

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }            // general.alignment or 32
  uint64_t data_offset_bytes() const { return data_offset_; }  // start of the data section
  const std::string& path() const { return path_; }            // empty when parsed from bytes

  // Metadata in file order.
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return metadata_; }
  bool has(std::string_view key) const { return find(key) != nullptr; }
  const GgufValue* find(std::string_view key) const;

  // Typed getters: NotFound when the key is absent; DataLoss naming the key, its type and the
  // expected type when the value has another type or does not fit.
  StatusOr<uint32_t> get_u32(std::string_view key) const;
  StatusOr<uint64_t> get_u64(std::string_view key) const;
  StatusOr<int32_t> get_i32(std::string_view key) const;
  StatusOr<float> get_f32(std::string_view key) const;
  StatusOr<bool> get_bool(std::string_view key) const;
  StatusOr<std::string> get_string(std::string_view key) const;
  StatusOr<std::vector<std::string>> get_string_array(std::string_view key) const;
  StatusOr<std::vector<float>> get_f32_array(std::string_view key) const;
  StatusOr<std::vector<int32_t>> get_i32_array(std::string_view key) const;
  StatusOr<std::vector<uint32_t>> get_u32_array(std::string_view key) const;

  // Tensors in file order.
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* find_tensor(std::string_view name) const;
  // The tensor's bytes: a span over the mapping (or the parsed bytes).
  std::span<const uint8_t> tensor_data(const GgufTensorInfo& info) const;

 private:
  // Heterogeneous lookup: find(std::string_view) without building a std::string.
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view text) const { return std::hash<std::string_view>{}(text); }
  };

  GgufFile() = default;
  // Parsing steps (gguf_file.cpp), in file order; each validates what it reads.
  Status read_metadata(GgufCursor& cursor, uint64_t num_kv);
  Status read_tensor_infos(GgufCursor& cursor, uint64_t num_tensors);
  Status place_tensor_data(uint64_t header_end_bytes);

  std::shared_ptr<FileMapping> mapping_;  // null when parsed from caller-owned bytes
  std::span<const uint8_t> bytes_;
  std::string path_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::unordered_map<std::string, size_t, StringHash, std::equal_to<>>
      metadata_index_;  // key -> index into metadata_
  std::vector<GgufTensorInfo> tensors_;
  std::unordered_map<std::string, size_t, StringHash, std::equal_to<>>
      tensor_index_;  // name -> index into tensors_
};

}  // namespace cellm
