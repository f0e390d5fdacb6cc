// libFuzzer target for parse_serve_request and the /tokenize, /detokenize parsers
// (apps/cellm/serve_api.h): arbitrary bytes as a /v1/completions or /v1/chat/completions body
// (the first byte picks the endpoint), checked against apps/cellm/serve_api_checks.h. A broken
// promise aborts; ASan/UBSan catch the rest. Seeds: fuzz/serve_seeds; fuzz/serve_json.dict names
// the fields (make fuzz).
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "serve_api_checks.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const auto endpoint = (data[0] & 1) != 0 ? cellm::app::ServeEndpoint::kChatCompletions
                                           : cellm::app::ServeEndpoint::kCompletions;
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  const std::string broken = cellm::app::serve_testing::check_serve_parse(body, endpoint);
  if (!broken.empty()) {
    std::fprintf(stderr, "serve_request_fuzz: %s\n", broken.c_str());
    std::abort();
  }
  return 0;
}
