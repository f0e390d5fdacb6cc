// GgufFile: parsing and validating a GGUF v2/v3 file. Typed getters: gguf_file_getters.cpp.
#include "gguf/gguf_file.h"

#include <fmt/format.h>

#include <algorithm>

#include "gguf/gguf_cursor.h"
#include "gguf/gguf_format.h"
#include "gguf/gguf_tensor_geometry.h"
#include "gguf/gguf_text.h"
#include "gguf/gguf_value_reader.h"

namespace cellm {
namespace {

// Smallest encodings: a key (empty name, type, a u8 value) and a tensor info (empty name,
// one dim, type, offset). Counts beyond bytes / these sizes cannot be honest.
constexpr uint64_t kMinKeyValueBytes = 8 + 4 + 1;
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;

std::string offset_text(uint64_t offset) { return "offset " + std::to_string(offset); }

std::string key_label(uint64_t index, std::string_view key) {
  return "key #" + std::to_string(index) + " " + gguf_quote(key);
}

std::string tensor_label(uint64_t index, std::string_view name) {
  return "tensor #" + std::to_string(index) + " " + gguf_quote(name);
}

Status read_header(GgufCursor& cursor, uint32_t* version, uint64_t* num_tensors, uint64_t* num_kv) {
  uint32_t magic = 0;
  if (!cursor.read(&magic)) return gguf_truncated(cursor, "the magic 'GGUF'");
  if (magic != kGgufMagic) {
    const std::string_view seen(reinterpret_cast<const char*>(&magic), sizeof(magic));
    return data_loss("gguf: bad magic " + gguf_quote(seen) + " at offset 0 (expected 'GGUF')");
  }
  if (!cursor.read(version)) return gguf_truncated(cursor, "the version");
  if (*version != 2 && *version != 3) {
    const uint32_t swapped = __builtin_bswap32(*version);
    if (swapped == 2 || swapped == 3) {
      return unimplemented("gguf: big-endian GGUF v" + std::to_string(swapped) +
                           " (version field at offset 4) is not supported");
    }
    return unimplemented("gguf: unsupported version " + std::to_string(*version) +
                         " at offset 4 (cellm reads GGUF v2 and v3)");
  }
  if (!cursor.read(num_tensors)) return gguf_truncated(cursor, "the tensor count");
  if (!cursor.read(num_kv)) return gguf_truncated(cursor, "the metadata key count");
  if (*num_kv > cursor.remaining() / kMinKeyValueBytes) {
    return data_loss("gguf: metadata key count " + std::to_string(*num_kv) +
                     " at offset 16 cannot fit in the " + std::to_string(cursor.remaining()) +
                     " bytes after the header (at least " + std::to_string(kMinKeyValueBytes) +
                     " bytes each): truncated or corrupt");
  }
  if (*num_tensors > cursor.remaining() / kMinTensorInfoBytes) {
    return data_loss("gguf: tensor count " + std::to_string(*num_tensors) +
                     " at offset 8 cannot fit in the " + std::to_string(cursor.remaining()) +
                     " bytes after the header (at least " + std::to_string(kMinTensorInfoBytes) +
                     " bytes each): truncated or corrupt");
  }
  return ok_status();
}

// Checks general.alignment, whose value starts at `value_offset`: a u32, nonzero, a power of two.
StatusOr<uint64_t> parse_alignment(const GgufValue& value, uint64_t value_offset) {
  const std::string where = " (value at offset " + std::to_string(value_offset) + ")";
  if (value.type() != GgufValueType::kUint32) {
    return data_loss("gguf: general.alignment has type " +
                     std::string(gguf_value_type_name(value.type())) + ", expected u32" + where);
  }
  const uint64_t alignment = *value.as_u64();
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
    return data_loss("gguf: general.alignment is " + std::to_string(alignment) +
                     ", not a nonzero power of two" + where);
  }
  return alignment;
}

}  // namespace

std::string GgufTensorInfo::shape_string() const { return gguf_shape_string(dims); }

StatusOr<GgufFile> GgufFile::open(const std::string& path) {
  StatusOr<FileMapping> mapping = FileMapping::open(path);
  if (!mapping.ok()) return mapping.status();
  auto shared = std::make_shared<FileMapping>(std::move(mapping).value());
  StatusOr<GgufFile> file = parse(shared->bytes());
  if (!file.ok()) return file.status().with_context(path);
  file->mapping_ = std::move(shared);
  file->path_ = path;
  return file;
}

StatusOr<GgufFile> GgufFile::parse(std::span<const uint8_t> bytes) {
  GgufFile file;
  file.bytes_ = bytes;
  GgufCursor cursor(bytes);
  uint64_t num_tensors = 0;
  uint64_t num_kv = 0;
  CELLM_RETURN_IF_ERROR(read_header(cursor, &file.version_, &num_tensors, &num_kv));
  CELLM_RETURN_IF_ERROR(file.read_metadata(cursor, num_kv));
  CELLM_RETURN_IF_ERROR(file.read_tensor_infos(cursor, num_tensors));
  CELLM_RETURN_IF_ERROR(file.place_tensor_data(cursor.offset()));
  return file;
}

Status GgufFile::read_metadata(GgufCursor& cursor, uint64_t num_kv) {
  metadata_.reserve(num_kv);
  metadata_index_.reserve(num_kv);
  uint64_t elements_left = kGgufMaxMetadataElements;
  for (uint64_t i = 0; i < num_kv; ++i) {
    CELLM_ASSIGN_OR_RETURN(std::string_view key,
                           read_gguf_string(cursor, [&] { return "key #" + std::to_string(i); }));
    uint32_t type_id = 0;
    if (!cursor.read(&type_id)) {
      return gguf_truncated(cursor, "the value type of " + key_label(i, key));
    }
    if (!is_gguf_value_type(type_id)) {
      return data_loss("gguf: " + key_label(i, key) + " has unknown value type " +
                       std::to_string(type_id) + " at " + offset_text(cursor.offset() - 4));
    }
    const uint64_t value_offset = cursor.offset();
    CELLM_ASSIGN_OR_RETURN(GgufValue value,
                           read_gguf_value(cursor, type_id, i, key, &elements_left));
    const auto [it, inserted] = metadata_index_.emplace(std::string(key), metadata_.size());
    if (!inserted) {
      return data_loss("gguf: duplicate " + key_label(i, key) + " (also key #" +
                       std::to_string(it->second) + ") ending at " + offset_text(cursor.offset()));
    }
    if (key == kGgufAlignmentKey) {
      CELLM_ASSIGN_OR_RETURN(alignment_, parse_alignment(value, value_offset));
    }
    metadata_.emplace_back(std::string(key), std::move(value));
  }
  return ok_status();
}

Status GgufFile::read_tensor_infos(GgufCursor& cursor, uint64_t num_tensors) {
  tensors_.reserve(num_tensors);
  tensor_index_.reserve(num_tensors);
  for (uint64_t i = 0; i < num_tensors; ++i) {
    const uint64_t info_offset = cursor.offset();
    CELLM_ASSIGN_OR_RETURN(std::string_view name, read_gguf_string(cursor, [&] {
                             return "the name of tensor #" + std::to_string(i);
                           }));
    const std::string label = tensor_label(i, name);
    auto problem = [&](std::string_view text) {
      return data_loss("gguf: " + label + " (info at " + offset_text(info_offset) +
                       "): " + std::string(text));
    };
    uint32_t num_dims = 0;
    if (!cursor.read(&num_dims)) return gguf_truncated(cursor, "the dim count of " + label);
    if (num_dims == 0 || num_dims > kGgufMaxDims) {
      return problem("has " + std::to_string(num_dims) + " dims (GGUF tensors have 1 to " +
                     std::to_string(kGgufMaxDims) + ")");
    }
    GgufTensorInfo info;
    info.name = std::string(name);
    info.dims.resize(num_dims);
    for (uint32_t d = 0; d < num_dims; ++d) {
      if (!cursor.read(&info.dims[d])) {
        return gguf_truncated(cursor, "dim " + std::to_string(d) + " of " + label);
      }
    }
    uint32_t type_id = 0;
    if (!cursor.read(&type_id)) return gguf_truncated(cursor, "the type of " + label);
    const std::optional<TensorTypeTraits> traits = tensor_type_traits(type_id);
    if (!traits) return problem("unknown tensor type id " + std::to_string(type_id));
    info.type = traits->type;
    if (!cursor.read(&info.offset_bytes)) {
      return gguf_truncated(cursor, "the data offset of " + label);
    }
    StatusOr<TensorGeometry> geometry = tensor_geometry(info.type, info.dims);
    if (!geometry.ok()) {
      return problem(std::string(traits->name) + " " + info.shape_string() + ": " +
                     geometry.status().message());
    }
    info.num_elements = geometry->num_elements;
    info.size_bytes = geometry->size_bytes;
    if (info.offset_bytes % alignment_ != 0) {
      return problem("data offset " + std::to_string(info.offset_bytes) +
                     " is not a multiple of the alignment " + std::to_string(alignment_));
    }
    const auto [it, inserted] = tensor_index_.emplace(info.name, tensors_.size());
    if (!inserted) {
      return problem("duplicate name (also tensor #" + std::to_string(it->second) + ")");
    }
    tensors_.push_back(std::move(info));
  }
  return ok_status();
}

Status GgufFile::place_tensor_data(uint64_t header_end_bytes) {
  const uint64_t file_size = bytes_.size();
  const uint64_t padding = (alignment_ - header_end_bytes % alignment_) % alignment_;
  data_offset_ = header_end_bytes + padding;
  if (data_offset_ > file_size) {
    // A file without tensors may end right after its metadata (llama.cpp's vocab-only files).
    if (tensors_.empty()) {
      data_offset_ = file_size;
      return ok_status();
    }
    return data_loss("gguf: the data section starts at " + offset_text(data_offset_) +
                     " (header end " + std::to_string(header_end_bytes) +
                     " rounded up to the alignment " + std::to_string(alignment_) +
                     "), past the end of the file (size " + std::to_string(file_size) + ")");
  }
  const uint64_t data_size = file_size - data_offset_;
  for (const GgufTensorInfo& info : tensors_) {
    if (info.offset_bytes > data_size || info.size_bytes > data_size - info.offset_bytes) {
      const uint64_t begin = data_offset_ + std::min(info.offset_bytes, file_size);
      std::string range = info.offset_bytes > file_size
                              ? "at offset " + std::to_string(data_offset_) + " + " +
                                    std::to_string(info.offset_bytes)
                              : fmt::format("[{}, {})", begin, begin + info.size_bytes);
      return data_loss("gguf: tensor " + gguf_quote(info.name) + " data " + range +
                       " runs past the end of the file (size " + std::to_string(file_size) + ")");
    }
  }
  // No two non-empty tensors may share bytes: sort by offset and compare neighbours.
  std::vector<const GgufTensorInfo*> by_offset;
  by_offset.reserve(tensors_.size());
  for (const GgufTensorInfo& info : tensors_) {
    if (info.size_bytes > 0) by_offset.push_back(&info);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const auto* a, const auto* b) { return a->offset_bytes < b->offset_bytes; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const GgufTensorInfo& a = *by_offset[i - 1];
    const GgufTensorInfo& b = *by_offset[i];
    if (a.offset_bytes + a.size_bytes > b.offset_bytes) {
      auto range = [this](const GgufTensorInfo& t) {
        return fmt::format("[{}, {})", data_offset_ + t.offset_bytes,
                           data_offset_ + t.offset_bytes + t.size_bytes);
      };
      return data_loss("gguf: tensor " + gguf_quote(a.name) + " data " + range(a) +
                       " overlaps tensor " + gguf_quote(b.name) + " data " + range(b));
    }
  }
  return ok_status();
}

const GgufValue* GgufFile::find(std::string_view key) const {
  const auto it = metadata_index_.find(key);
  return it == metadata_index_.end() ? nullptr : &metadata_[it->second].second;
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  const auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

std::span<const uint8_t> GgufFile::tensor_data(const GgufTensorInfo& info) const {
  CELLM_CHECK(data_offset_ <= bytes_.size() && info.offset_bytes <= bytes_.size() - data_offset_ &&
              info.size_bytes <= bytes_.size() - data_offset_ - info.offset_bytes)
      << "tensor_data: tensor '" << info.name << "' is not inside this file's data section";
  return bytes_.subspan(data_offset_ + info.offset_bytes, info.size_bytes);
}

}  // namespace cellm
