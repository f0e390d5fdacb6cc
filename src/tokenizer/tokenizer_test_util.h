// Test helpers: load a vocabulary file from the shared models folder and read llama.cpp's
// tokenizer vectors (`.inp`: cases joined by "\n__ggml_vocab_test__\n"; `.out`: one line of
// space-separated ids per case). Only for tests. Thread-safety: plain functions.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "test_models.h"
#include "tokenizer/tokenizer.h"

namespace cellm::testing {

// The vocabularies the suites that run over every vocabulary take (paths under the test models):
// llama.cpp's vectors' files and the test models'.
inline std::vector<std::string> every_test_vocabulary() {
  return {"vocab/ggml-vocab-llama-spm.gguf",
          "vocab/ggml-vocab-phi-3.gguf",
          "vocab/ggml-vocab-gpt-2.gguf",
          "vocab/ggml-vocab-bert-bge.gguf",
          "vocab/ggml-vocab-deepseek-coder.gguf",
          "vocab/ggml-vocab-deepseek-llm.gguf",
          "vocab/ggml-vocab-falcon.gguf",
          "vocab/ggml-vocab-mpt.gguf",
          "vocab/ggml-vocab-refact.gguf",
          "vocab/ggml-vocab-starcoder.gguf",
          "vocab/ggml-vocab-gpt-neox.gguf",
          "vocab/ggml-vocab-baichuan.gguf",
          "stories260K.gguf",
          "llama-2-tiny-random.gguf",
          "arch/tiny-llama3.gguf",
          "arch/tiny-mistral.gguf",
          "arch/tiny-qwen2.gguf",
          "arch/tiny-qwen3.gguf"};
}

// A parameterized test's name for one of them: the file name without ".gguf", '-' and '.' as '_'.
inline std::string vocabulary_test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = info.param.substr(info.param.find_last_of('/') + 1);
  name = name.substr(0, name.find(".gguf"));
  for (char& c : name) {
    if (c == '-' || c == '.') c = '_';
  }
  return name;
}

struct VectorCase {
  std::string text;
  std::vector<int32_t> ids;
};

inline std::string read_whole_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// The cases of vocab/ggml-vocab-<name>.gguf.{inp,out}; adds a failure if they do not pair up.
inline std::vector<VectorCase> read_vectors(const std::string& name) {
  const std::string base = test_model_path("vocab/ggml-vocab-" + name + ".gguf");
  const std::string inp = read_whole_file(base + ".inp");
  const std::string out = read_whole_file(base + ".out");
  const std::string separator = "\n__ggml_vocab_test__\n";
  std::vector<VectorCase> cases;
  size_t start = 0;
  for (size_t end; (end = inp.find(separator, start)) != std::string::npos;
       start = end + separator.size()) {
    cases.push_back({inp.substr(start, end - start), {}});
  }
  std::istringstream lines(out);
  std::string line;
  size_t i = 0;
  for (; std::getline(lines, line); ++i) {
    if (i >= cases.size()) break;
    std::istringstream numbers(line);
    int64_t id = 0;
    while (numbers >> id) cases[i].ids.push_back(static_cast<int32_t>(id));
  }
  EXPECT_EQ(i, cases.size()) << base << ": .inp and .out do not have the same number of cases";
  return cases;
}

inline std::optional<Tokenizer> load_tokenizer(const std::string& relative_path) {
  StatusOr<GgufFile> file = GgufFile::open(test_model_path(relative_path));
  EXPECT_TRUE(file.ok()) << file.status().to_string();
  if (!file.ok()) return std::nullopt;
  StatusOr<Tokenizer> tokenizer = Tokenizer::from_gguf(*file);
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status().to_string();
  if (!tokenizer.ok()) return std::nullopt;
  return *std::move(tokenizer);
}

}  // namespace cellm::testing
