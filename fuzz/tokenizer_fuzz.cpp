// libFuzzer target for the tokenizer: arbitrary bytes as text and as token ids, through every
// vocabulary of the shared models. The first byte picks the vocabulary, the second the options;
// the rest is the text to encode and, read as 16-bit numbers, the ids to stream. Every promise
// tokenizer_checks.h checks must hold (encode succeeds, ids in range, no unasked control token,
// the round trip the vocabulary kind promises, streaming = decode until a stop string); anything
// else aborts, and ASan/UBSan catch the rest.
//   cmake --preset fuzz && cmake --build build/fuzz --target tokenizer_fuzz
//   build/fuzz/fuzz/tokenizer_fuzz corpus -max_total_time=60
// Vocabularies: CELLM_TEST_MODELS (default: the shared models folder this build was configured
// with) and the list below.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "tokenizer/tokenizer_checks.h"

namespace {

std::vector<cellm::Tokenizer>* tokenizers = nullptr;

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "tokenizer_fuzz: %s\n", what.c_str());
  std::abort();
}

void load_tokenizers() {
  const char* env = std::getenv("CELLM_TEST_MODELS");
  const std::string models = env != nullptr ? env : CELLM_TEST_MODELS_DEFAULT;
  tokenizers = new std::vector<cellm::Tokenizer>();
  for (const char* name :
       {"vocab/ggml-vocab-llama-spm.gguf", "vocab/ggml-vocab-phi-3.gguf",
        "vocab/ggml-vocab-gpt-2.gguf", "vocab/ggml-vocab-bert-bge.gguf",
        "vocab/ggml-vocab-deepseek-coder.gguf", "vocab/ggml-vocab-deepseek-llm.gguf",
        "vocab/ggml-vocab-falcon.gguf", "vocab/ggml-vocab-mpt.gguf", "vocab/ggml-vocab-refact.gguf",
        "vocab/ggml-vocab-starcoder.gguf", "vocab/ggml-vocab-baichuan.gguf", "stories260K.gguf",
        "arch/tiny-qwen2.gguf"}) {
    const std::string path = models + "/" + name;
    cellm::StatusOr<cellm::GgufFile> file = cellm::GgufFile::open(path);
    if (!file.ok()) fail(file.status().to_string());
    cellm::StatusOr<cellm::Tokenizer> tokenizer = cellm::Tokenizer::from_gguf(*file);
    if (!tokenizer.ok()) fail(tokenizer.status().to_string());
    tokenizers->push_back(*std::move(tokenizer));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (tokenizers == nullptr) load_tokenizers();
  if (size < 2) return 0;
  const cellm::Tokenizer& tokenizer = (*tokenizers)[data[0] % tokenizers->size()];
  const uint8_t flags = data[1];
  const std::string text(reinterpret_cast<const char*>(data + 2), size - 2);
  using namespace cellm::tokenizer_testing;

  const cellm::EncodeOptions encode{.add_special = (flags & 1) != 0,
                                    .parse_special = (flags & 2) != 0};
  if (std::string problem = check_encoding(tokenizer, text, encode); !problem.empty()) {
    fail(problem);
  }
  if (std::string problem = check_round_trip(tokenizer, text); !problem.empty()) fail(problem);

  std::vector<int32_t> ids;
  for (size_t i = 0; i + 1 < text.size(); i += 2) {
    const unsigned number = static_cast<uint8_t>(text[i]) | static_cast<uint8_t>(text[i + 1]) << 8;
    ids.push_back(static_cast<int32_t>(number % static_cast<unsigned>(tokenizer.vocab_size())));
  }
  const cellm::DecodeOptions decode{.render_special = (flags & 4) != 0,
                                    .strip_leading_space = (flags & 8) != 0};
  // A stop string cut from the ids' own text (the check ignores one that is not whole UTF-8).
  std::string stop;
  if (cellm::StatusOr<std::string> decoded = tokenizer.decode(ids, decode);
      decoded.ok() && !decoded->empty()) {
    stop = decoded->substr(text.size() % decoded->size(), (flags >> 4) % 8);
    if (!valid_utf8(stop)) stop.clear();
  }
  if (std::string problem = check_stream(tokenizer, ids, decode, stop); !problem.empty()) {
    fail(problem);
  }
  return 0;
}
