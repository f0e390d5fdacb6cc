// libFuzzer target for the JSON-schema compiler and walker (src/batching/json_schema.h,
// json_schema_prefix.h). The input is a schema, a NUL byte, then a text fed one byte at a time.
// Any schema compiles or is refused with a message (never a crash); for one that compiles, the
// part of the text the walker accepts either is complete or has a byte that continues it (the
// walker never strands a generation; below depth 32, as the walker's depth cap may strand a value
// that must nest past 64), and a complete part is valid JSON the schema accepts by an independent
// validator (src/batching/json_schema_oracle_test_util.h); and JsonTokenMask's mask there, over a
// small vocabulary (every byte, and pieces sharing prefixes), is every token the walker accepts.
// A broken promise aborts; ASan/UBSan catch the rest. Seeds: fuzz/json_schema_seeds (make fuzz).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "batching/json_prefix.h"
#include "batching/json_schema.h"
#include "batching/json_schema_oracle_test_util.h"
#include "batching/json_schema_prefix.h"
#include "batching/json_token_mask.h"

namespace {

void broken(const char* promise, const std::string& schema, const std::string& text) {
  std::fprintf(stderr, "json_schema_fuzz: %s\nschema: %s\ntext: %s\n", promise, schema.c_str(),
               text.c_str());
  std::abort();
}

const cellm::JsonTokenMask& mask() {
  static const cellm::JsonTokenMask kMask = [] {
    std::vector<std::string> vocab = {""};
    for (int b = 1; b < 256; ++b) vocab.emplace_back(1, static_cast<char>(b));
    for (const char* piece :
         {"{\"",      "\":",   "\": ", "\",", "\"}", "  ",    "    ", "\n  ", "null",
          "true",     "false", "12",   "-1",  "1.5", "e+",    "ab",   "abc",  "\\u00",
          "\xc3\xa9", "}}",    "]}",   "[]",  "{}",  "\"a\"", "\"x\""}) {
      vocab.emplace_back(piece);
    }
    return cellm::JsonTokenMask(vocab);
  }();
  return kMask;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t split = input.find('\0');
  const std::string schema_text(input.substr(0, split));
  const std::string text(split == std::string_view::npos ? "" : input.substr(split + 1));
  cellm::StatusOr<std::shared_ptr<const cellm::JsonSchema>> schema =
      cellm::JsonSchema::compile(schema_text);
  if (!schema.ok()) {
    if (schema.status().message().empty()) broken("a refusal without a message", schema_text, "");
    return 0;
  }
  cellm::JsonSchemaPrefix walker(*schema, 8);
  cellm::JsonPrefix syntax(/*object_only=*/false, 8);  // for the depth
  size_t accepted = 0;
  while (accepted < text.size() && walker.feed(text.substr(accepted, 1))) {
    syntax.feed(static_cast<unsigned char>(text[accepted]));
    ++accepted;
  }
  const std::string part = text.substr(0, accepted);
  std::vector<uint8_t> allowed;
  mask().compute(walker, allowed);
  for (size_t t = 0; t < allowed.size(); ++t) {
    if ((allowed[t] != 0) != mask().allows(walker, static_cast<int32_t>(t))) {
      broken("a mask that differs from the walker", schema_text, part);
    }
  }
  if (!walker.complete() && syntax.depth() < 32) {
    bool any = false;
    for (int b = 0; b < 256 && !any; ++b) {
      const char c = static_cast<char>(b);
      any = walker.accepts(std::string_view(&c, 1));
    }
    if (!any) broken("an accepted part that nothing continues", schema_text, part);
  }
  if (walker.complete()) {
    nlohmann::json value;
    try {
      value = nlohmann::json::parse(part);
    } catch (const nlohmann::json::out_of_range&) {
      return 0;  // a number past a double's range: valid JSON, no verdict from the validator
    } catch (const nlohmann::json::exception&) {
      broken("a complete part that is not JSON", schema_text, part);
    }
    const nlohmann::json root = nlohmann::json::parse(schema_text);
    if (!cellm::testing::oracle_valid(root, root, value)) {
      broken("a complete part the schema does not accept", schema_text, part);
    }
  }
  return 0;
}
