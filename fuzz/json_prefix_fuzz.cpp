// libFuzzer target for JsonPrefix (src/batching/json_prefix.h): arbitrary bytes fed one at a time
// (the first byte picks object_only), checked against nlohmann::json as the oracle
// (src/batching/json_oracle_test_util.h): the part JsonPrefix accepts is a prefix of a JSON
// text, one more byte is not, and complete() says whether the part is a whole text. A broken
// promise aborts; ASan/UBSan catch the rest. Seeds: fuzz/json_prefix_seeds (make fuzz).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "batching/json_oracle_test_util.h"
#include "batching/json_prefix.h"

namespace {

void broken(const char* promise, const std::string& text) {
  std::fprintf(stderr, "json_prefix_fuzz: %s on %zu bytes\n", promise, text.size());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0 || size > 512) return 0;  // the oracle re-parses every prefix it is asked about
  const bool object_only = (data[0] & 1) != 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  cellm::JsonPrefix prefix(object_only);
  size_t accepted = 0;
  while (accepted < text.size() && prefix.feed(static_cast<unsigned char>(text[accepted]))) {
    ++accepted;
  }
  const std::string part = text.substr(0, accepted);
  // nlohmann refuses numbers past a double's range, which RFC 8259 allows: no verdict there.
  if (cellm::testing::oracle_parse(part + "]}").message.find("number overflow") !=
      std::string::npos) {
    return 0;
  }
  const auto object_first = [&](const std::string& s) {
    const size_t first = s.find_first_not_of(" \t\r\n");
    return !object_only || first == std::string::npos || s[first] == '{';
  };
  if (!object_first(part) || !cellm::testing::is_prefix_of_json_text(part)) {
    broken("an accepted part is no JSON prefix", part);
  }
  const bool too_deep = prefix.depth() == cellm::JsonPrefix::kMaxDepth && accepted < text.size() &&
                        (text[accepted] == '[' || text[accepted] == '{');
  if (accepted < text.size() && !too_deep) {  // a 65th open container is refused by design
    const std::string one_more = text.substr(0, accepted + 1);
    if (object_first(one_more) && cellm::testing::is_prefix_of_json_text(one_more)) {
      broken("a refused byte continues a JSON prefix", one_more);
    }
  }
  const bool whole = part.find('\0') == std::string::npos && nlohmann::json::accept(part);
  if (prefix.complete() != whole) broken("complete() disagrees with the oracle", part);
  return 0;
}
