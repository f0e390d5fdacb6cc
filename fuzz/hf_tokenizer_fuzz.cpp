// libFuzzer target for the Hugging Face tokenizer converter (src/program/hf_tokenizer.h,
// tokenizer_keys_from_hf_text). The input is tokenizer.json's text, optionally followed by a NUL
// byte and tokenizer_config.json's text, and another NUL and chat_template.jinja's; config.json
// says 32 tokens, BOS 1, EOS 2. Converted keys must keep the promises of
// program/hf_tokenizer_test_util.h (the engine's tokenizer loads them); a refusal must be one
// line of at most 300 characters that starts with either file's name. Anything else aborts, and
// ASan/UBSan catch the rest. Seeds: hf_tokenizer_fuzz_seeds (make fuzz).
//   cmake --preset fuzz && cmake --build build/fuzz --target hf_tokenizer_fuzz
//   build/fuzz/fuzz/hf_tokenizer_fuzz -dict=fuzz/hf_json.dict corpus -max_total_time=60
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "program/hf_tokenizer.h"
#include "program/hf_tokenizer_test_util.h"

namespace {

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "hf_tokenizer_fuzz: %s\n", what.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  cellm::HfTokenizerFiles files;
  files.tokenizer_path = "fuzz/tokenizer.json";
  files.tokenizer_config_path = "fuzz/tokenizer_config.json";
  size_t nul = text.find('\0');
  files.tokenizer_json = std::string(text.substr(0, nul));
  if (nul != std::string_view::npos) {
    text.remove_prefix(nul + 1);
    nul = text.find('\0');
    files.tokenizer_config_json = std::string(text.substr(0, nul));
    if (nul != std::string_view::npos)
      files.chat_template_jinja = std::string(text.substr(nul + 1));
  }
  cellm::HfConfig config;
  config.vocab_size = 32;
  config.bos_token_id = 1;
  config.eos_token_ids = {2};

  cellm::StatusOr<cellm::GgufKeys> keys = cellm::tokenizer_keys_from_hf_text(files, config);
  if (!keys.ok()) {
    const cellm::Status status = keys.status();
    const cellm::StatusCode code = status.code();
    const std::string& message = status.message();
    if (code != cellm::StatusCode::kDataLoss && code != cellm::StatusCode::kNotFound &&
        code != cellm::StatusCode::kUnimplemented) {
      fail("unexpected code: " + status.to_string());
    }
    if (message.rfind(files.tokenizer_path + ": ", 0) != 0 &&
        message.rfind(files.tokenizer_config_path + ": ", 0) != 0) {
      fail("unprefixed error: " + message);
    }
    if (message.find('\n') != std::string::npos) fail("multi-line error: " + message);
    if (message.size() > 300) fail("long error: " + message.substr(0, 300));
    return 0;
  }
  if (!nlohmann::json::accept(files.tokenizer_json)) fail("converted a non-JSON tokenizer.json");
  nlohmann::json tokenizer_config = nullptr;
  if (files.tokenizer_config_json) {
    if (!nlohmann::json::accept(*files.tokenizer_config_json)) {
      fail("converted a non-JSON tokenizer_config.json");
    }
    tokenizer_config = nlohmann::json::parse(*files.tokenizer_config_json);
  }
  const std::string broken =
      cellm::hf_tokenizer_testing::check_tokenizer_keys(*keys, config, tokenizer_config);
  if (!broken.empty()) fail(broken);
  return 0;
}
