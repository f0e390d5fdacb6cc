// Tool calling (serve_tools.h): the tools of a request, the JSON texts the templates show, and
// reading calls out of generated text.
#include "serve_tools.h"

#include <fmt/format.h>

#include <cctype>
#include <charconv>
#include <cmath>
#include <memory>
#include <random>
#include <utility>

#include "batching/json_prefix.h"
#include "batching/json_schema.h"
#include "serve_api_internal.h"

namespace cellm::app {
namespace {

using OrderedJson = nlohmann::ordered_json;
using internal::field_error;

constexpr size_t kMaxTools = 128;  // OpenAI's limit
constexpr std::string_view kHermesOpen = "<tool_call>";
constexpr std::string_view kHermesClose = "</tool_call>";

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

std::string_view rtrim(std::string_view s) {
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

// Python's repr of a float: the shortest digits that read back (correctly rounded), positional
// for decimal exponents -4 to 15 (".0" when whole), else d.ddde+XX.
std::string python_float(double value) {
  char buffer[64];
  const std::to_chars_result r =
      std::to_chars(buffer, buffer + sizeof(buffer), value, std::chars_format::scientific);
  const std::string_view text(buffer, static_cast<size_t>(r.ptr - buffer));  // -d.ddde+XX
  const size_t e = text.find('e');
  const bool negative = text.front() == '-';
  std::string digits;
  for (const char c : text.substr(negative ? 1 : 0, e - (negative ? 1 : 0))) {
    if (c != '.') digits += c;
  }
  const int exponent = std::stoi(std::string(text.substr(e + 1)));
  std::string out = negative ? "-" : "";
  if (exponent < -4 || exponent >= 16) {
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    return out + fmt::format("e{}{:02d}", exponent < 0 ? '-' : '+', std::abs(exponent));
  }
  if (exponent < 0) {
    return out + "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
  }
  const size_t whole = static_cast<size_t>(exponent) + 1;
  if (digits.size() <= whole) return out + digits + std::string(whole - digits.size(), '0') + ".0";
  return out + digits.substr(0, whole) + "." + digits.substr(whole);
}

void write_json(const OrderedJson& value, int indent, int depth, std::string& out) {
  const auto newline = [&](int level) {
    out += '\n';
    out.append(static_cast<size_t>(indent * level), ' ');
  };
  switch (value.type()) {
    case OrderedJson::value_t::object:
    case OrderedJson::value_t::array: {
      const bool object = value.is_object();
      if (value.empty()) {
        out += object ? "{}" : "[]";
        return;
      }
      out += object ? '{' : '[';
      bool first = true;
      for (auto it = value.begin(); it != value.end(); ++it) {
        if (!first) out += indent < 0 ? ", " : ",";
        first = false;
        if (indent >= 0) newline(depth + 1);
        if (object) {
          out += OrderedJson(it.key()).dump(-1, ' ', false, OrderedJson::error_handler_t::replace);
          out += ": ";
        }
        write_json(*it, indent, depth + 1, out);
      }
      if (indent >= 0) newline(depth);
      out += object ? '}' : ']';
      return;
    }
    case OrderedJson::value_t::number_float:
      out += python_float(value.get<double>());
      return;
    default:
      out += value.dump(-1, ' ', false, OrderedJson::error_handler_t::replace);
  }
}

// OpenAI's shape of id ("call_" and 24 letters and digits), or 9 letters and digits for Mistral,
// whose template takes back no other.
std::string new_call_id(ChatToolSyntax syntax) {
  static constexpr std::string_view kAlphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  thread_local std::mt19937_64 random{std::random_device{}()};
  const bool mistral = syntax == ChatToolSyntax::kMistralJson;
  std::string id = mistral ? "" : "call_";
  for (int i = 0; i < (mistral ? 9 : 24); ++i) id += kAlphabet[random() % kAlphabet.size()];
  return id;
}

// OpenAI's rule for function names.
bool valid_name(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  for (const char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') return false;
  }
  return true;
}

const ServeTool* find_tool(const ServeTools& tools, std::string_view name) {
  for (const ServeTool& tool : tools.tools) {
    if (tool.name == name) return &tool;
  }
  return nullptr;
}

// `text` as JSON; none for invalid JSON or one nested deeper than a request may be.
std::optional<OrderedJson> parse_json(std::string_view text) {
  if (json_nesting_depth(text) > internal::kMaxJsonDepth) return std::nullopt;
  OrderedJson value = OrderedJson::parse(text, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) return std::nullopt;
  return value;
}

// {"name": a known tool, `arguments_key` (or its other spelling): an object} as a call.
std::optional<ServeToolCall> read_call(const ServeTools& tools, const OrderedJson& value) {
  if (!value.is_object() || !value.contains("name") || !value["name"].is_string()) return {};
  const std::string name = value["name"].get<std::string>();
  if (find_tool(tools, name) == nullptr) return {};
  const OrderedJson* arguments = nullptr;
  for (const char* key : {"arguments", "parameters"}) {
    if (value.contains(key)) arguments = &value[key];
  }
  if (arguments == nullptr || !arguments->is_object()) return {};
  return ServeToolCall{new_call_id(tools.syntax), name, jinja_tojson(*arguments)};
}

// Hermes: the text before the first <tool_call> is the content; each block holds one call (the
// last may lack its closing tag).
std::optional<ToolCallOutput> read_hermes(const ServeTools& tools, std::string_view text) {
  size_t open = text.find(kHermesOpen);
  if (open == std::string_view::npos) return std::nullopt;
  ToolCallOutput out{std::string(rtrim(text.substr(0, open))), {}};
  while (open != std::string_view::npos) {
    const size_t begin = open + kHermesOpen.size();
    const size_t close = text.find(kHermesClose, begin);
    const std::string_view body = text.substr(
        begin, close == std::string_view::npos ? std::string_view::npos : close - begin);
    const std::optional<OrderedJson> value = parse_json(trim(body));
    if (!value) return std::nullopt;
    std::optional<ServeToolCall> call = read_call(tools, *value);
    if (!call) return std::nullopt;
    out.calls.push_back(*std::move(call));
    if (close == std::string_view::npos) break;
    open = text.find(kHermesOpen, close);
  }
  return out;
}

// Llama 3.1: the whole answer is a call, or several separated by ';'.
std::optional<ToolCallOutput> read_llama_json(const ServeTools& tools, std::string_view text) {
  const std::string_view answer = trim(text);
  if (answer.empty() || answer.front() != '{') return std::nullopt;
  ToolCallOutput out;
  if (const std::optional<OrderedJson> value = parse_json(answer)) {
    std::optional<ServeToolCall> call = read_call(tools, *value);
    if (!call) return std::nullopt;
    out.calls.push_back(*std::move(call));
    return out;
  }
  // Several calls: split at the semicolons outside strings.
  size_t from = 0;
  bool in_string = false;
  for (size_t i = 0; i <= answer.size(); ++i) {
    const char c = i < answer.size() ? answer[i] : ';';
    if (in_string) {
      if (c == '\\') ++i;
      if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    if (c != ';') continue;
    const std::optional<OrderedJson> value = parse_json(answer.substr(from, i - from));
    if (!value) return std::nullopt;
    std::optional<ServeToolCall> call = read_call(tools, *value);
    if (!call) return std::nullopt;
    out.calls.push_back(*std::move(call));
    from = i + 1;
  }
  if (from != answer.size() + 1) return std::nullopt;  // the text ended inside a string
  return out;
}

// Mistral v0.3: [TOOL_CALLS] (a control token, so usually not in the text) and a JSON list of
// calls as the whole answer.
std::optional<ToolCallOutput> read_mistral_json(const ServeTools& tools, std::string_view text) {
  constexpr std::string_view kMarker = "[TOOL_CALLS]";
  std::string_view answer = trim(text);
  if (answer.starts_with(kMarker)) answer = trim(answer.substr(kMarker.size()));
  if (answer.empty() || answer.front() != '[') return std::nullopt;
  const std::optional<OrderedJson> value = parse_json(answer);
  if (!value || !value->is_array() || value->empty()) return std::nullopt;
  ToolCallOutput out;
  for (const OrderedJson& item : *value) {
    std::optional<ServeToolCall> call = read_call(tools, item);
    if (!call) return std::nullopt;
    out.calls.push_back(*std::move(call));
  }
  return out;
}

// The schema "required" holds the output to: a list of calls of the request's tools.
OrderedJson required_schema(const ServeTools& tools, const std::vector<OrderedJson>& parameters) {
  OrderedJson branches = OrderedJson::array();
  for (size_t i = 0; i < tools.tools.size(); ++i) {
    branches.push_back(
        {{"type", "object"},
         {"properties",
          {{"name", {{"const", tools.tools[i].name}}}, {"parameters", parameters[i]}}},
         {"required", {"name", "parameters"}},
         {"additionalProperties", false}});
  }
  OrderedJson schema = {{"type", "array"}, {"minItems", 1}, {"items", {{"anyOf", branches}}}};
  if (!tools.parallel) schema["maxItems"] = 1;
  return schema;
}

Status parse_tool(const OrderedJson& tool, size_t index, ServeTools& tools,
                  std::vector<OrderedJson>& parameters) {
  const std::string field = fmt::format("tools[{}]", index);
  if (!tool.is_object() || !tool.contains("type") || tool["type"] != "function") {
    return field_error(field, "must be {\"type\": \"function\", \"function\": {...}}");
  }
  if (!tool.contains("function") || !tool["function"].is_object()) {
    return field_error(field + ".function", "must be an object");
  }
  const OrderedJson& function = tool["function"];
  if (!function.contains("name") || !function["name"].is_string() ||
      !valid_name(function["name"].get<std::string>())) {
    return field_error(field + ".function.name",
                       "must be 1 to 64 letters, digits, underscores or dashes");
  }
  const std::string name = function["name"].get<std::string>();
  if (find_tool(tools, name) != nullptr) {
    return field_error(field + ".function.name", fmt::format("repeats '{}'", name));
  }
  if (function.contains("description") && !function["description"].is_null() &&
      !function["description"].is_string()) {
    return field_error(field + ".function.description", "must be a string");
  }
  OrderedJson schema = {{"type", "object"},
                        {"properties", OrderedJson::object()},
                        {"additionalProperties", false}};  // none: an empty parameter list
  if (function.contains("parameters") && !function["parameters"].is_null()) {
    if (!function["parameters"].is_object()) {
      return field_error(field + ".function.parameters", "must be a JSON schema object");
    }
    schema = function["parameters"];
  }
  parameters.push_back(std::move(schema));
  ChatToolText text{jinja_tojson(tool), jinja_tojson(tool, 4)};
  for (auto it = function.begin(); it != function.end(); ++it) {
    if (it.key() == "return") continue;  // Mistral's template leaves it out
    text.function_fields.push_back(
        {it.key(), it->is_string() ? it->get<std::string>() : jinja_tojson(*it), it->is_string()});
  }
  tools.tools.push_back({name, std::move(text)});
  return ok_status();
}

Status parse_tool_choice(const OrderedJson& body, ServeTools& tools) {
  const bool given = body.contains("tool_choice") && !body["tool_choice"].is_null();
  tools.choice = tools.tools.empty() ? ToolChoice::kNone : ToolChoice::kAuto;
  if (!given) return ok_status();
  const OrderedJson& choice = body["tool_choice"];
  if (choice == "none") {
    tools.choice = ToolChoice::kNone;
    return ok_status();
  }
  if (tools.tools.empty()) return field_error("tool_choice", "needs \"tools\"");
  if (choice == "auto") {
    tools.choice = ToolChoice::kAuto;
  } else if (choice == "required") {
    tools.choice = ToolChoice::kRequired;
  } else if (choice.is_object() && choice.contains("function") && choice["function"].is_object() &&
             choice["function"].contains("name") && choice["function"]["name"].is_string()) {
    tools.named = choice["function"]["name"].get<std::string>();
    if (find_tool(tools, tools.named) == nullptr) {
      return field_error("tool_choice.function.name",
                         fmt::format("is '{}', which no tool is", tools.named));
    }
    tools.choice = ToolChoice::kNamed;
  } else {
    return field_error("tool_choice",
                       "must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", "
                       "\"function\": {\"name\": ...}}");
  }
  return ok_status();
}

}  // namespace

std::string jinja_tojson(const OrderedJson& value, int indent) {
  std::string out;
  write_json(value, indent, 0, out);
  return out;
}

Status parse_tools(const OrderedJson& body, ServeTools& tools, GenConfig& config) {
  std::vector<OrderedJson> parameters;
  if (body.contains("tools") && !body["tools"].is_null()) {
    const OrderedJson& list = body["tools"];
    if (!list.is_array()) return field_error("tools", "must be a list of tools");
    if (list.size() > kMaxTools) {
      return field_error("tools",
                         fmt::format("holds {} tools; at most {}", list.size(), kMaxTools));
    }
    for (size_t i = 0; i < list.size(); ++i) {
      CELLM_RETURN_IF_ERROR(parse_tool(list[i], i, tools, parameters));
    }
  }
  CELLM_RETURN_IF_ERROR(parse_tool_choice(body, tools));
  if (body.contains("parallel_tool_calls") && !body["parallel_tool_calls"].is_null()) {
    if (!body["parallel_tool_calls"].is_boolean()) {
      return field_error("parallel_tool_calls", "must be true or false");
    }
    tools.parallel = body["parallel_tool_calls"].get<bool>();
  }
  if (tools.choice != ToolChoice::kRequired && tools.choice != ToolChoice::kNamed) {
    return ok_status();
  }
  if (config.constrained()) {
    return field_error("tool_choice",
                       "asks for calls, which a response_format or structured output excludes");
  }
  size_t index = 0;
  while (tools.choice == ToolChoice::kNamed && tools.tools[index].name != tools.named) ++index;
  const OrderedJson schema =
      tools.choice == ToolChoice::kNamed ? parameters[index] : required_schema(tools, parameters);
  StatusOr<std::shared_ptr<const JsonSchema>> compiled = JsonSchema::compile(schema.dump());
  if (!compiled.ok()) {
    // Name the tool whose parameters the compiler refuses.
    for (size_t i = 0; i < parameters.size(); ++i) {
      if (tools.choice == ToolChoice::kNamed && i != index) continue;
      if (!JsonSchema::compile(parameters[i].dump()).ok()) {
        return field_error(fmt::format("tools[{}].function.parameters", i),
                           "is refused: " + std::string(compiled.status().message()));
      }
    }
    return field_error("tools", "are refused: " + std::string(compiled.status().message()));
  }
  config.json_schema = *std::move(compiled);
  return ok_status();
}

ToolCallOutput read_tool_calls(const ServeTools& tools, std::string_view text) {
  std::optional<ToolCallOutput> out;
  switch (tools.choice) {
    case ToolChoice::kNone:
      break;
    case ToolChoice::kNamed:
      if (const std::optional<OrderedJson> value = parse_json(text); value && value->is_object()) {
        out = ToolCallOutput{"", {{new_call_id(tools.syntax), tools.named, jinja_tojson(*value)}}};
      }
      break;
    case ToolChoice::kRequired:
      if (const std::optional<OrderedJson> value = parse_json(text); value && value->is_array()) {
        out = ToolCallOutput{};
        for (const OrderedJson& item : *value) {
          std::optional<ServeToolCall> call = read_call(tools, item);
          if (!call) {
            out.reset();
            break;
          }
          out->calls.push_back(*std::move(call));
        }
        if (out && out->calls.empty()) out.reset();
      }
      break;
    case ToolChoice::kAuto:
      if (tools.syntax == ChatToolSyntax::kHermes) out = read_hermes(tools, text);
      if (tools.syntax == ChatToolSyntax::kLlamaJson) out = read_llama_json(tools, text);
      if (tools.syntax == ChatToolSyntax::kMistralJson) out = read_mistral_json(tools, text);
      break;
  }
  if (!out) return {std::string(text), {}};
  if (!tools.parallel && out->calls.size() > 1) out->calls.resize(1);
  return *std::move(out);
}

std::string ToolCallStream::push(std::string_view delta) {
  text_.append(delta);
  if (held_) return "";
  const std::string_view text = text_;
  size_t show_to = text.size();
  const bool auto_choice = tools_->choice == ToolChoice::kAuto;
  if (tools_->choice == ToolChoice::kRequired || tools_->choice == ToolChoice::kNamed) {
    held_ = true;
    return "";
  }
  if (auto_choice && tools_->syntax == ChatToolSyntax::kHermes) {
    const size_t open = text.find(kHermesOpen, num_shown_);
    if (open != std::string_view::npos) {
      held_ = true;
      show_to = num_shown_ + rtrim(text.substr(num_shown_, open - num_shown_)).size();
    } else {
      // Hold back what may begin the tag, and the spaces before it (shown only if text follows).
      size_t keep = 0;
      for (size_t k = std::min(kHermesOpen.size() - 1, text.size() - num_shown_); k > 0; --k) {
        if (text.ends_with(kHermesOpen.substr(0, k))) {
          keep = k;
          break;
        }
      }
      show_to = text.size() - keep;
      show_to = num_shown_ + rtrim(text.substr(num_shown_, show_to - num_shown_)).size();
    }
  } else if (auto_choice && num_shown_ == 0 &&
             (tools_->syntax == ChatToolSyntax::kLlamaJson ||
              tools_->syntax == ChatToolSyntax::kMistralJson)) {
    // A call is the whole answer: decided by its first character (Mistral's after its marker).
    const char opening = tools_->syntax == ChatToolSyntax::kLlamaJson ? '{' : '[';
    std::string_view answer = trim(text);
    if (answer.empty()) return "";  // only spaces so far: a call may follow
    if (answer.front() == opening) {
      held_ = true;
      return "";
    }
  }
  std::string shown(text.substr(num_shown_, show_to - num_shown_));
  num_shown_ = show_to;
  return shown;
}

ToolCallOutput ToolCallStream::finish() {
  ToolCallOutput whole = read_tool_calls(*tools_, text_);
  if (whole.calls.empty()) return {text_.substr(num_shown_), {}};
  whole.content = whole.content.substr(std::min(num_shown_, whole.content.size()));
  return whole;
}

}  // namespace cellm::app
