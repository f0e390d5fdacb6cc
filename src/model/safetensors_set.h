// SafetensorsSet: the weights of one checkpoint directory, in one or several safetensors files.
//
// `open_dir(dir)` reads, in this order of preference: `model.safetensors.index.json` (its
// `weight_map` names, for every tensor, the shard holding it; every shard named must exist and
// hold the tensor; shard names must be plain file names inside the directory), else
// `model.safetensors`, else every `*.safetensors` file of the directory (names must then be
// unique across files). Each file is mapped once (safetensors_file.h validates it). Errors name
// the directory, the index file or the shard, and the tensor. It knows names and bytes, not what
// the tensors mean. Thread-safety: immutable after open; read from any thread.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "model/safetensors_file.h"

namespace cellm {

class SafetensorsSet {
 public:
  static StatusOr<SafetensorsSet> open_dir(const std::string& dir);

  SafetensorsSet(SafetensorsSet&&) noexcept = default;
  SafetensorsSet& operator=(SafetensorsSet&&) noexcept = default;

  const SafetensorsTensor* find(std::string_view name) const;
  // Every tensor name, sorted.
  std::vector<std::string> names() const;
  // The file holding `name` (for messages), or "".
  std::string file_of(std::string_view name) const;
  const std::vector<SafetensorsFile>& files() const { return files_; }
  uint64_t total_bytes() const;

  SafetensorsSet() = default;  // empty

 private:
  Status add_file(const std::string& path);

  std::vector<SafetensorsFile> files_;
  std::map<std::string, std::pair<size_t, const SafetensorsTensor*>, std::less<>>
      tensors_;  // name -> (index into files_, tensor)
};

}  // namespace cellm
