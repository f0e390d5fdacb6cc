#include "model/safetensors_set.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "model/hf_json.h"

namespace cellm {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kIndexName = "model.safetensors.index.json";
constexpr std::string_view kSingleName = "model.safetensors";

// The index's weight_map as (tensor, shard) pairs; errors name the index file.
StatusOr<std::vector<std::pair<std::string, std::string>>> read_weight_map(
    const std::string& path) {
  CELLM_ASSIGN_OR_RETURN(std::string text, read_file_to_string(path));
  CELLM_ASSIGN_OR_RETURN(const nlohmann::json json, parse_hf_json(text, path));
  std::vector<std::pair<std::string, std::string>> map;
  const auto it = json.is_object() ? json.find("weight_map") : json.end();
  if (it == json.end() || !it->is_object()) return data_loss(path + ": no 'weight_map' object");
  for (const auto& [name, shard] : it->items()) {
    if (!shard.is_string()) {
      return data_loss(path + ": weight_map['" + name + "'] is not a string");
    }
    map.emplace_back(name, shard.get<std::string>());
  }
  return map;
}

}  // namespace

Status SafetensorsSet::add_file(const std::string& path) {
  CELLM_ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::open(path));
  files_.push_back(std::move(file));
  return ok_status();
}

StatusOr<SafetensorsSet> SafetensorsSet::open_dir(const std::string& dir) {
  SafetensorsSet set;
  std::error_code error;
  if (!fs::is_directory(dir, error)) {
    return not_found("checkpoint directory '" + dir + "' does not exist");
  }
  const fs::path index_path = fs::path(dir) / kIndexName;
  if (fs::exists(index_path, error)) {
    CELLM_ASSIGN_OR_RETURN(auto weight_map, read_weight_map(index_path.string()));
    std::map<std::string, size_t> shard_index;  // shard name -> index into files_
    for (const auto& [name, shard] : weight_map) {
      if (shard.empty() || shard.find('/') != std::string::npos ||
          shard.find('\\') != std::string::npos || shard == "." || shard == "..") {
        return data_loss(
            fmt::format("{}: weight_map['{}'] = '{}' is not a file name in the "
                        "checkpoint directory",
                        index_path.string(), name, shard));
      }
      auto [it, inserted] = shard_index.emplace(shard, set.files_.size());
      if (inserted) CELLM_RETURN_IF_ERROR(set.add_file((fs::path(dir) / shard).string()));
      const SafetensorsTensor* tensor = set.files_[it->second].find(name);
      if (tensor == nullptr) {
        return not_found(fmt::format("{}: tensor '{}' is not in shard '{}' as weight_map says",
                                     index_path.string(), name, shard));
      }
      set.tensors_[name] = {it->second, tensor};
    }
    return set;
  }

  std::vector<std::string> paths;
  if (fs::exists(fs::path(dir) / kSingleName, error)) {
    paths.push_back((fs::path(dir) / kSingleName).string());
  } else {
    for (const fs::directory_entry& entry : fs::directory_iterator(dir, error)) {
      if (entry.path().extension() == ".safetensors") paths.push_back(entry.path().string());
    }
    std::sort(paths.begin(), paths.end());
  }
  if (paths.empty()) {
    return not_found("checkpoint directory '" + dir + "' has no " + std::string(kIndexName) +
                     " and no *.safetensors file");
  }
  for (const std::string& path : paths) {
    CELLM_RETURN_IF_ERROR(set.add_file(path));
    const size_t file_index = set.files_.size() - 1;
    for (const SafetensorsTensor& tensor : set.files_.back().tensors()) {
      auto [it, inserted] = set.tensors_.emplace(tensor.name, std::pair{file_index, &tensor});
      if (!inserted) {
        return data_loss(
            fmt::format("{}: tensor '{}' is also in {} (no index file says which "
                        "to use)",
                        path, tensor.name, set.files_[it->second.first].path()));
      }
    }
  }
  return set;
}

const SafetensorsTensor* SafetensorsSet::find(std::string_view name) const {
  const auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : it->second.second;
}

std::vector<std::string> SafetensorsSet::names() const {
  std::vector<std::string> names;
  names.reserve(tensors_.size());
  for (const auto& [name, where] : tensors_) names.push_back(name);
  return names;
}

std::string SafetensorsSet::file_of(std::string_view name) const {
  const auto it = tensors_.find(name);
  return it == tensors_.end() ? "" : files_[it->second.first].path();
}

uint64_t SafetensorsSet::total_bytes() const {
  uint64_t total = 0;
  for (const auto& [name, where] : tensors_) total += where.second->data.size();
  return total;
}

}  // namespace cellm
