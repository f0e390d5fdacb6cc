// libFuzzer target for HfConfig::parse (src/model/hf_config.h): arbitrary bytes as config.json.
// An accepted config must keep the promises of model/hf_config_test_util.h, checked against the
// bytes as nlohmann-json parses them; a refusal must be one line of at most 300 characters that
// starts with "fuzz/config.json: ". Anything else aborts, and ASan/UBSan catch the rest. Seeds:
// the arch test models' config.json files; fuzz/hf_json.dict names the keys (make fuzz).
//   cmake --preset fuzz && cmake --build build/fuzz --target hf_config_fuzz
//   build/fuzz/fuzz/hf_config_fuzz -dict=fuzz/hf_json.dict corpus -max_total_time=60
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "model/hf_config.h"
#include "model/hf_config_test_util.h"

namespace {

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "hf_config_fuzz: %s\n", what.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const std::string where = "fuzz/config.json";
  cellm::StatusOr<cellm::HfConfig> config = cellm::HfConfig::parse(text, where);
  if (!config.ok()) {
    const cellm::Status status = config.status();
    const cellm::StatusCode code = status.code();
    const std::string& message = status.message();
    if (code != cellm::StatusCode::kDataLoss && code != cellm::StatusCode::kNotFound &&
        code != cellm::StatusCode::kUnimplemented) {
      fail("unexpected code: " + status.to_string());
    }
    if (message.rfind(where + ": ", 0) != 0) fail("unprefixed error: " + message);
    if (message.find('\n') != std::string::npos) fail("multi-line error: " + message);
    if (message.size() > 300) fail("long error: " + message.substr(0, 300));
    return 0;
  }
  if (!nlohmann::json::accept(text)) fail("accepted text that is not JSON");
  const std::string broken =
      cellm::hf_config_testing::check_parsed_config(*config, nlohmann::json::parse(text));
  if (!broken.empty()) fail(broken);
  return 0;
}
