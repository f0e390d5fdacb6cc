#include "model/gptq.h"

#include <fmt/format.h>

#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/float16.h"
#include "gguf/block_formats.h"
#include "model/hf_json.h"

namespace cellm {
namespace {

using Json = nlohmann::json;

uint32_t load_u32(std::span<const uint8_t> bytes, uint64_t index) {
  uint32_t value;
  std::memcpy(&value, bytes.data() + index * 4, 4);  // little-endian host
  return value;
}

StatusOr<GptqConfig> read_settings(const Json& json, const std::string& where) {
  if (!json.is_object()) return data_loss(where + ": not a JSON object");
  const auto get_int = [&](const char* key, int64_t fallback) -> StatusOr<int64_t> {
    if (!json.contains(key) || json[key].is_null()) return fallback;
    if (!json[key].is_number_integer()) {
      return data_loss(fmt::format("{}: key '{}' is not an integer", where, key));
    }
    return json[key].get<int64_t>();
  };
  const auto get_bool = [&](const char* key, bool fallback) -> StatusOr<bool> {
    if (!json.contains(key) || json[key].is_null()) return fallback;
    if (!json[key].is_boolean()) {
      return data_loss(fmt::format("{}: key '{}' is not true or false", where, key));
    }
    return json[key].get<bool>();
  };
  if (json.contains("quant_method") && json["quant_method"] != "gptq") {
    return unimplemented(fmt::format("{}: quant_method {} is not supported (gptq only)", where,
                                     json_for_message(json["quant_method"])));
  }
  GptqConfig config;
  CELLM_ASSIGN_OR_RETURN(int64_t bits, get_int("bits", 4));
  if (bits != 4) {
    return unimplemented(fmt::format("{}: key 'bits' = {} is not supported (4 only)", where, bits));
  }
  CELLM_ASSIGN_OR_RETURN(int64_t group_size, get_int("group_size", 128));
  if (group_size != 32 && group_size != 64 && group_size != 128) {
    return unimplemented(fmt::format("{}: key 'group_size' = {} is not supported (32, 64 or 128)",
                                     where, group_size));
  }
  config.group_size = static_cast<int32_t>(group_size);
  CELLM_ASSIGN_OR_RETURN(bool desc_act, get_bool("desc_act", false));
  if (desc_act) {
    return unimplemented(fmt::format(
        "{}: key 'desc_act' = true (act-order) is not supported; export a checkpoint quantized "
        "with desc_act false",
        where));
  }
  CELLM_ASSIGN_OR_RETURN(config.sym, get_bool("sym", true));
  std::string format = "gptq";
  if (json.contains("checkpoint_format") && json["checkpoint_format"].is_string()) {
    format = json["checkpoint_format"].get<std::string>();
  }
  if (format != "gptq" && format != "gptq_v2") {
    return unimplemented(
        fmt::format("{}: checkpoint_format '{}' is not supported (gptq, gptq_v2)", where, format));
  }
  config.zeros_stored_minus_one = format == "gptq";
  return config;
}

}  // namespace

StatusOr<GptqConfig> GptqConfig::from_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  const std::string quantize_path = (fs::path(dir) / "quantize_config.json").string();
  const std::string config_path = (fs::path(dir) / "config.json").string();
  std::error_code error;
  if (fs::exists(quantize_path, error)) {
    CELLM_ASSIGN_OR_RETURN(std::string text, read_file_to_string(quantize_path));
    CELLM_ASSIGN_OR_RETURN(const Json json, parse_hf_json(text, quantize_path));
    return read_settings(json, quantize_path);
  }
  CELLM_ASSIGN_OR_RETURN(std::string text, read_file_to_string(config_path));
  CELLM_ASSIGN_OR_RETURN(const Json json, parse_hf_json(text, config_path));
  if (!json.is_object() || !json.contains("quantization_config")) {
    return not_found(
        fmt::format("{}: no quantize_config.json and no 'quantization_config' in "
                    "{}: not a GPTQ checkpoint",
                    dir, config_path));
  }
  return read_settings(json["quantization_config"], config_path + " quantization_config");
}

StatusOr<GptqLinear> GptqLinear::bind(const SafetensorsSet& weights, const std::string& prefix,
                                      const GptqConfig& config, int64_t num_outputs,
                                      int64_t num_inputs) {
  GptqLinear linear;
  linear.prefix_ = prefix;
  linear.config_ = config;
  linear.num_inputs_ = num_inputs;
  linear.num_outputs_ = num_outputs;
  const int64_t group = config.group_size;
  if (num_inputs % group != 0 || num_outputs % 8 != 0) {
    return invalid_argument(fmt::format(
        "{}: a GPTQ layer of {} outputs x {} inputs needs inputs a multiple of the group size {} "
        "and outputs a multiple of 8",
        prefix, num_outputs, num_inputs, group));
  }
  const int64_t num_groups = num_inputs / group;
  struct Part {
    const char* suffix;
    SafetensorsDtype dtype;
    std::vector<uint64_t> shape;
    const SafetensorsTensor** out;
  };
  const auto u = [](int64_t v) { return static_cast<uint64_t>(v); };
  const Part parts[] = {
      {".qweight", SafetensorsDtype::kI32, {u(num_inputs / 8), u(num_outputs)}, &linear.qweight_},
      {".qzeros", SafetensorsDtype::kI32, {u(num_groups), u(num_outputs / 8)}, &linear.qzeros_},
      {".scales", SafetensorsDtype::kF16, {u(num_groups), u(num_outputs)}, &linear.scales_},
  };
  for (const Part& part : parts) {
    const std::string name = prefix + part.suffix;
    const SafetensorsTensor* tensor = weights.find(name);
    if (tensor == nullptr) return not_found("GPTQ tensor '" + name + "' is missing");
    if (tensor->dtype != part.dtype || tensor->shape != part.shape) {
      return data_loss(
          fmt::format("{}: GPTQ tensor '{}' is {} {}, expected {} [{}]", weights.file_of(name),
                      name, safetensors_dtype_name(tensor->dtype), tensor->shape_string(),
                      safetensors_dtype_name(part.dtype), fmt::join(part.shape, ", ")));
    }
    *part.out = tensor;
  }
  if (const SafetensorsTensor* g_idx = weights.find(prefix + ".g_idx"); g_idx != nullptr) {
    if (g_idx->dtype != SafetensorsDtype::kI32 || g_idx->shape != std::vector{u(num_inputs)}) {
      return data_loss(fmt::format("GPTQ tensor '{}.g_idx' is {} {}, expected I32 [{}]", prefix,
                                   safetensors_dtype_name(g_idx->dtype), g_idx->shape_string(),
                                   num_inputs));
    }
    for (int64_t i = 0; i < num_inputs; ++i) {
      if (static_cast<int32_t>(load_u32(g_idx->data, u(i))) != i / group) {
        return unimplemented(fmt::format(
            "GPTQ tensor '{}.g_idx' reorders the groups (act-order), which is not supported",
            prefix));
      }
    }
  }
  bool all_eight = group == 32;
  for (int64_t g = 0; g < num_groups && all_eight; ++g) {
    for (int64_t j = 0; j < num_outputs && all_eight; ++j) all_eight = linear.zero(g, j) == 8;
  }
  linear.type_ = all_eight     ? TensorType::kQ4_0
                 : group == 32 ? TensorType::kQ4_G32
                 : group == 64 ? TensorType::kQ4_G64
                               : TensorType::kQ4_G128;
  return linear;
}

int32_t GptqLinear::quant(int64_t input, int64_t output) const {
  const uint32_t word =
      load_u32(qweight_->data, static_cast<uint64_t>((input / 8) * num_outputs_ + output));
  return static_cast<int32_t>((word >> (4 * (input % 8))) & 0xfu);
}

int32_t GptqLinear::zero(int64_t group, int64_t output) const {
  const uint32_t word =
      load_u32(qzeros_->data, static_cast<uint64_t>(group * (num_outputs_ / 8) + output / 8));
  const auto stored = static_cast<int32_t>((word >> (4 * (output % 8))) & 0xfu);
  return config_.zeros_stored_minus_one ? stored + 1 : stored;
}

uint16_t GptqLinear::scale_bits(int64_t group, int64_t output) const {
  uint16_t bits;
  std::memcpy(&bits, scales_->data.data() + 2 * (group * num_outputs_ + output), 2);
  return bits;
}

void GptqLinear::repack_row(int64_t channel, std::span<uint8_t> out) const {
  const int64_t group = config_.group_size;
  const TensorTypeTraits& traits = tensor_type_traits(type_);
  CELLM_CHECK_EQ(out.size(),
                 static_cast<size_t>(num_inputs_ / traits.block_size) * traits.block_bytes)
      << prefix_ << ": repack_row into a buffer of the wrong size";
  uint8_t* dst = out.data();
  if (type_ == TensorType::kQ4_0) {  // group 32, every zero 8: x = (q - 8) * d
    for (int64_t g = 0; g < num_inputs_ / 32; ++g, dst += sizeof(blocks::BlockQ4_0)) {
      blocks::BlockQ4_0 block{};
      block.d = scale_bits(g, channel);
      for (int64_t j = 0; j < 16; ++j) {
        block.qs[j] = static_cast<uint8_t>(quant(g * 32 + j, channel) |
                                           (quant(g * 32 + j + 16, channel) << 4));
      }
      std::memcpy(dst, &block, sizeof(block));
    }
    return;
  }
  const size_t block_bytes = traits.block_bytes;
  for (int64_t g = 0; g < num_inputs_ / group; ++g, dst += block_bytes) {
    const uint16_t d = scale_bits(g, channel);
    std::memcpy(dst, &d, 2);
    dst[2] = static_cast<uint8_t>(zero(g, channel));
    dst[3] = 0;
    for (int64_t j = 0; j < group; j += 2) {
      dst[4 + j / 2] = static_cast<uint8_t>(quant(g * group + j, channel) |
                                            (quant(g * group + j + 1, channel) << 4));
    }
  }
}

void GptqLinear::dequantize_row(int64_t channel, std::span<float> out) const {
  CELLM_CHECK_EQ(out.size(), static_cast<size_t>(num_inputs_))
      << prefix_ << ": dequantize_row into a buffer of the wrong size";
  const int64_t group = config_.group_size;
  for (int64_t i = 0; i < num_inputs_; ++i) {
    const int64_t g = i / group;
    out[static_cast<size_t>(i)] = static_cast<float>(quant(i, channel) - zero(g, channel)) *
                                  f16_to_f32(scale_bits(g, channel));
  }
}

}  // namespace cellm
