// Tool calling for `cellm serve`'s chat completions (OpenAI's `tools`, `tool_choice`,
// `parallel_tool_calls`): what a request's tools are, how they constrain the output, and how a
// generated text becomes tool calls — as a whole, or streamed piece by piece.
//
// The tools reach the prompt through the model's chat template (tokenizer/chat_template.h renders
// them as the model's own template does; the JSON texts it shows are written here, as Jinja's
// `tojson` writes them). The model writes its calls in its format's syntax: chatml models
// (Qwen, Hermes) as `<tool_call>{"name": ..., "arguments": ...}</tool_call>` after any text,
// Llama 3.1 as its whole answer `{"name": ..., "parameters": ...}`, Mistral v0.3 as its whole
// answer `[{"name": ..., "arguments": ...}, ...]` (after its [TOOL_CALLS] control token, which
// the text does not show). With "tool_choice": "auto" the
// text is read in that syntax; with "required" or a named function the output is held to a JSON
// schema instead (as vLLM does: a list of {"name", "parameters"} objects of the tools, or the
// named function's arguments), whatever the model's syntax. A text that is not a valid call of a
// known tool stays the message's content. Knows no tokenizer and no sockets. Who calls it:
// serve_api.cpp (parsing), serve_exchange.cpp (answers). Thread-safety: functions over values;
// a ToolCallStream belongs to one choice.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "batching/gen_config.h"
#include "cmd_text.h"
#include "core/status.h"

namespace cellm::app {

enum class ToolChoice {
  kNone,      // the tools are shown, calls are not read
  kAuto,      // the model may answer or call, in its own syntax
  kRequired,  // the output is a list of one or more calls (a JSON schema)
  kNamed,     // the output is the named function's arguments (its parameters' schema)
};

// A function a request offers: its name and OpenAI's tool object as the template shows it
// (Jinja's tojson and tojson(indent=4)).
struct ServeTool {
  std::string name;
  ChatToolText text;
};

// A call the model made: arguments as JSON text (an object), as OpenAI's responses carry it.
struct ServeToolCall {
  std::string id;  // "call_" and 24 random letters and digits (Mistral: 9 letters and digits)
  std::string name;
  std::string arguments;
};

struct ServeTools {
  std::vector<ServeTool> tools;
  ToolChoice choice = ToolChoice::kNone;
  std::string named;                              // kNamed: the function
  bool parallel = true;                           // false: at most one call (the first)
  ChatToolSyntax syntax = ChatToolSyntax::kNone;  // the server's to set, from the model
  // Whether generated text is read for calls.
  bool reads_calls() const { return choice != ToolChoice::kNone; }
};

// Python's json.dumps(value, ensure_ascii=False, indent=indent) — what the chat templates' tojson
// writes: ", " and ": " between items on one line (indent < 0), or one item a line indented by
// `indent` spaces with "," and ": "; keys in their order.
std::string jinja_tojson(const nlohmann::ordered_json& value, int indent = -1);

// "tools", "tool_choice" and "parallel_tool_calls" of a chat request body (read in its keys'
// order), into `tools` and, for "required" or a named function, `config.json_schema`.
// InvalidArgument naming the field: a malformed tool, a duplicate name, a tool_choice naming no
// tool or given without tools, parameters the JSON schema compiler refuses, another output
// constraint beside a required call.
Status parse_tools(const nlohmann::ordered_json& body, ServeTools& tools, GenConfig& config);

// A generated text read for calls: the content to show (maybe empty) and the calls (maybe none).
struct ToolCallOutput {
  std::string content;
  std::vector<ServeToolCall> calls;
};
ToolCallOutput read_tool_calls(const ServeTools& tools, std::string_view text);

// read_tool_calls over a text that arrives in pieces: push() returns the content that can be shown
// now (text that cannot become a call), finish() the rest and the calls. The content pushed and
// finished adds up to read_tool_calls' of the whole text, with the same calls.
class ToolCallStream {
 public:
  // `tools` outlives the stream (a temporary is refused at compile time).
  explicit ToolCallStream(const ServeTools& tools) : tools_(&tools) {}
  explicit ToolCallStream(const ServeTools&& tools) = delete;
  std::string push(std::string_view delta);
  ToolCallOutput finish();

 private:
  const ServeTools* tools_;
  std::string text_;      // all of it so far
  size_t num_shown_ = 0;  // bytes of text_ shown as content
  bool held_ = false;     // a call may have begun: nothing more is shown until finish()
};

}  // namespace cellm::app
