// Request bodies of the OpenAI-compatible endpoints and /tokenize, /detokenize (serve_api.h).
#include "serve_api.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

#include "batching/json_prefix.h"
#include "serve_api_internal.h"

namespace cellm::app {
namespace internal {

using Json = nlohmann::json;

Status field_error(std::string_view field, std::string_view what) {
  return invalid_argument(fmt::format("\"{}\" {}", field, what));
}

// A JSON number that is a whole number fitting int64 (5 and 5.0 both are).
std::optional<int64_t> as_integer(const Json& value) {
  if (value.is_number_integer()) {
    if (value.is_number_unsigned() &&
        value.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return std::nullopt;
    }
    return value.get<int64_t>();
  }
  if (value.is_number_float()) {
    const double d = value.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e18) {
      return static_cast<int64_t>(d);
    }
  }
  return std::nullopt;
}

StatusOr<int32_t> get_int32(const Json& value, std::string_view field, int64_t min_value,
                            int64_t max_value) {
  const std::optional<int64_t> v = as_integer(value);
  if (!v) return field_error(field, "must be an integer");
  if (*v < min_value || *v > max_value) {
    return field_error(field,
                       fmt::format("is {}; it must be in [{}, {}]", *v, min_value, max_value));
  }
  return static_cast<int32_t>(*v);
}

StatusOr<float> get_float(const Json& value, std::string_view field) {
  if (!value.is_number()) return field_error(field, "must be a number");
  const double d = value.get<double>();
  if (!std::isfinite(d) || std::fabs(d) > 1e30) return field_error(field, "must be finite");
  return static_cast<float>(d);
}

StatusOr<bool> get_bool(const Json& value, std::string_view field) {
  if (!value.is_boolean()) return field_error(field, "must be true or false");
  return value.get<bool>();
}

StatusOr<std::string> get_string(const Json& value, std::string_view field) {
  if (!value.is_string()) return field_error(field, "must be a string");
  return value.get<std::string>();
}

}  // namespace internal
namespace {

using Json = nlohmann::json;

// The most stop strings and logit biases a request may carry (far above what any
// client sends; bounds the work a request can ask of the stop matcher and the sampler).
constexpr size_t kMaxStopStrings = 16;
constexpr size_t kMaxLogitBiases = 1024;

using internal::as_integer;
using internal::field_error;
using internal::get_bool;
using internal::get_float;
using internal::get_int32;
using internal::get_string;

// The most prompts one completions request may carry.
constexpr size_t kMaxPrompts = static_cast<size_t>(kMaxServeChoices);

// One prompt: a string or a list of token ids.
StatusOr<ServePrompt> parse_one_prompt(const Json& prompt) {
  ServePrompt out;
  if (prompt.is_string()) {
    out.text = prompt.get<std::string>();
    return out;
  }
  if (!prompt.is_array()) return field_error("prompt", "must be a string or a list of token ids");
  if (prompt.empty()) return field_error("prompt", "is an empty list");
  for (const Json& id : prompt) {
    if (id.is_string() || id.is_array()) {
      return field_error("prompt", "mixes token ids with strings or lists");
    }
    CELLM_ASSIGN_OR_RETURN(const int32_t token, get_int32(id, "prompt", 0));
    out.tokens.push_back(token);
  }
  return out;
}

// "prompt": one prompt (a string or a list of token ids), or a list of them.
Status parse_prompts(const Json& prompt, ServeRequest& request) {
  const bool several =
      prompt.is_array() && !prompt.empty() && (prompt[0].is_string() || prompt[0].is_array());
  if (!several) {
    CELLM_ASSIGN_OR_RETURN(ServePrompt one, parse_one_prompt(prompt));
    request.prompts.push_back(std::move(one));
    return ok_status();
  }
  if (prompt.size() > kMaxPrompts) {
    return field_error("prompt",
                       fmt::format("holds {} prompts; at most {}", prompt.size(), kMaxPrompts));
  }
  for (const Json& item : prompt) {
    if (!item.is_string() && !item.is_array()) {
      return field_error("prompt", "mixes prompts with token ids");
    }
    CELLM_ASSIGN_OR_RETURN(ServePrompt one, parse_one_prompt(item));
    request.prompts.push_back(std::move(one));
  }
  return ok_status();
}

Status parse_stop(const Json& stop, GenConfig& config) {
  if (stop.is_null()) return ok_status();
  if (stop.is_string()) {
    config.stop_strings.push_back(stop.get<std::string>());
  } else if (stop.is_array()) {
    if (stop.size() > kMaxStopStrings) {
      return field_error("stop",
                         fmt::format("holds {} strings; at most {}", stop.size(), kMaxStopStrings));
    }
    for (const Json& s : stop) {
      CELLM_ASSIGN_OR_RETURN(std::string text, get_string(s, "stop"));
      config.stop_strings.push_back(std::move(text));
    }
  } else {
    return field_error("stop", "must be a string or a list of strings");
  }
  for (const std::string& s : config.stop_strings) {
    if (s.empty()) return field_error("stop", "holds an empty string");
  }
  return ok_status();
}

Status parse_logit_bias(const Json& bias, GenConfig& config) {
  if (bias.is_null()) return ok_status();
  if (!bias.is_object()) return field_error("logit_bias", "must map token ids to numbers");
  if (bias.size() > kMaxLogitBiases) {
    return field_error("logit_bias",
                       fmt::format("holds {} entries; at most {}", bias.size(), kMaxLogitBiases));
  }
  for (const auto& [key, value] : bias.items()) {
    int64_t token = -1;
    const auto [end, error] = std::from_chars(key.data(), key.data() + key.size(), token);
    if (error != std::errc() || end != key.data() + key.size() || token < 0 ||
        token > std::numeric_limits<int32_t>::max()) {
      return field_error("logit_bias", fmt::format("key '{}' is not a token id", key));
    }
    CELLM_ASSIGN_OR_RETURN(const float amount, get_float(value, "logit_bias"));
    if (amount < -100.0f || amount > 100.0f) {
      return field_error("logit_bias", fmt::format("value {} is outside [-100, 100]", amount));
    }
    // OpenAI: -100 bans the token.
    config.sampling.logit_bias.push_back(
        {static_cast<int32_t>(token),
         amount <= -100.0f ? -std::numeric_limits<float>::infinity() : amount});
  }
  return ok_status();
}

// Options cellm cannot honour: refused when they ask for something, accepted at their defaults.
Status refuse_unsupported(const Json& body) {
  auto given = [&](const char* key) { return body.contains(key) && !body[key].is_null(); };
  if (given("best_of") && body["best_of"] != 1) return field_error("best_of", "must be 1");
  if (given("suffix")) return field_error("suffix", "is not supported");
  return ok_status();
}

Status parse_sampling(const Json& body, ServeRequest& request) {
  SamplingParams& s = request.config.sampling;
  if (body.contains("temperature") && !body["temperature"].is_null()) {
    CELLM_ASSIGN_OR_RETURN(s.temperature, get_float(body["temperature"], "temperature"));
    if (s.temperature < 0.0f || s.temperature > 2.0f) {
      return field_error("temperature", fmt::format("is {}; it must be in [0, 2]", s.temperature));
    }
  } else {
    s.temperature = 1.0f;  // OpenAI's default
  }
  if (body.contains("top_p") && !body["top_p"].is_null()) {
    CELLM_ASSIGN_OR_RETURN(s.top_p, get_float(body["top_p"], "top_p"));
  }
  if (body.contains("top_k") && !body["top_k"].is_null()) {
    CELLM_ASSIGN_OR_RETURN(const int32_t top_k, get_int32(body["top_k"], "top_k", -1));
    s.top_k = top_k < 0 ? 0 : top_k;  // vLLM: -1 is off
  }
  if (body.contains("min_p") && !body["min_p"].is_null()) {
    CELLM_ASSIGN_OR_RETURN(s.min_p, get_float(body["min_p"], "min_p"));
  }
  if (body.contains("presence_penalty") && !body["presence_penalty"].is_null()) {
    CELLM_ASSIGN_OR_RETURN(s.presence_penalty,
                           get_float(body["presence_penalty"], "presence_penalty"));
  }
  if (body.contains("frequency_penalty") && !body["frequency_penalty"].is_null()) {
    CELLM_ASSIGN_OR_RETURN(s.frequency_penalty,
                           get_float(body["frequency_penalty"], "frequency_penalty"));
  }
  for (const char* key : {"presence_penalty", "frequency_penalty"}) {
    const float v = key[0] == 'p' ? s.presence_penalty : s.frequency_penalty;
    if (v < -2.0f || v > 2.0f)
      return field_error(key, fmt::format("is {}; it must be in [-2, 2]", v));
  }
  if (body.contains("repetition_penalty") && !body["repetition_penalty"].is_null()) {
    CELLM_ASSIGN_OR_RETURN(s.repetition_penalty,
                           get_float(body["repetition_penalty"], "repetition_penalty"));
  }
  if (body.contains("logit_bias")) {
    CELLM_RETURN_IF_ERROR(parse_logit_bias(body["logit_bias"], request.config));
  }
  if (body.contains("seed") && !body["seed"].is_null()) {
    const std::optional<int64_t> seed = as_integer(body["seed"]);
    if (!seed) return field_error("seed", "must be an integer");
    request.seed = static_cast<uint64_t>(*seed);
  }
  return ok_status();
}

// Completions: "logprobs": n, the n most likely tokens' beside the sampled one's. Chat completions:
// "logprobs": true, with "top_logprobs": n (0 when not given).
Status parse_logprobs(const Json& body, ServeRequest& request) {
  auto given = [&](const char* key) { return body.contains(key) && !body[key].is_null(); };
  int32_t& num_top = request.config.sampling.logprobs;
  if (request.endpoint == ServeEndpoint::kChatCompletions) {
    bool on = false;
    if (given("logprobs")) {
      if (!body["logprobs"].is_boolean()) return field_error("logprobs", "must be true or false");
      on = body["logprobs"].get<bool>();
    }
    int32_t top = 0;
    if (given("top_logprobs")) {
      if (!on) return field_error("top_logprobs", "needs \"logprobs\": true");
      CELLM_ASSIGN_OR_RETURN(top, get_int32(body["top_logprobs"], "top_logprobs", 0, kMaxLogprobs));
    }
    num_top = on ? top : -1;
    return ok_status();
  }
  if (given("top_logprobs")) {
    return field_error("top_logprobs", "is for chat completions; completions take \"logprobs\": n");
  }
  if (given("logprobs") && body["logprobs"] != false) {
    CELLM_ASSIGN_OR_RETURN(num_top, get_int32(body["logprobs"], "logprobs", 0, kMaxLogprobs));
  }
  if (request.echo) request.config.sampling.prompt_logprobs = num_top;
  return ok_status();
}

// "echo": completions' prompt before each choice's text; a chat's final message before each
// answer where that message is the assistant's (vLLM's).
Status parse_echo(const Json& body, ServeRequest& request) {
  if (!body.contains("echo") || body["echo"].is_null()) return ok_status();
  if (!body["echo"].is_boolean()) return field_error("echo", "must be true or false");
  request.echo = body["echo"].get<bool>();
  return ok_status();
}

Status parse_body(const Json& body, ServeRequest& request) {
  if (!body.is_object()) return invalid_argument("the request body must be a JSON object");
  CELLM_RETURN_IF_ERROR(refuse_unsupported(body));
  if (body.contains("model") && !body["model"].is_null()) {
    CELLM_ASSIGN_OR_RETURN(request.model, get_string(body["model"], "model"));
  }
  if (request.endpoint == ServeEndpoint::kCompletions) {
    if (!body.contains("prompt")) return field_error("prompt", "is missing");
    CELLM_RETURN_IF_ERROR(parse_prompts(body["prompt"], request));
  } else {
    if (!body.contains("messages")) return field_error("messages", "is missing");
    CELLM_RETURN_IF_ERROR(internal::parse_messages(body["messages"], request));
  }
  for (const char* key : {"max_tokens", "max_completion_tokens"}) {
    if (body.contains(key) && !body[key].is_null()) {
      CELLM_ASSIGN_OR_RETURN(request.max_tokens, get_int32(body[key], key, 0));
    }
  }
  if (body.contains("n") && !body["n"].is_null()) {
    CELLM_ASSIGN_OR_RETURN(request.n, get_int32(body["n"], "n", 1, kMaxServeChoices));
  }
  const size_t choices = num_prompts(request) * static_cast<size_t>(request.n);
  if (choices > static_cast<size_t>(kMaxServeChoices)) {
    return field_error("n", fmt::format("is {} for {} prompts: {} choices; at most {}", request.n,
                                        num_prompts(request), choices, kMaxServeChoices));
  }
  CELLM_RETURN_IF_ERROR(parse_sampling(body, request));
  CELLM_RETURN_IF_ERROR(internal::parse_output_constraints(body, request.config));
  CELLM_RETURN_IF_ERROR(internal::parse_vllm_extras(body, request.config));
  CELLM_RETURN_IF_ERROR(internal::parse_chat_prompt_options(body, request));
  CELLM_RETURN_IF_ERROR(parse_echo(body, request));
  CELLM_RETURN_IF_ERROR(parse_logprobs(body, request));
  if (body.contains("stop")) CELLM_RETURN_IF_ERROR(parse_stop(body["stop"], request.config));
  if (body.contains("ignore_eos") && !body["ignore_eos"].is_null()) {
    CELLM_ASSIGN_OR_RETURN(const bool ignore_eos, get_bool(body["ignore_eos"], "ignore_eos"));
    request.config.use_default_stop_tokens = !ignore_eos;
  }
  if (body.contains("stream") && !body["stream"].is_null()) {
    CELLM_ASSIGN_OR_RETURN(request.stream, get_bool(body["stream"], "stream"));
  }
  if (body.contains("stream_options") && !body["stream_options"].is_null()) {
    const Json& options = body["stream_options"];
    if (!options.is_object()) return field_error("stream_options", "must be an object");
    if (!request.stream) return field_error("stream_options", "needs \"stream\": true");
    if (options.contains("include_usage")) {
      CELLM_ASSIGN_OR_RETURN(request.stream_include_usage,
                             get_bool(options["include_usage"], "stream_options.include_usage"));
    }
  }
  if (body.contains("return_token_ids") && !body["return_token_ids"].is_null()) {
    CELLM_ASSIGN_OR_RETURN(request.return_token_ids,
                           get_bool(body["return_token_ids"], "return_token_ids"));
  }
  // Counts and ranges the runtime checks too (top_p, min_p, repetition_penalty, stop strings).
  return validate_gen_config(request.config);
}

// The request body as a JSON object: an empty body or a syntax error says so, with where.
StatusOr<Json> parse_json_object(std::string_view body) {
  if (body.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    return invalid_argument("the request body is empty; a JSON object is expected");
  }
  if (const size_t depth = json_nesting_depth(body); depth > internal::kMaxJsonDepth) {
    return invalid_argument(fmt::format("the request body nests {} levels deep; at most {}", depth,
                                        internal::kMaxJsonDepth));
  }
  Json json;
  try {
    json = Json::parse(body);
  } catch (const Json::exception& e) {  // a syntax error, or a number past a double's range
    // "[json.exception.parse_error.101] parse error at line 1, column 9: ...": from "parse error".
    const std::string_view what = e.what();
    const size_t from = what.find("] ");
    return invalid_argument(
        "the request body is not valid JSON: " +
        std::string(from == std::string_view::npos ? what : what.substr(from + 2)));
  }
  if (!json.is_object()) return invalid_argument("the request body must be a JSON object");
  return json;
}

// `json` is `body` parsed; tools are read from `body` again keeping their keys' order, which the
// chat templates show.
StatusOr<ServeRequest> request_from_json(const Json& json, std::string_view body,
                                         ServeEndpoint endpoint) {
  ServeRequest request;
  request.endpoint = endpoint;
  try {
    CELLM_RETURN_IF_ERROR(parse_body(json, request));
    const auto given = [&](const char* key) { return json.contains(key) && !json[key].is_null(); };
    if (endpoint != ServeEndpoint::kChatCompletions) {
      if (given("tools") && !(json["tools"].is_array() && json["tools"].empty())) {
        return field_error("tools", "are for chat completions");
      }
      if (given("tool_choice") && json["tool_choice"] != "none") {
        return field_error("tool_choice", "is for chat completions");
      }
    } else if (given("tools") || given("tool_choice") || given("parallel_tool_calls")) {
      CELLM_RETURN_IF_ERROR(
          parse_tools(nlohmann::ordered_json::parse(body), request.tools, request.config));
      CELLM_RETURN_IF_ERROR(validate_gen_config(request.config));
    }
  } catch (const Json::exception& e) {  // a comparison or lookup on an unexpected type
    return invalid_argument(std::string("the request body is malformed: ") + e.what());
  }
  return request;
}

}  // namespace

StatusOr<ServeRequest> parse_serve_request(std::string_view body, ServeEndpoint endpoint) {
  CELLM_ASSIGN_OR_RETURN(const Json json, parse_json_object(body));
  return request_from_json(json, body, endpoint);
}

size_t num_prompts(const ServeRequest& request) {
  return request.endpoint == ServeEndpoint::kChatCompletions ? 1 : request.prompts.size();
}

StatusOr<TokenizeRequest> parse_tokenize_request(std::string_view body) {
  CELLM_ASSIGN_OR_RETURN(const Json json, parse_json_object(body));
  TokenizeRequest request;
  const ServeEndpoint endpoint =
      json.contains("messages") ? ServeEndpoint::kChatCompletions : ServeEndpoint::kCompletions;
  CELLM_ASSIGN_OR_RETURN(request.prompt, request_from_json(json, body, endpoint));
  if (num_prompts(request.prompt) != 1) return field_error("prompt", "must be one prompt");
  if (json.contains("add_special_tokens") && !json["add_special_tokens"].is_null()) {
    CELLM_ASSIGN_OR_RETURN(request.add_special_tokens,
                           get_bool(json["add_special_tokens"], "add_special_tokens"));
  }
  return request;
}

StatusOr<std::vector<int32_t>> parse_detokenize_request(std::string_view body) {
  CELLM_ASSIGN_OR_RETURN(const Json json, parse_json_object(body));
  if (!json.contains("tokens") || !json["tokens"].is_array()) {
    return field_error("tokens", "must be a list of token ids");
  }
  std::vector<int32_t> tokens;
  for (const Json& id : json["tokens"]) {
    CELLM_ASSIGN_OR_RETURN(const int32_t token, get_int32(id, "tokens", 0));
    tokens.push_back(token);
  }
  return tokens;
}

}  // namespace cellm::app
