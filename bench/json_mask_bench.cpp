// Constrained-output masks (batching/json_token_mask.h) over a real vocabulary (deepseek-llm's
// 102,400 byte-level BPE tokens, as the tokenizer writes them): the time to compute one mask at
// typical places of a JSON object, of a schema's value (inside pattern strings also from a
// generation's cache) and of a union walked as two alternatives, against checking every token
// with JsonSchemaPrefix::accepts (the definition the mask shortcuts). Figures only; the equality
// is json_token_mask_test's.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "batching/json_schema.h"
#include "batching/json_schema_prefix.h"
#include "batching/json_token_mask.h"
#include "gguf/gguf_file.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab_gguf.h"

namespace {

using cellm::JsonSchema;
using cellm::JsonSchemaPrefix;
using cellm::JsonTokenMask;

std::string models_dir() {
  const char* env = std::getenv("CELLM_TEST_MODELS");
  return env != nullptr ? env : "../shared/models";
}

// Each token's bytes, or nullopt when the vocabulary cannot be read.
const std::optional<std::vector<std::string>>& token_bytes() {
  static const std::optional<std::vector<std::string>> kBytes =
      []() -> std::optional<std::vector<std::string>> {
    const std::string path = models_dir() + "/vocab/ggml-vocab-deepseek-llm.gguf";
    cellm::StatusOr<cellm::GgufFile> file = cellm::GgufFile::open(path);
    if (!file.ok()) return std::nullopt;
    cellm::StatusOr<cellm::Vocab> vocab = cellm::vocab_from_gguf(*file);
    if (!vocab.ok()) return std::nullopt;
    cellm::StatusOr<cellm::Tokenizer> tokenizer =
        cellm::Tokenizer::from_vocab(*std::move(vocab), path);
    if (!tokenizer.ok()) return std::nullopt;
    std::vector<std::string> bytes;
    for (int32_t id = 0; id < tokenizer->vocab_size(); ++id) {
      bytes.emplace_back(tokenizer->token_piece(id, /*render_special=*/false));
    }
    return bytes;
  }();
  return kBytes;
}

constexpr const char* kSchema = R"({"type": "object", "properties": {
    "name": {"type": "string"}, "age": {"type": "integer", "minimum": 0},
    "nickname": {"type": "string", "maxLength": 12},
    "address": {"type": "object", "properties": {"street": {"type": "string"}},
                "required": ["street"], "additionalProperties": false},
    "tags": {"type": "array", "items": {"enum": ["red", "green", "blue"]}},
    "email": {"type": "string", "pattern": "^[^@ ]+@[a-z]+\\.[a-z]{2,}$"},
    "note": {"type": "string", "pattern": "ok", "maxLength": 40}},
  "required": ["name", "age"], "additionalProperties": false})";

// Formats: strings held to date-time and uri (string_format.h) as patterns.
constexpr const char* kFormats = R"({"type": "object", "properties": {
    "when": {"type": "string", "format": "date-time"}, "home": {"type": "string", "format": "uri"}},
  "additionalProperties": false})";

// pydantic's Union[Cat, Dog]: objects alike until "meows" or "barks" (two alternatives).
constexpr const char* kUnion = R"({"anyOf": [
    {"type": "object", "properties": {"name": {"type": "string"}, "meows": {"type": "integer"}},
     "required": ["name", "meows"], "additionalProperties": false},
    {"type": "object", "properties": {"name": {"type": "string"}, "barks": {"type": "boolean"}},
     "required": ["name", "barks"], "additionalProperties": false}]})";

// A walker of `schema` (empty: json_object) that has taken `text`.
std::optional<JsonSchemaPrefix> walker(const std::string& schema, const std::string& text) {
  std::shared_ptr<const JsonSchema> compiled = JsonSchema::any_object();
  if (!schema.empty()) {
    auto s = JsonSchema::compile(schema);
    if (!s.ok()) return std::nullopt;
    compiled = *s;
  }
  JsonSchemaPrefix json(compiled, 20);
  if (!json.feed(text)) return std::nullopt;
  return json;
}

// How a mask is computed: JsonTokenMask::compute, with a pattern cache that holds the state's
// mask already, or by checking every token with accepts().
enum class Way { kMask, kMaskCached, kEveryToken };

void run(benchmark::State& state, const std::string& schema, const std::string& text, Way way) {
  if (!token_bytes().has_value()) {
    state.SkipWithError("cannot read vocab/ggml-vocab-deepseek-llm.gguf (CELLM_TEST_MODELS)");
    return;
  }
  const std::vector<std::string>& bytes = *token_bytes();
  static const JsonTokenMask mask(bytes);
  const std::optional<JsonSchemaPrefix> json = walker(schema, text);
  if (!json.has_value()) {
    state.SkipWithError("the walker refuses the state's text");
    return;
  }
  std::vector<uint8_t> allowed(bytes.size());
  JsonTokenMask::PatternMaskCache cache;
  mask.compute(*json, allowed, &cache);
  for (auto _ : state) {
    if (way == Way::kMaskCached) {
      mask.compute(*json, allowed, &cache);
    } else if (way == Way::kEveryToken) {
      for (size_t t = 0; t < bytes.size(); ++t) {
        allowed[t] = !bytes[t].empty() && json->accepts(bytes[t]) ? 1 : 0;
      }
    } else {
      mask.compute(*json, allowed);
    }
    benchmark::DoNotOptimize(allowed.data());
  }
  size_t num_allowed = 0;
  for (const uint8_t a : allowed) num_allowed += a;
  state.counters["allowed"] = static_cast<double>(num_allowed);
}

void register_all() {
  struct Place {
    const char* name;
    const char* schema;
    const char* text;
  };
  const Place places[] = {
      {"object/after_brace", "", "{"},
      {"object/in_key", "", "{\"na"},
      {"object/in_string", "", "{\"name\": \"Bo"},
      {"object/in_number_array", "", "{\"a\": [1, 2, 3"},
      {"object/after_value", "", "{\"a\": true"},
      {"schema/after_brace", kSchema, "{"},
      {"schema/in_key", kSchema, "{\"na"},
      {"schema/in_string", kSchema, "{\"name\": \"Bo"},
      {"schema/in_bounded_string", kSchema, "{\"nickname\": \"Bo"},
      {"schema/in_integer", kSchema, "{\"name\": \"Bo\", \"age\": 4"},
      {"schema/in_enum", kSchema, "{\"name\": \"Bo\", \"age\": 4, \"tags\": [\"gr"},
      {"schema/in_pattern_string_free", kSchema, "{\"email\": \"bo"},
      {"schema/in_pattern_string_narrow", kSchema, "{\"email\": \"bo@ex"},
      {"schema/in_pattern_string_bounded", kSchema, "{\"note\": \"Bo"},
      {"format/in_date_time_pattern", kFormats, "{\"when\": \"2024-0"},
      {"format/in_date_time_later_pattern", kFormats, "{\"when\": \"2024-02-29T12:3"},
      {"format/in_uri_pattern", kFormats, "{\"home\": \"https://exa"},
      {"union/after_brace", kUnion, "{"},
      {"union/in_key", kUnion, "{\"na"},
      {"union/in_string", kUnion, "{\"name\": \"Bo"},
      {"union/after_value", kUnion, "{\"name\": \"Bo\""},
  };
  for (const Place& place : places) {
    const bool in_pattern = std::string(place.name).find("pattern") != std::string::npos;
    for (const Way way : {Way::kMask, Way::kMaskCached, Way::kEveryToken}) {
      if (way == Way::kMaskCached && !in_pattern) continue;
      const char* suffix = way == Way::kMask         ? "/mask"
                           : way == Way::kMaskCached ? "/mask_cached"
                                                     : "/every_token";
      const std::string name = std::string("JsonMask/") + place.name + suffix;
      const std::string schema = place.schema;
      const std::string text = place.text;
      benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& state) {
        run(state, schema, text, way);
      })->Unit(benchmark::kMicrosecond);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  register_all();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
