#include "model/safetensors_file.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "model/hf_json.h"

namespace cellm {
namespace {

constexpr uint64_t kMaxHeaderBytes = 100u << 20;  // as the reference implementation caps it
constexpr int kMaxJsonDepth = 8;                  // a valid header is 3 deep

struct DtypeInfo {
  std::string_view name;
  SafetensorsDtype dtype;
  uint32_t bytes;
};

constexpr DtypeInfo kDtypes[] = {
    {"BOOL", SafetensorsDtype::kBool, 1},      {"U8", SafetensorsDtype::kU8, 1},
    {"I8", SafetensorsDtype::kI8, 1},          {"F8_E5M2", SafetensorsDtype::kF8E5M2, 1},
    {"F8_E4M3", SafetensorsDtype::kF8E4M3, 1}, {"I16", SafetensorsDtype::kI16, 2},
    {"U16", SafetensorsDtype::kU16, 2},        {"F16", SafetensorsDtype::kF16, 2},
    {"BF16", SafetensorsDtype::kBF16, 2},      {"I32", SafetensorsDtype::kI32, 4},
    {"U32", SafetensorsDtype::kU32, 4},        {"F32", SafetensorsDtype::kF32, 4},
    {"F64", SafetensorsDtype::kF64, 8},        {"I64", SafetensorsDtype::kI64, 8},
    {"U64", SafetensorsDtype::kU64, 8},
};

// Parses the header, refusing duplicate keys in any object (nlohmann-json would keep the last).
// Returns the parsed value, or sets `error`.
nlohmann::json parse_json(std::string_view text, std::string* error) {
  std::vector<std::set<std::string>> keys;  // one set per open object
  std::string duplicate;
  const nlohmann::json::parser_callback_t callback =
      [&](int /*depth*/, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
        using Event = nlohmann::json::parse_event_t;
        if (event == Event::object_start) {
          keys.emplace_back();
        } else if (event == Event::object_end) {
          if (!keys.empty()) keys.pop_back();
        } else if (event == Event::key && !keys.empty() && parsed.is_string()) {
          const std::string& key = parsed.get_ref<const std::string&>();
          if (!keys.back().insert(key).second && duplicate.empty()) duplicate = key;
        }
        return true;
      };
  try {
    nlohmann::json value = nlohmann::json::parse(text.begin(), text.end(), callback);
    if (!duplicate.empty()) {
      *error = "the header names '" + duplicate + "' twice";
      return nullptr;
    }
    return value;
  } catch (const nlohmann::json::exception& e) {
    *error = std::string("the header is not valid JSON: ") + e.what();
    return nullptr;
  }
}

// A JSON integer ≥ 0, or nullopt.
std::optional<uint64_t> as_unsigned(const nlohmann::json& value) {
  if (value.is_number_unsigned()) return value.get<uint64_t>();
  if (value.is_number_integer() && value.get<int64_t>() >= 0) {
    return static_cast<uint64_t>(value.get<int64_t>());
  }
  return std::nullopt;
}

// Compact JSON text for messages; bytes that are not UTF-8 are replaced, never thrown on.
std::string dump(const nlohmann::json& value) {
  std::string text = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (text.size() > 80) text = text.substr(0, 77) + "...";
  return text;
}

}  // namespace

std::string_view safetensors_dtype_name(SafetensorsDtype dtype) {
  for (const DtypeInfo& info : kDtypes) {
    if (info.dtype == dtype) return info.name;
  }
  return "unknown";
}

uint32_t safetensors_dtype_bytes(SafetensorsDtype dtype) {
  for (const DtypeInfo& info : kDtypes) {
    if (info.dtype == dtype) return info.bytes;
  }
  return 0;
}

std::string SafetensorsTensor::shape_string() const {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

StatusOr<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  CELLM_ASSIGN_OR_RETURN(FileMapping mapping, FileMapping::open(path));
  auto shared = std::make_shared<FileMapping>(std::move(mapping));
  CELLM_ASSIGN_OR_RETURN(SafetensorsFile file, parse(shared->bytes(), path));
  file.mapping_ = std::move(shared);
  return file;
}

StatusOr<SafetensorsFile> SafetensorsFile::parse(std::span<const uint8_t> bytes,
                                                 std::string display_name) {
  SafetensorsFile file;
  file.path_ = std::move(display_name);
  const auto fail = [&](const std::string& what) {
    return data_loss(file.path_ + ": safetensors: " + what);
  };
  if (bytes.size() < 8) {
    return fail(
        fmt::format("the file is {} bytes, shorter than the 8-byte header length", bytes.size()));
  }
  uint64_t header_bytes = 0;
  std::memcpy(&header_bytes, bytes.data(), sizeof(header_bytes));  // little-endian host
  if (header_bytes > kMaxHeaderBytes) {
    return fail(
        fmt::format("header length {} is over the {} byte limit", header_bytes, kMaxHeaderBytes));
  }
  if (header_bytes > bytes.size() - 8) {
    return fail(fmt::format("header length {} runs past the end of the file ({} bytes)",
                            header_bytes, bytes.size()));
  }
  const std::string_view header(reinterpret_cast<const char*>(bytes.data() + 8), header_bytes);
  file.data_ = bytes.subspan(8 + header_bytes);
  try {
    CELLM_RETURN_IF_ERROR(file.parse_header(header, file.data_.size()));
  } catch (const std::exception& e) {  // no exception leaves the reader
    return fail(std::string("the header could not be read: ") + e.what());
  }
  return file;
}

Status SafetensorsFile::parse_header(std::string_view header, uint64_t data_size_bytes) {
  const auto fail = [&](const std::string& what) {
    return data_loss(path_ + ": safetensors: " + what);
  };
  if (json_depth(header, kMaxJsonDepth) > kMaxJsonDepth) {
    return fail(fmt::format("the header nests deeper than {} levels", kMaxJsonDepth));
  }
  std::string error;
  const nlohmann::json json = parse_json(header, &error);
  if (!error.empty()) return fail(error);
  if (!json.is_object()) return fail("the header is not a JSON object");

  for (const auto& item : json.items()) {  // (no structured binding: lambdas below use the name)
    const std::string& name = item.key();
    const nlohmann::json& entry = item.value();
    if (name == "__metadata__") {
      if (!entry.is_object()) return fail("'__metadata__' is not an object");
      for (const auto& [key, value] : entry.items()) {
        if (!value.is_string()) return fail("'__metadata__' entry '" + key + "' is not a string");
        metadata_.emplace_back(key, value.get<std::string>());
      }
      continue;
    }
    const auto bad = [&](const std::string& what) {
      return fail("tensor '" + name + "': " + what);
    };
    if (!entry.is_object()) return bad("its entry is not an object");
    const auto dtype_it = entry.find("dtype");
    const auto shape_it = entry.find("shape");
    const auto offsets_it = entry.find("data_offsets");
    if (dtype_it == entry.end() || !dtype_it->is_string()) return bad("no string 'dtype'");
    if (shape_it == entry.end() || !shape_it->is_array()) return bad("no array 'shape'");
    if (offsets_it == entry.end() || !offsets_it->is_array() || offsets_it->size() != 2) {
      return bad("no 'data_offsets' pair");
    }

    SafetensorsTensor tensor;
    tensor.name = name;
    const std::string& dtype_name = dtype_it->get_ref<const std::string&>();
    const DtypeInfo* dtype = nullptr;
    for (const DtypeInfo& info : kDtypes) {
      if (info.name == dtype_name) dtype = &info;
    }
    if (dtype == nullptr) {
      return unimplemented(path_ + ": safetensors: tensor '" + name + "': unknown dtype '" +
                           dtype_name + "'");
    }
    tensor.dtype = dtype->dtype;
    uint64_t num_elements = 1;
    bool overflow = false;
    for (const nlohmann::json& dim : *shape_it) {
      const std::optional<uint64_t> value = as_unsigned(dim);
      if (!value) return bad("shape " + dump(*shape_it) + " is not a list of sizes");
      tensor.shape.push_back(*value);
      if (*value != 0 && num_elements > UINT64_MAX / *value) overflow = true;
      num_elements *= *value;
    }
    if (num_elements != 0 && num_elements > UINT64_MAX / dtype->bytes) overflow = true;
    if (overflow) return bad("shape " + tensor.shape_string() + " is too large");
    tensor.num_elements = num_elements;
    const std::optional<uint64_t> begin = as_unsigned((*offsets_it)[0]);
    const std::optional<uint64_t> end = as_unsigned((*offsets_it)[1]);
    if (!begin || !end) return bad("data_offsets " + dump(*offsets_it) + " are not sizes");
    if (*end < *begin)
      return bad(fmt::format("data_offsets [{}, {}] end before they begin", *begin, *end));
    if (*end > data_size_bytes) {
      return bad(fmt::format("data_offsets [{}, {}] run past the data section ({} bytes)", *begin,
                             *end, data_size_bytes));
    }
    const uint64_t expected = num_elements * dtype->bytes;
    if (*end - *begin != expected) {
      return bad(fmt::format("data_offsets [{}, {}] hold {} bytes, but shape {} of {} needs {}",
                             *begin, *end, *end - *begin, tensor.shape_string(), dtype->name,
                             expected));
    }
    tensor.offset_bytes = *begin;
    tensor.data = data_.subspan(*begin, *end - *begin);
    tensors_.push_back(std::move(tensor));
  }

  std::sort(
      tensors_.begin(), tensors_.end(), [](const SafetensorsTensor& a, const SafetensorsTensor& b) {
        return a.offset_bytes != b.offset_bytes ? a.offset_bytes < b.offset_bytes : a.name < b.name;
      });
  const SafetensorsTensor* previous = nullptr;  // the non-empty tensor ending last so far
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const SafetensorsTensor& tensor = tensors_[i];
    index_.emplace(tensor.name, i);
    if (tensor.data.empty()) continue;
    if (previous != nullptr &&
        tensor.offset_bytes < previous->offset_bytes + previous->data.size()) {
      return fail(fmt::format(
          "tensor '{}' (bytes {} to {}) overlaps tensor '{}' (bytes {} to {})", tensor.name,
          tensor.offset_bytes, tensor.offset_bytes + tensor.data.size(), previous->name,
          previous->offset_bytes, previous->offset_bytes + previous->data.size()));
    }
    if (previous == nullptr ||
        tensor.offset_bytes + tensor.data.size() > previous->offset_bytes + previous->data.size()) {
      previous = &tensor;
    }
  }
  return ok_status();
}

const SafetensorsTensor* SafetensorsFile::find(std::string_view name) const {
  const auto it = index_.find(std::string(name));
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace cellm
