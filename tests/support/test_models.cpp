#include "test_models.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace cellm::testing {

std::string test_models_dir() {
  std::string dir;
  if (const char* env = std::getenv("CELLM_TEST_MODELS"); env != nullptr && *env != '\0') {
    dir = env;
  } else if (const char* fallback = std::getenv("CELLM_TEST_MODELS_DEFAULT");
             fallback != nullptr && *fallback != '\0') {
    dir = fallback;
  } else {
    dir = "../shared/models";
  }
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  if (!std::filesystem::is_directory(dir)) {
    ADD_FAILURE() << "test models folder '" << dir
                  << "' does not exist; set CELLM_TEST_MODELS to the shared/models folder";
  }
  return dir;
}

std::string test_model_path(const std::string& relative) {
  std::string path = test_models_dir() + "/" + relative;
  if (!std::filesystem::exists(path)) {
    ADD_FAILURE() << "test model file '" << path << "' does not exist";
  }
  return path;
}

std::vector<float> read_f32_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    ADD_FAILURE() << "cannot open '" << path << "'";
    return {};
  }
  in.seekg(0, std::ios::end);
  const auto size = static_cast<size_t>(in.tellg());
  in.seekg(0);
  if (size % sizeof(float) != 0) ADD_FAILURE() << "'" << path << "' is not a float32 array";
  std::vector<float> values(size / sizeof(float));
  in.read(reinterpret_cast<char*>(values.data()), static_cast<std::streamsize>(size));
  return values;
}

}  // namespace cellm::testing
