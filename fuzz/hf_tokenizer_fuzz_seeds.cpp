// Writes a seed corpus for hf_tokenizer_fuzz: hf_tokenizer_test_util.h's small tokenizers (Llama 3
// and GPT-2 byte-level BPE, SentencePiece-style BPE, Unigram), each as the fuzz target reads its
// input: tokenizer.json, then a NUL and tokenizer_config.json, then a NUL and chat_template.jinja
// when the sample has them.
//   hf_tokenizer_fuzz_seeds OUT_DIR
#include <cstdio>
#include <fstream>
#include <string>

#include "program/hf_tokenizer_test_util.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: hf_tokenizer_fuzz_seeds OUT_DIR\n");
    return 2;
  }
  for (const cellm::hf_tokenizer_testing::Sample& sample : cellm::hf_tokenizer_testing::samples()) {
    std::string bytes = sample.files.tokenizer_json;
    if (sample.files.tokenizer_config_json || sample.files.chat_template_jinja) {
      bytes += '\0';
      bytes += sample.files.tokenizer_config_json.value_or("{}");
    }
    if (sample.files.chat_template_jinja) {
      bytes += '\0';
      bytes += *sample.files.chat_template_jinja;
    }
    const std::string path = std::string(argv[1]) + "/" + sample.name + ".seed";
    std::ofstream out(path, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) {
      std::fprintf(stderr, "hf_tokenizer_fuzz_seeds: cannot write %s\n", path.c_str());
      return 1;
    }
  }
  return 0;
}
