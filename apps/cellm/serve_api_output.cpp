// The output constraints of a request body (serve_api_internal.h): OpenAI's response_format and
// vLLM's structured_outputs (and the guided_* fields it replaced), compiled into the GenConfig's
// JSON schema or text pattern.
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

// The names of vLLM's structured-output fields in one spelling: the guided_* fields of the body
// (before vLLM 0.12) or the fields of its structured_outputs object.
struct GuidedFields {
  const char* json;
  const char* regex;
  const char* choice;
  const char* grammar;
  const char* whitespace_pattern;
  std::string prefix;  // before a field's name in errors
};

// vLLM's structured-output fields in `fields`: json (a schema, as response_format json_schema),
// regex (the whole output matches it: GenConfig::text_pattern), choice (the output is one of its
// texts). At most one of them and response_format's JSON types; what cellm does not do (grammar,
// whitespace_pattern) is refused; guided_decoding_backend is a hint and is ignored.
Status parse_guided(const Json& fields, const GuidedFields& names, GenConfig& config) {
  const auto given = [&](const char* key) {
    return fields.contains(key) && !fields[key].is_null();
  };
  const auto error = [&](const char* key, std::string_view what) {
    return field_error(names.prefix + key, what);
  };
  for (const char* key : {names.grammar, names.whitespace_pattern}) {
    if (given(key)) return error(key, "is not supported");
  }
  int num_given = config.constrained() ? 1 : 0;
  for (const char* key : {names.json, names.regex, names.choice}) num_given += given(key);
  if (num_given > 1) {
    return error(names.json, fmt::format("{0}{1}, {0}{2}, {0}{3} and a JSON response_format "
                                         "exclude each other",
                                         names.prefix, names.json, names.regex, names.choice));
  }
  if (given(names.json)) {
    const Json& value = fields[names.json];
    if (!value.is_object() && !value.is_string() && !value.is_boolean()) {
      return error(names.json, "must be a JSON schema (an object, or its text)");
    }
    StatusOr<std::shared_ptr<const JsonSchema>> schema =
        JsonSchema::compile(value.is_string() ? value.get<std::string>() : value.dump());
    if (!schema.ok()) {
      return error(names.json, "is refused: " + std::string(schema.status().message()));
    }
    config.json_schema = *std::move(schema);
    return ok_status();
  }
  std::string regex;
  const char* key = names.regex;
  if (given(names.regex)) {
    if (!fields[names.regex].is_string()) return error(key, "must be a string");
    regex = fields[names.regex].get<std::string>();
  } else if (given(names.choice)) {
    key = names.choice;
    const Json& choices = fields[names.choice];
    if (!choices.is_array() || choices.empty()) {
      return error(key, "must be a non-empty array of strings");
    }
    for (const Json& choice : choices) {
      if (!choice.is_string()) return error(key, "must be a non-empty array of strings");
      regex += (regex.empty() ? "" : "|") + regex_literal(choice.get<std::string>());
    }
  } else {
    return ok_status();
  }
  StatusOr<std::shared_ptr<const StringPattern>> pattern = StringPattern::compile(
      regex, 0, StringPattern::kUnbounded, StringPattern::Target::kWholeText);
  if (!pattern.ok()) {
    return error(key, "is refused: " + std::string(pattern.status().message()));
  }
  if (!(*pattern)->matches_something()) return error(key, "matches no text");
  config.text_pattern = *std::move(pattern);
  return ok_status();
}

// vLLM's structured_outputs object (0.12 on): json, regex, choice as the guided_* fields are,
// json_object as response_format's; the options that change nothing here (disable_fallback) are
// taken, the others refused.
Status parse_structured_outputs(const Json& body, GenConfig& config) {
  if (!body.contains("structured_outputs") || body["structured_outputs"].is_null()) {
    return ok_status();
  }
  const Json& fields = body["structured_outputs"];
  if (!fields.is_object()) return field_error("structured_outputs", "must be an object");
  for (const char* legacy : {"guided_json", "guided_regex", "guided_choice"}) {
    if (body.contains(legacy) && !body[legacy].is_null()) {
      return field_error("structured_outputs",
                         fmt::format("and \"{}\" exclude each other", legacy));
    }
  }
  for (const auto& item : fields.items()) {
    const std::string& key = item.key();
    const Json& value = item.value();
    const bool option_off = value.is_null() || value == false;
    if (key == "json" || key == "regex" || key == "choice" || key == "grammar" ||
        key == "whitespace_pattern" || key == "disable_fallback") {
      continue;
    }
    if (key == "json_object") {
      if (!value.is_null() && !value.is_boolean()) {
        return field_error("structured_outputs.json_object", "must be true or false");
      }
      if (value == true) {
        if (config.constrained()) {
          return field_error("structured_outputs.json_object",
                             "and another output constraint exclude each other");
        }
        config.json_object = true;
      }
      continue;
    }
    if ((key == "disable_any_whitespace" || key == "disable_additional_properties") && option_off) {
      continue;
    }
    return field_error("structured_outputs." + key, "is not supported");
  }
  return parse_guided(
      fields, {"json", "regex", "choice", "grammar", "whitespace_pattern", "structured_outputs."},
      config);
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
  CELLM_RETURN_IF_ERROR(parse_structured_outputs(body, config));
  return parse_guided(body,
                      {"guided_json", "guided_regex", "guided_choice", "guided_grammar",
                       "guided_whitespace_pattern", ""},
                      config);
}

}  // namespace cellm::app::internal
