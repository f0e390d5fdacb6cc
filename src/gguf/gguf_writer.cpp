#include "gguf/gguf_writer.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "gguf/gguf_cursor.h"
#include "gguf/gguf_format.h"
#include "gguf/gguf_tensor_geometry.h"
#include "gguf/gguf_text.h"

namespace cellm {
namespace {

constexpr uint32_t kGgufVersion = 3;

uint64_t padding_for(uint64_t offset, uint64_t alignment) {
  return (alignment - offset % alignment) % alignment;
}

bool is_power_of_two(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

uint64_t encoded_size(const GgufValue& value) {
  if (const std::string* text = value.as_string()) return 8 + text->size();
  if (const GgufValue::Array* array = value.as_array()) {
    uint64_t total = gguf_min_value_bytes(GgufValueType::kArray);
    for (const GgufValue& element : array->elements) total += encoded_size(element);
    return total;
  }
  return gguf_min_value_bytes(value.type());
}

}  // namespace

// Where the bytes go: a growing vector or a FILE*. Errors are the sink's own (IoError with path).
class GgufSink {
 public:
  virtual ~GgufSink() = default;
  virtual Status write(const void* data, size_t size) = 0;

  template <typename T>
  Status put(T value) {
    return write(&value, sizeof(value));
  }
  Status put_string(std::string_view text) {
    CELLM_RETURN_IF_ERROR(put<uint64_t>(text.size()));
    return write(text.data(), text.size());
  }
  Status put_zeros(uint64_t count) {
    static constexpr uint8_t kZeros[256] = {};
    while (count > 0) {
      const size_t n = std::min<uint64_t>(count, sizeof(kZeros));
      CELLM_RETURN_IF_ERROR(write(kZeros, n));
      count -= n;
    }
    return ok_status();
  }
  Status put_value(const GgufValue& value) {
    switch (value.type()) {
      case GgufValueType::kUint8:
        return put<uint8_t>(static_cast<uint8_t>(*value.as_u64()));
      case GgufValueType::kInt8:
        return put<int8_t>(static_cast<int8_t>(*value.as_i64()));
      case GgufValueType::kUint16:
        return put<uint16_t>(static_cast<uint16_t>(*value.as_u64()));
      case GgufValueType::kInt16:
        return put<int16_t>(static_cast<int16_t>(*value.as_i64()));
      case GgufValueType::kUint32:
        return put<uint32_t>(static_cast<uint32_t>(*value.as_u64()));
      case GgufValueType::kInt32:
        return put<int32_t>(static_cast<int32_t>(*value.as_i64()));
      case GgufValueType::kUint64:
        return put<uint64_t>(*value.as_u64());
      case GgufValueType::kInt64:
        return put<int64_t>(*value.as_i64());
      case GgufValueType::kFloat32:
        return put<float>(static_cast<float>(*value.as_f64()));
      case GgufValueType::kFloat64:
        return put<double>(*value.as_f64());
      case GgufValueType::kBool:
        return put<uint8_t>(*value.as_bool() ? 1 : 0);
      case GgufValueType::kString:
        return put_string(*value.as_string());
      case GgufValueType::kArray: {
        const GgufValue::Array& array = *value.as_array();
        CELLM_RETURN_IF_ERROR(put<uint32_t>(static_cast<uint32_t>(array.element_type)));
        CELLM_RETURN_IF_ERROR(put<uint64_t>(array.elements.size()));
        for (const GgufValue& element : array.elements) CELLM_RETURN_IF_ERROR(put_value(element));
        return ok_status();
      }
    }
    CELLM_CHECK(false) << "GgufValue of unknown type " << static_cast<uint32_t>(value.type());
    return ok_status();
  }
};

namespace {

class VectorSink final : public GgufSink {
 public:
  explicit VectorSink(std::vector<uint8_t>* out) : out_(out) {}
  Status write(const void* data, size_t size) override {
    const auto* bytes = static_cast<const uint8_t*>(data);
    out_->insert(out_->end(), bytes, bytes + size);
    return ok_status();
  }

 private:
  std::vector<uint8_t>* out_;
};

class FileSink final : public GgufSink {
 public:
  FileSink(std::FILE* file, const std::string& path) : file_(file), path_(path) {}
  Status write(const void* data, size_t size) override {
    if (size > 0 && std::fwrite(data, 1, size, file_) != size) {
      return io_error("cannot write '" + path_ + "': " + std::strerror(errno));
    }
    return ok_status();
  }

 private:
  std::FILE* file_;
  const std::string& path_;
};

}  // namespace

Status GgufWriter::set_alignment(uint32_t alignment_bytes) {
  if (!is_power_of_two(alignment_bytes)) {
    return invalid_argument("gguf writer: alignment " + std::to_string(alignment_bytes) +
                            " is not a nonzero power of two");
  }
  alignment_ = alignment_bytes;
  for (auto& [key, value] : metadata_) {
    if (key == kGgufAlignmentKey) {
      value = GgufValue::u32(alignment_bytes);
      return ok_status();
    }
  }
  if (alignment_bytes != kGgufDefaultAlignment) {
    metadata_.emplace_back(std::string(kGgufAlignmentKey), GgufValue::u32(alignment_bytes));
    keys_.insert(std::string(kGgufAlignmentKey));
  }
  return ok_status();
}

Status GgufWriter::add_metadata(std::string key, GgufValue value) {
  if (key.empty()) return invalid_argument("gguf writer: empty metadata key");
  if (keys_.contains(key)) {
    return invalid_argument("gguf writer: duplicate metadata key " + gguf_quote(key));
  }
  if (key == kGgufAlignmentKey) {
    const std::optional<uint64_t> alignment = value.as_u64();
    if (value.type() != GgufValueType::kUint32 || !is_power_of_two(*alignment)) {
      return invalid_argument(
          "gguf writer: general.alignment must be a u32 nonzero power of "
          "two, got " +
          value.summary() + " (" + std::string(gguf_value_type_name(value.type())) + ")");
    }
    alignment_ = static_cast<uint32_t>(*alignment);
  }
  keys_.insert(key);
  metadata_.emplace_back(std::move(key), std::move(value));
  return ok_status();
}

Status GgufWriter::check_tensor(const std::string& name, TensorType type,
                                const std::vector<uint64_t>& dims, uint64_t* size_bytes) const {
  if (name.empty()) return invalid_argument("gguf writer: empty tensor name");
  if (tensor_names_.contains(name)) {
    return invalid_argument("gguf writer: duplicate tensor name " + gguf_quote(name));
  }
  if (!tensor_type_traits(static_cast<uint32_t>(type))) {
    return invalid_argument("gguf writer: tensor " + gguf_quote(name) + " has unknown type id " +
                            std::to_string(static_cast<uint32_t>(type)));
  }
  StatusOr<TensorGeometry> geometry = tensor_geometry(type, dims);
  if (!geometry.ok()) {
    return invalid_argument("gguf writer: tensor " + gguf_quote(name) + " (" +
                            std::string(tensor_type_name(type)) + " " + gguf_shape_string(dims) +
                            ") " + geometry.status().message());
  }
  *size_bytes = geometry->size_bytes;
  return ok_status();
}

Status GgufWriter::add_tensor(std::string name, TensorType type, std::vector<uint64_t> dims,
                              std::span<const uint8_t> bytes) {
  uint64_t size_bytes = 0;
  CELLM_RETURN_IF_ERROR(check_tensor(name, type, dims, &size_bytes));
  if (bytes.size() != size_bytes) {
    return invalid_argument("gguf writer: tensor " + gguf_quote(name) + " (" +
                            std::string(tensor_type_name(type)) + " " + gguf_shape_string(dims) +
                            ") needs " + std::to_string(size_bytes) + " bytes, got " +
                            std::to_string(bytes.size()));
  }
  tensor_names_.insert(name);
  tensors_.push_back({std::move(name), type, std::move(dims), size_bytes, bytes, nullptr});
  return ok_status();
}

Status GgufWriter::add_tensor(std::string name, TensorType type, std::vector<uint64_t> dims,
                              FillTensor fill) {
  CELLM_CHECK(fill != nullptr) << "GgufWriter::add_tensor: empty fill callback";
  uint64_t size_bytes = 0;
  CELLM_RETURN_IF_ERROR(check_tensor(name, type, dims, &size_bytes));
  tensor_names_.insert(name);
  tensors_.push_back({std::move(name), type, std::move(dims), size_bytes, {}, std::move(fill)});
  return ok_status();
}

uint64_t GgufWriter::header_size_bytes() const {
  uint64_t size = 4 + 4 + 8 + 8;
  for (const auto& [key, value] : metadata_) size += 8 + key.size() + 4 + encoded_size(value);
  for (const PendingTensor& tensor : tensors_) {
    size += 8 + tensor.name.size() + 4 + 8 * tensor.dims.size() + 4 + 8;
  }
  return size;
}

uint64_t GgufWriter::file_size_bytes() const {
  uint64_t size = header_size_bytes();
  if (tensors_.empty()) return size;  // no data section, no padding (as llama.cpp's vocab files)
  size += padding_for(size, alignment_);
  for (const PendingTensor& tensor : tensors_) {
    size += tensor.size_bytes + padding_for(tensor.size_bytes, alignment_);
  }
  return size;
}

Status GgufWriter::write_to(GgufSink& sink) const {
  CELLM_RETURN_IF_ERROR(sink.put<uint32_t>(kGgufMagic));
  CELLM_RETURN_IF_ERROR(sink.put<uint32_t>(kGgufVersion));
  CELLM_RETURN_IF_ERROR(sink.put<uint64_t>(tensors_.size()));
  CELLM_RETURN_IF_ERROR(sink.put<uint64_t>(metadata_.size()));
  for (const auto& [key, value] : metadata_) {
    CELLM_RETURN_IF_ERROR(sink.put_string(key));
    CELLM_RETURN_IF_ERROR(sink.put<uint32_t>(static_cast<uint32_t>(value.type())));
    CELLM_RETURN_IF_ERROR(sink.put_value(value));
  }
  uint64_t offset = 0;  // from the start of the data section; each tensor starts aligned
  for (const PendingTensor& tensor : tensors_) {
    CELLM_RETURN_IF_ERROR(sink.put_string(tensor.name));
    CELLM_RETURN_IF_ERROR(sink.put<uint32_t>(static_cast<uint32_t>(tensor.dims.size())));
    for (const uint64_t dim : tensor.dims) CELLM_RETURN_IF_ERROR(sink.put<uint64_t>(dim));
    CELLM_RETURN_IF_ERROR(sink.put<uint32_t>(static_cast<uint32_t>(tensor.type)));
    CELLM_RETURN_IF_ERROR(sink.put<uint64_t>(offset));
    offset += tensor.size_bytes + padding_for(tensor.size_bytes, alignment_);
  }
  if (tensors_.empty()) return ok_status();
  CELLM_RETURN_IF_ERROR(sink.put_zeros(padding_for(header_size_bytes(), alignment_)));
  std::vector<uint8_t> buffer;  // [size_bytes] of the tensor being filled
  for (const PendingTensor& tensor : tensors_) {
    if (tensor.fill) {
      buffer.assign(tensor.size_bytes, 0);
      Status filled = tensor.fill(std::span<uint8_t>(buffer));
      if (!filled.ok()) {
        return filled.with_context("gguf writer: filling tensor " + gguf_quote(tensor.name));
      }
      CELLM_RETURN_IF_ERROR(sink.write(buffer.data(), buffer.size()));
    } else {
      CELLM_RETURN_IF_ERROR(sink.write(tensor.bytes.data(), tensor.bytes.size()));
    }
    CELLM_RETURN_IF_ERROR(sink.put_zeros(padding_for(tensor.size_bytes, alignment_)));
  }
  return ok_status();
}

StatusOr<std::vector<uint8_t>> GgufWriter::write_bytes() const {
  std::vector<uint8_t> out;
  out.reserve(file_size_bytes());
  VectorSink sink(&out);
  CELLM_RETURN_IF_ERROR(write_to(sink));
  return out;
}

Status GgufWriter::write_file(const std::string& path) const {
  const std::string temp_path = path + ".tmp";
  std::FILE* file = std::fopen(temp_path.c_str(), "wb");
  if (file == nullptr) {
    return io_error("cannot create '" + temp_path + "': " + std::strerror(errno));
  }
  FileSink sink(file, temp_path);
  Status status = write_to(sink);
  if (status.ok() && (std::fflush(file) != 0 || ::fsync(fileno(file)) != 0)) {
    status = io_error("cannot flush '" + temp_path + "': " + std::strerror(errno));
  }
  if (std::fclose(file) != 0 && status.ok()) {
    status = io_error("cannot close '" + temp_path + "': " + std::strerror(errno));
  }
  if (status.ok() && std::rename(temp_path.c_str(), path.c_str()) != 0) {
    status =
        io_error("cannot rename '" + temp_path + "' to '" + path + "': " + std::strerror(errno));
  }
  if (!status.ok()) std::remove(temp_path.c_str());
  return status;
}

}  // namespace cellm
