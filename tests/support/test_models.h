// Where tests find ../shared/models: $CELLM_TEST_MODELS, else the folder CMake configured
// (CELLM_TEST_MODELS_DEFAULT, set by ctest). A missing folder or file is a test failure with a
// message saying where it looked, never a skip.
// Thread-safety: pure lookups.
#pragma once

#include <string>
#include <vector>

namespace cellm::testing {

// The models folder (no trailing slash). Adds a gtest failure if it does not exist.
std::string test_models_dir();

// test_models_dir() + "/" + relative. Adds a gtest failure if the file does not exist.
std::string test_model_path(const std::string& relative);

// Reads a raw little-endian float32 file (reference logits). Adds a failure if unreadable.
std::vector<float> read_f32_file(const std::string& path);

}  // namespace cellm::testing
