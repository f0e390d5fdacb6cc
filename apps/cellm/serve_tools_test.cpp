// Tool calling's pieces: the JSON texts the chat templates show (against Python's json.dumps),
// the tools of a request and their refusals, reading calls out of text in each syntax, and the
// stream reader agreeing with the whole-text reader wherever the text is cut.
#include "serve_tools.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "batching/json_schema_prefix.h"

namespace cellm::app {
namespace {

using OrderedJson = nlohmann::ordered_json;

// Python's json.dumps(value, ensure_ascii=False) and with indent=4, for each input (written by
// Python: tools/gen_chat_tool_vectors.py's tojson, over these values).
const char* const kTojsonVectors = R"vectors(
[
 {
  "input": "{\"b\": 1, \"a\": [1, 2.5, -0.0, 1e-05, 0.0001, 1000000000000000.0, 1234567890123456.8, 1e+16, 1.5e+300, 0.1, 100.0], \"c\": null, \"d\": true}",
  "compact": "{\"b\": 1, \"a\": [1, 2.5, -0.0, 1e-05, 0.0001, 1000000000000000.0, 1234567890123456.8, 1e+16, 1.5e+300, 0.1, 100.0], \"c\": null, \"d\": true}",
  "indented": "{\n    \"b\": 1,\n    \"a\": [\n        1,\n        2.5,\n        -0.0,\n        1e-05,\n        0.0001,\n        1000000000000000.0,\n        1234567890123456.8,\n        1e+16,\n        1.5e+300,\n        0.1,\n        100.0\n    ],\n    \"c\": null,\n    \"d\": true\n}"
 },
 {
  "input": "{\"z\": \"quote \\\" backslash \\\\ newline \\n tab \\t ctrl \\u0001 \\u001f del \\u007f \\u00e9 \\ud83d\\ude00 \\u2028\", \"y\": {}, \"x\": []}",
  "compact": "{\"z\": \"quote \\\" backslash \\\\ newline \\n tab \\t ctrl \\u0001 \\u001f del  é 😀  \", \"y\": {}, \"x\": []}",
  "indented": "{\n    \"z\": \"quote \\\" backslash \\\\ newline \\n tab \\t ctrl \\u0001 \\u001f del  é 😀  \",\n    \"y\": {},\n    \"x\": []\n}"
 },
 {
  "input": "[[], {}, [{}], {\"k\": [1, {\"m\": []}]}]",
  "compact": "[[], {}, [{}], {\"k\": [1, {\"m\": []}]}]",
  "indented": "[\n    [],\n    {},\n    [\n        {}\n    ],\n    {\n        \"k\": [\n            1,\n            {\n                \"m\": []\n            }\n        ]\n    }\n]"
 },
 {
  "input": "\"plain\"",
  "compact": "\"plain\"",
  "indented": "\"plain\""
 },
 {
  "input": "-12345678901234",
  "compact": "-12345678901234",
  "indented": "-12345678901234"
 }
]
)vectors";

TEST(ServeToolsTest, WritesJsonAsTheTemplatesTojsonDoes) {
  const OrderedJson vectors = OrderedJson::parse(kTojsonVectors);
  ASSERT_EQ(vectors.size(), 5u);
  for (const OrderedJson& v : vectors) {
    const OrderedJson value = OrderedJson::parse(v.at("input").get<std::string>());
    EXPECT_EQ(jinja_tojson(value), v.at("compact").get<std::string>());
    EXPECT_EQ(jinja_tojson(value, 4), v.at("indented").get<std::string>());
  }
}

const char* const kWeather = R"({"type": "function", "function": {"name": "get_weather",
    "description": "Weather", "parameters": {"type": "object", "properties": {
      "city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}},
    "required": ["city"], "additionalProperties": false}}})";
const char* const kTime = R"({"type": "function", "function": {"name": "get_time"}})";

StatusOr<ServeTools> tools_of(const std::string& body, GenConfig* config = nullptr) {
  GenConfig local;
  ServeTools tools;
  CELLM_RETURN_IF_ERROR(parse_tools(OrderedJson::parse(body), tools, config ? *config : local));
  return tools;
}

ServeTools weather_and_time(ToolChoice choice, ChatToolSyntax syntax) {
  StatusOr<ServeTools> tools =
      tools_of(std::string(R"({"tools": [)") + kWeather + ", " + kTime + "]}");
  EXPECT_TRUE(tools.ok()) << tools.status().to_string();
  tools->choice = choice;
  tools->syntax = syntax;
  return *tools;
}

TEST(ServeToolsTest, ReadsTheToolsInTheirKeysOrder) {
  GenConfig config;
  StatusOr<ServeTools> tools = tools_of(std::string(R"({"tools": [)") + kWeather + ", " + kTime +
                                            R"(], "parallel_tool_calls": false})",
                                        &config);
  ASSERT_TRUE(tools.ok()) << tools.status().to_string();
  ASSERT_EQ(tools->tools.size(), 2u);
  EXPECT_EQ(tools->tools[0].name, "get_weather");
  EXPECT_EQ(tools->tools[1].text.json, R"({"type": "function", "function": {"name": "get_time"}})");
  EXPECT_EQ(tools->tools[1].text.json_indented,
            "{\n    \"type\": \"function\",\n    \"function\": {\n        \"name\": "
            "\"get_time\"\n    }\n}");
  // The function's fields one by one, strings as they are (Mistral's template writes them so).
  ASSERT_EQ(tools->tools[0].text.function_fields.size(), 3u);
  EXPECT_EQ(tools->tools[0].text.function_fields[1].key, "description");
  EXPECT_EQ(tools->tools[0].text.function_fields[1].text, "Weather");
  EXPECT_TRUE(tools->tools[0].text.function_fields[1].is_string);
  EXPECT_EQ(tools->tools[0].text.function_fields[2].text.rfind("{\"type\": \"object\", ", 0), 0u);
  EXPECT_FALSE(tools->tools[0].text.function_fields[2].is_string);
  EXPECT_EQ(tools->choice, ToolChoice::kAuto);  // the default with tools
  EXPECT_FALSE(tools->parallel);
  EXPECT_EQ(config.json_schema, nullptr);  // auto: the model's own syntax, unconstrained
}

TEST(ServeToolsTest, RequiredAndNamedChoicesHoldTheOutputToASchema) {
  GenConfig named_config;
  StatusOr<ServeTools> named = tools_of(std::string(R"({"tools": [)") + kWeather + R"(],
      "tool_choice": {"type": "function", "function": {"name": "get_weather"}}})",
                                        &named_config);
  ASSERT_TRUE(named.ok()) << named.status().to_string();
  EXPECT_EQ(named->choice, ToolChoice::kNamed);
  ASSERT_NE(named_config.json_schema, nullptr);
  const auto accepts = [](const GenConfig& config, std::string_view text) {
    JsonSchemaPrefix walker(config.json_schema, /*max_whitespace_run=*/4);
    return walker.feed(text) && walker.complete();
  };
  EXPECT_TRUE(accepts(named_config, R"({"city": "Oslo", "days": 2})"));
  EXPECT_FALSE(accepts(named_config, R"({"days": 2})"));               // city is required
  EXPECT_FALSE(accepts(named_config, R"({"city": "Oslo", "x": 1})"));  // nothing else

  GenConfig required_config;
  StatusOr<ServeTools> required = tools_of(
      std::string(R"({"tools": [)") + kWeather + ", " + kTime + R"(], "tool_choice": "required"})",
      &required_config);
  ASSERT_TRUE(required.ok()) << required.status().to_string();
  ASSERT_NE(required_config.json_schema, nullptr);
  EXPECT_TRUE(accepts(required_config,
                      R"([{"name": "get_time", "parameters": {}}, )"
                      R"({"name": "get_weather", "parameters": {"city": "Rome"}}])"));
  EXPECT_FALSE(accepts(required_config, "[]"));  // at least one call
  EXPECT_FALSE(accepts(required_config, R"([{"name": "get_date", "parameters": {}}])"));
  EXPECT_FALSE(accepts(required_config, R"([{"name": "get_time", "parameters": {"x": 1}}])"));

  GenConfig single_config;
  ASSERT_TRUE(tools_of(std::string(R"({"tools": [)") + kTime +
                           R"(], "tool_choice": "required", "parallel_tool_calls": false})",
                       &single_config)
                  .ok());
  EXPECT_TRUE(accepts(single_config, R"([{"name": "get_time", "parameters": {}}])"));
  EXPECT_FALSE(accepts(single_config, R"([{"name": "get_time", "parameters": {}}, )"
                                      R"({"name": "get_time", "parameters": {}}])"));
}

TEST(ServeToolsTest, RefusalsNameTheirField) {
  const std::string weather = kWeather;
  const struct {
    std::string body;
    std::string expected;
  } cases[] = {
      {R"({"tools": {}})", "\"tools\" must be a list"},
      {R"({"tools": [{"type": "code"}]})", "\"tools[0]\" must be"},
      {R"({"tools": [{"type": "function", "function": {"name": "a b"}}]})",
       "\"tools[0].function.name\""},
      {"{\"tools\": [" + weather + ", " + weather + "]}", "repeats 'get_weather'"},
      {R"({"tools": [{"type": "function", "function": {"name": "f", "parameters": 3}}]})",
       "\"tools[0].function.parameters\" must be"},
      {R"({"tool_choice": "required"})", "\"tool_choice\" needs \"tools\""},
      {"{\"tools\": [" + weather + "], \"tool_choice\": \"sometimes\"}", "\"tool_choice\" must be"},
      {"{\"tools\": [" + weather +
           R"(], "tool_choice": {"type": "function", "function": {"name": "f"}}})",
       "is 'f', which no tool is"},
      {"{\"tools\": [" + weather + "], \"parallel_tool_calls\": 1}",
       "\"parallel_tool_calls\" must be"},
      {R"({"tools": [{"type": "function", "function": {"name": "f", "parameters": {
           "type": "object", "properties": {"s": {"type": "string", "pattern": "(a)\\1"}}}}}],
          "tool_choice": "required"})",
       "\"tools[0].function.parameters\" is refused"},
  };
  for (const auto& c : cases) {
    StatusOr<ServeTools> tools = tools_of(c.body);
    ASSERT_FALSE(tools.ok()) << c.body;
    EXPECT_NE(tools.status().message().find(c.expected), std::string::npos)
        << c.body << " -> " << tools.status().message();
  }
  GenConfig constrained;
  constrained.json_object = true;
  StatusOr<ServeTools> both =
      tools_of("{\"tools\": [" + weather + "], \"tool_choice\": \"required\"}", &constrained);
  ASSERT_FALSE(both.ok());
  EXPECT_NE(both.status().message().find("response_format"), std::string::npos);
}

struct Expected {
  std::string content;
  std::vector<std::pair<std::string, std::string>> calls;  // name, arguments
};

void expect_read(const ServeTools& tools, const std::string& text, const Expected& expected) {
  const ToolCallOutput out = read_tool_calls(tools, text);
  EXPECT_EQ(out.content, expected.content) << text;
  ASSERT_EQ(out.calls.size(), expected.calls.size()) << text;
  for (size_t i = 0; i < out.calls.size(); ++i) {
    EXPECT_EQ(out.calls[i].name, expected.calls[i].first);
    EXPECT_EQ(out.calls[i].arguments, expected.calls[i].second);
    EXPECT_EQ(out.calls[i].id.size(), 29u);
    EXPECT_EQ(out.calls[i].id.rfind("call_", 0), 0u);
  }
}

TEST(ServeToolsTest, ReadsHermesCallsAfterTheContent) {
  const ServeTools tools = weather_and_time(ToolChoice::kAuto, ChatToolSyntax::kHermes);
  expect_read(tools, "Just text.", {"Just text.", {}});
  expect_read(
      tools,
      "Let me look. \n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
      "{\"days\":2,\"city\":\"Oslo\"}}\n</tool_call>\n<tool_call>{\"name\": \"get_time\", "
      "\"arguments\": {}}</tool_call>",
      {"Let me look.", {{"get_weather", R"({"days": 2, "city": "Oslo"})"}, {"get_time", "{}"}}});
  // The last block may lack its closing tag (a stop string took it, say).
  expect_read(tools, "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}",
              {"", {{"get_time", "{}"}}});
  // Anything but a known tool's call keeps the whole text as content.
  for (const char* text :
       {"<tool_call>{\"name\": \"nope\", \"arguments\": {}}</tool_call>",
        "<tool_call>{\"name\": \"get_time\", \"arguments\": 3}</tool_call>",
        "<tool_call>{\"name\": \"get_time\", \"arguments\": {</tool_call>", "a <tool_call> b"}) {
    expect_read(tools, text, {text, {}});
  }
  ServeTools single = tools;
  single.parallel = false;
  expect_read(single,
              "<tool_call>{\"name\": \"get_time\", \"arguments\": {}}</tool_call><tool_call>"
              "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"x\"}}</tool_call>",
              {"", {{"get_time", "{}"}}});
}

TEST(ServeToolsTest, ReadsLlamaJsonCallsAsTheWholeAnswer) {
  const ServeTools tools = weather_and_time(ToolChoice::kAuto, ChatToolSyntax::kLlamaJson);
  expect_read(tools, " {\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}",
              {"", {{"get_weather", R"({"city": "Paris"})"}}});
  expect_read(tools,
              "{\"name\": \"get_time\", \"parameters\": {}}; {\"name\": \"get_weather\", "
              "\"arguments\": {\"city\": \"a;b\"}}",
              {"", {{"get_time", "{}"}, {"get_weather", R"({"city": "a;b"})"}}});
  // A call nested deeper than a request may be is not read (JSON is written recursively).
  const std::string deep =
      "{\"name\": \"get_time\", \"parameters\": {\"a\": " + std::string(100000, '[') +
      std::string(100000, ']') + "}}";
  expect_read(tools, deep, {deep, {}});
  for (const char* text : {"It is sunny.", "{\"name\": \"get_time\"}", "{\"city\": \"Paris\"}",
                           "{\"name\": \"get_time\", \"parameters\": {}} and more",
                           "{\"name\": \"get_time\", \"parameters\": {}}; {\"a\": \"b;"}) {
    expect_read(tools, text, {text, {}});
  }
}

TEST(ServeToolsTest, ReadsMistralCallsAsAListThatIsTheWholeAnswer) {
  const ServeTools tools = weather_and_time(ToolChoice::kAuto, ChatToolSyntax::kMistralJson);
  const std::string calls =
      "[{\"name\": \"get_time\", \"arguments\": {}}, {\"name\": \"get_weather\", "
      "\"arguments\": {\"city\": \"Oslo\"}}]";
  for (const std::string& text : {calls, " " + calls + "\n", "[TOOL_CALLS] " + calls}) {
    const ToolCallOutput out = read_tool_calls(tools, text);
    EXPECT_EQ(out.content, "") << text;
    ASSERT_EQ(out.calls.size(), 2u) << text;
    EXPECT_EQ(out.calls[1].name, "get_weather");
    EXPECT_EQ(out.calls[1].arguments, R"({"city": "Oslo"})");
    // Ids the template takes back: 9 letters and digits.
    EXPECT_EQ(out.calls[0].id.size(), 9u);
    for (const char c : out.calls[0].id) EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(c)));
  }
  for (const char* text : {"Sunny.", "[]", "[{\"name\": \"nope\", \"arguments\": {}}]", "[1, 2]",
                           "[{\"name\": \"get_time\", \"arguments\": {}}] more"}) {
    expect_read(tools, text, {text, {}});
  }
}

TEST(ServeToolsTest, ReadsRequiredAndNamedOutputsWhateverTheSyntax) {
  ServeTools named = weather_and_time(ToolChoice::kNamed, ChatToolSyntax::kNone);
  named.named = "get_weather";
  expect_read(named, "{\"city\": \"Rome\", \"days\": 3}",
              {"", {{"get_weather", R"({"city": "Rome", "days": 3})"}}});
  expect_read(named, "{\"city\": \"Ro", {"{\"city\": \"Ro", {}});  // cut by the length
  const ServeTools required = weather_and_time(ToolChoice::kRequired, ChatToolSyntax::kHermes);
  expect_read(required,
              "[{\"name\": \"get_time\", \"parameters\": {}}, {\"name\": \"get_weather\", "
              "\"parameters\": {\"city\": \"Rome\"}}]",
              {"", {{"get_time", "{}"}, {"get_weather", R"({"city": "Rome"})"}}});
  expect_read(required, "[]", {"[]", {}});
  const ServeTools none = weather_and_time(ToolChoice::kNone, ChatToolSyntax::kHermes);
  const std::string call = "<tool_call>{\"name\": \"get_time\", \"arguments\": {}}</tool_call>";
  expect_read(none, call, {call, {}});
}

// Pushing any cut of a text and finishing shows what read_tool_calls shows of the whole.
TEST(ServeToolsTest, TheStreamReaderAgreesWithTheWholeTextReaderWhereverTheTextIsCut) {
  ServeTools named = weather_and_time(ToolChoice::kNamed, ChatToolSyntax::kNone);
  named.named = "get_time";
  const std::vector<std::pair<ServeTools, std::vector<std::string>>> cases = {
      {weather_and_time(ToolChoice::kAuto, ChatToolSyntax::kHermes),
       {"Plain text with a < sign and <tool and <tool_cal in it.  ",
        "Looking.  \n <tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>",
        "x <tool_call>{\"name\": \"bad\", \"arguments\": {}}</tool_call> tail",
        "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"<tool_call>\"}}",
        "  \n", ""}},
      {weather_and_time(ToolChoice::kAuto, ChatToolSyntax::kLlamaJson),
       {"  {\"name\": \"get_time\", \"parameters\": {}}", "  Hello {\"name\": 1}", "{not json",
        "   "}},
      {weather_and_time(ToolChoice::kAuto, ChatToolSyntax::kMistralJson),
       {" [{\"name\": \"get_time\", \"arguments\": {}}]", "Plain [text]", "[TOOL_CALLS] [",
        "[TOOL_CALLS] [{\"name\": \"get_time\", \"arguments\": {}}]"}},
      {named, {"{}", "{\"a\": "}},
      {weather_and_time(ToolChoice::kNone, ChatToolSyntax::kHermes),
       {"<tool_call>{\"name\": \"get_time\", \"arguments\": {}}</tool_call>"}},
  };
  std::mt19937 random(7);
  for (const auto& [tools, texts] : cases) {
    for (const std::string& text : texts) {
      const ToolCallOutput whole = read_tool_calls(tools, text);
      for (int trial = 0; trial < 200; ++trial) {
        ToolCallStream stream(tools);
        std::string shown;
        size_t at = 0;
        while (at < text.size()) {
          const size_t piece = std::min<size_t>(text.size() - at, 1 + random() % 6);
          shown += stream.push(std::string_view(text).substr(at, piece));
          at += piece;
        }
        const ToolCallOutput rest = stream.finish();
        EXPECT_EQ(shown + rest.content, whole.content) << text;
        ASSERT_EQ(rest.calls.size(), whole.calls.size()) << text;
        for (size_t i = 0; i < whole.calls.size(); ++i) {
          EXPECT_EQ(rest.calls[i].name, whole.calls[i].name);
          EXPECT_EQ(rest.calls[i].arguments, whole.calls[i].arguments);
        }
      }
    }
  }
}

// While a Hermes call may still come, nothing of it is shown: text before the tag shows, the
// tag's start and the spaces before it wait.
TEST(ServeToolsTest, TheStreamReaderShowsTextAsSoonAsItCannotBeACall) {
  const ServeTools tools = weather_and_time(ToolChoice::kAuto, ChatToolSyntax::kHermes);
  ToolCallStream stream(tools);
  EXPECT_EQ(stream.push("Hello"), "Hello");
  EXPECT_EQ(stream.push(" <tool"), "");
  EXPECT_EQ(stream.push("s>"), " <tools>");
  EXPECT_EQ(stream.push("\n<tool_call>{\"name\""), "");
  EXPECT_EQ(stream.push(": \"get_time\", \"arguments\": {}}"), "");
  const ToolCallOutput rest = stream.finish();
  EXPECT_EQ(rest.content, "");
  ASSERT_EQ(rest.calls.size(), 1u);
  const ServeTools llama = weather_and_time(ToolChoice::kAuto, ChatToolSyntax::kLlamaJson);
  ToolCallStream plain(llama);
  EXPECT_EQ(plain.push("  "), "");
  EXPECT_EQ(plain.push("Sure"), "  Sure");
  EXPECT_EQ(plain.push(" {"), " {");
}

}  // namespace
}  // namespace cellm::app
