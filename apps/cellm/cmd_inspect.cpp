// `cellm inspect FILE [--json]`: a GGUF dump — version, alignment, every metadata key with its
// type and a short value (long arrays abbreviated), every tensor (name, type, shape, offset,
// size) — and whether cellm can run the file. A malformed file gets one error line naming the
// offset and exit status 1.
#include <fmt/format.h>

#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "commands.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_text.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "program/program_spec.h"
#include "tokenizer/tokenizer.h"

namespace cellm::app {
namespace {

struct InspectOptions {
  std::string path;
  bool json = false;
};

// What cellm can say about running a file.
struct RunnabilityReport {
  std::optional<bool> can_run;  // nullopt: not decided
  std::string reason;           // one line: why not, or what is not checked yet
  // Tensor types present in the file that cellm cannot dequantize, with their tensor counts.
  std::map<std::string, size_t> types_without_dequantization;
};

// Whether cellm can run the file: every tensor type has a dequantization, the architecture is
// one cellm runs with every tensor it needs present and well shaped, the program metadata (or
// the defaults of a plain model) validates, and the vocabulary loads. The first failure is the
// reason.
RunnabilityReport check_runnable(const GgufFile& file) {
  RunnabilityReport report;
  for (const GgufTensorInfo& info : file.tensors()) {
    const TensorTypeTraits& traits = tensor_type_traits(info.type);
    if (!traits.can_dequantize) ++report.types_without_dequantization[std::string(traits.name)];
  }
  report.can_run = false;
  StatusOr<ModelConfig> config = ModelConfig::from_gguf(file);
  if (!config.ok()) {
    report.reason = config.status().message();
    return report;
  }
  StatusOr<ModelWeights> weights = ModelWeights::from_gguf(file, *config);
  if (!weights.ok()) {
    report.reason = weights.status().message();
    return report;
  }
  bool used_defaults = false;
  StatusOr<ProgramSpec> spec = ProgramSpec::from_gguf(file, *config, &used_defaults);
  Status valid = spec.ok() ? spec->validate(*config) : spec.status();
  if (!valid.ok()) {
    report.reason = valid.message();
    return report;
  }
  StatusOr<Tokenizer> tokenizer = Tokenizer::from_gguf(file);
  if (!tokenizer.ok()) {
    report.reason = tokenizer.status().message();
    return report;
  }
  report.can_run = true;
  report.reason = config->summary() +
                  (used_defaults ? "; plain GGUF model, program defaults: " : "; program: ") +
                  spec->summary();
  return report;
}

// A key or name as is when it prints cleanly, quoted and escaped otherwise.
std::string printable(std::string_view text) {
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7F) return gguf_quote(text, 96);
  }
  return std::string(text);
}

std::string type_text(const GgufValue& value) {
  if (const GgufValue::Array* array = value.as_array()) {
    return "array<" + std::string(gguf_value_type_name(array->element_type)) + ">";
  }
  return std::string(gguf_value_type_name(value.type()));
}

void print_text(const GgufFile& file, uint64_t file_size_bytes, const RunnabilityReport& report) {
  uint64_t data_bytes = 0;
  for (const GgufTensorInfo& info : file.tensors()) data_bytes += info.size_bytes;
  fmt::print("{}: GGUF v{}, alignment {}, data section at offset {}, file size {} bytes\n",
             file.path(), file.version(), file.alignment(), file.data_offset_bytes(),
             file_size_bytes);

  size_t key_width = 0;
  for (const auto& [key, value] : file.metadata()) {
    key_width = std::max(key_width, std::min<size_t>(printable(key).size(), 48));
  }
  fmt::print("\n{} metadata keys:\n", file.metadata().size());
  for (const auto& [key, value] : file.metadata()) {
    fmt::print("  {:<{}}  {:<14} {}\n", printable(key), key_width, type_text(value),
               value.summary());
  }

  size_t name_width = 4;
  for (const GgufTensorInfo& info : file.tensors()) {
    name_width = std::max(name_width, std::min<size_t>(printable(info.name).size(), 48));
  }
  fmt::print("\n{} tensors, {} bytes of data{}\n", file.tensors().size(), data_bytes,
             file.tensors().empty() ? "" : ":");
  if (!file.tensors().empty()) {
    fmt::print("  {:>5}  {:<{}}  {:<8} {:<20} {:>12} {:>12}\n", "#", "name", name_width, "type",
               "shape", "offset", "size");
  }
  for (size_t i = 0; i < file.tensors().size(); ++i) {
    const GgufTensorInfo& info = file.tensors()[i];
    fmt::print("  {:>5}  {:<{}}  {:<8} {:<20} {:>12} {:>12}\n", i, printable(info.name), name_width,
               tensor_type_name(info.type), info.shape_string(), info.offset_bytes,
               info.size_bytes);
  }

  const char* verdict = !report.can_run ? "unknown" : *report.can_run ? "yes" : "no";
  fmt::print("\ncan cellm run it: {} ({})\n", verdict, report.reason);
  if (report.types_without_dequantization.empty()) {
    fmt::print("tensor types cellm cannot dequantize: none\n");
  } else {
    std::string list;
    for (const auto& [type, count] : report.types_without_dequantization) {
      list += fmt::format("{}{} ({} tensors)", list.empty() ? "" : ", ", type, count);
    }
    fmt::print("tensor types cellm cannot dequantize: {}\n", list);
  }
}

nlohmann::ordered_json value_json(const GgufValue& value) {
  switch (value.type()) {
    case GgufValueType::kFloat32:
    case GgufValueType::kFloat64:
      return *value.as_f64();
    case GgufValueType::kBool:
      return *value.as_bool();
    case GgufValueType::kString:
      return *value.as_string();
    case GgufValueType::kArray:
      return value.summary();
    case GgufValueType::kInt8:
    case GgufValueType::kInt16:
    case GgufValueType::kInt32:
    case GgufValueType::kInt64:
      return *value.as_i64();
    default:
      return *value.as_u64();
  }
}

void print_json(const GgufFile& file, uint64_t file_size_bytes, const RunnabilityReport& report) {
  nlohmann::ordered_json out;
  out["file"] = file.path();
  out["version"] = file.version();
  out["alignment"] = file.alignment();
  out["data_offset"] = file.data_offset_bytes();
  out["file_size"] = file_size_bytes;
  nlohmann::ordered_json metadata = nlohmann::ordered_json::array();
  for (const auto& [key, value] : file.metadata()) {
    nlohmann::ordered_json entry;
    entry["key"] = key;
    entry["type"] = std::string(gguf_value_type_name(value.type()));
    if (const GgufValue::Array* array = value.as_array()) {
      entry["element_type"] = std::string(gguf_value_type_name(array->element_type));
      entry["count"] = array->elements.size();
      entry["summary"] = value.summary();
    } else {
      entry["value"] = value_json(value);
    }
    metadata.push_back(std::move(entry));
  }
  out["metadata"] = std::move(metadata);
  nlohmann::ordered_json tensors = nlohmann::ordered_json::array();
  for (const GgufTensorInfo& info : file.tensors()) {
    tensors.push_back({{"name", info.name},
                       {"type", std::string(tensor_type_name(info.type))},
                       {"shape", info.dims},
                       {"offset", info.offset_bytes},
                       {"size", info.size_bytes}});
  }
  out["tensors"] = std::move(tensors);
  nlohmann::ordered_json runnable;
  runnable["can_run"] = report.can_run ? nlohmann::ordered_json(*report.can_run) : nullptr;
  runnable["reason"] = report.reason;
  runnable["types_without_dequantization"] = report.types_without_dequantization;
  out["runnable"] = std::move(runnable);
  // Strings from the file may hold invalid UTF-8; replace it rather than fail.
  std::cout << out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

int run_inspect(const InspectOptions& options) {
  StatusOr<GgufFile> file = GgufFile::open(options.path);
  if (!file.ok()) {
    std::cerr << "cellm inspect: " << file.status().message() << "\n";
    return 1;
  }
  std::error_code error;
  const uint64_t file_size_bytes = std::filesystem::file_size(options.path, error);
  const RunnabilityReport report = check_runnable(*file);
  if (options.json) {
    print_json(*file, error ? 0 : file_size_bytes, report);
  } else {
    print_text(*file, error ? 0 : file_size_bytes, report);
  }
  return 0;
}

}  // namespace

void add_inspect_command(CLI::App& app, CommandResult& result) {
  auto options = std::make_shared<InspectOptions>();
  CLI::App* command = app.add_subcommand(
      "inspect", "Print a GGUF file's metadata and tensors, and whether cellm can run it");
  command->add_option("file", options->path, "GGUF file")->required();
  command->add_flag("--json", options->json, "Print one JSON object instead of text");
  command->callback([options, &result] { result.exit_code = run_inspect(*options); });
}

}  // namespace cellm::app
