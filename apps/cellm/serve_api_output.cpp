// The output constraints of a request body (serve_api_internal.h): OpenAI's response_format and
// vLLM's guided_* fields, compiled into the GenConfig's JSON schema or text pattern.
#include <fmt/format.h>

#include <memory>
#include <string>

#include "batching/json_schema.h"
#include "batching/string_pattern.h"
#include "serve_api_internal.h"

namespace cellm::app::internal {
namespace {

using Json = nlohmann::json;

// `text` as a regular expression that matches exactly it (its syntax characters escaped).
std::string regex_literal(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if (std::string_view("^$\\.*+?()[]{}|/").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

// vLLM's structured-output fields: guided_json (a schema, as response_format json_schema),
// guided_regex (the whole output matches it: GenConfig::text_pattern), guided_choice (the output
// is one of its texts). At most one of them and response_format's JSON types; what cellm does not
// do (guided_grammar, guided_whitespace_pattern) is refused; guided_decoding_backend is a hint
// and is ignored.
Status parse_guided(const Json& body, GenConfig& config) {
  auto given = [&](const char* key) { return body.contains(key) && !body[key].is_null(); };
  for (const char* key : {"guided_grammar", "guided_whitespace_pattern"}) {
    if (given(key)) return field_error(key, "is not supported");
  }
  int num_given = config.constrained() ? 1 : 0;
  for (const char* key : {"guided_json", "guided_regex", "guided_choice"}) num_given += given(key);
  if (num_given > 1) {
    return field_error("guided_json",
                       "guided_json, guided_regex, guided_choice and a JSON "
                       "response_format exclude each other");
  }
  if (given("guided_json")) {
    const Json& value = body["guided_json"];
    if (!value.is_object() && !value.is_string() && !value.is_boolean()) {
      return field_error("guided_json", "must be a JSON schema (an object, or its text)");
    }
    StatusOr<std::shared_ptr<const JsonSchema>> schema =
        JsonSchema::compile(value.is_string() ? value.get<std::string>() : value.dump());
    if (!schema.ok()) {
      return field_error("guided_json", "is refused: " + std::string(schema.status().message()));
    }
    config.json_schema = *std::move(schema);
    return ok_status();
  }
  std::string regex;
  const char* key = "guided_regex";
  if (given("guided_regex")) {
    if (!body["guided_regex"].is_string()) return field_error(key, "must be a string");
    regex = body["guided_regex"].get<std::string>();
  } else if (given("guided_choice")) {
    key = "guided_choice";
    const Json& choices = body["guided_choice"];
    if (!choices.is_array() || choices.empty()) {
      return field_error(key, "must be a non-empty array of strings");
    }
    for (const Json& choice : choices) {
      if (!choice.is_string()) return field_error(key, "must be a non-empty array of strings");
      regex += (regex.empty() ? "" : "|") + regex_literal(choice.get<std::string>());
    }
  } else {
    return ok_status();
  }
  StatusOr<std::shared_ptr<const StringPattern>> pattern = StringPattern::compile(
      regex, 0, StringPattern::kUnbounded, StringPattern::Target::kWholeText);
  if (!pattern.ok()) {
    return field_error(key, "is refused: " + std::string(pattern.status().message()));
  }
  if (!(*pattern)->matches_something()) return field_error(key, "matches no text");
  config.text_pattern = *std::move(pattern);
  return ok_status();
}

// response_format: "text", "json_object" (GenConfig::json_object), or "json_schema" with its
// schema under json_schema.schema (GenConfig::json_schema; OpenAI's name and strict are taken and
// need nothing: every schema cellm takes is enforced strictly, what it cannot enforce is refused).
Status parse_response_format(const Json& body, GenConfig& config) {
  if (!body.contains("response_format") || body["response_format"].is_null()) return ok_status();
  const Json& format = body["response_format"];
  if (!format.is_object() || !format.contains("type") || !format["type"].is_string()) {
    return field_error("response_format", "must be an object with a \"type\"");
  }
  const std::string type = format["type"].get<std::string>();
  if (type == "json_object") {
    config.json_object = true;
  } else if (type == "json_schema") {
    const Json* wrapper = format.contains("json_schema") ? &format["json_schema"] : nullptr;
    if (wrapper == nullptr || !wrapper->is_object() || !wrapper->contains("schema") ||
        !((*wrapper)["schema"].is_object() || (*wrapper)["schema"].is_boolean())) {
      return field_error(
          "response_format",
          "of type \"json_schema\" must carry {\"json_schema\": {\"schema\": {...}}}");
    }
    StatusOr<std::shared_ptr<const JsonSchema>> schema =
        JsonSchema::compile((*wrapper)["schema"].dump());
    if (!schema.ok()) {
      return field_error("response_format", "json_schema.schema is refused: " +
                                                std::string(schema.status().message()));
    }
    config.json_schema = *std::move(schema);
  } else if (type != "text") {
    return field_error("response_format",
                       fmt::format("type '{}' is not supported: \"text\", \"json_object\" or "
                                   "\"json_schema\"",
                                   type));
  }
  return ok_status();
}

}  // namespace

Status parse_output_constraints(const Json& body, GenConfig& config) {
  CELLM_RETURN_IF_ERROR(parse_response_format(body, config));
  return parse_guided(body, config);
}

}  // namespace cellm::app::internal
