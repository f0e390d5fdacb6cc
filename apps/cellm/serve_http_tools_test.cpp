// Tool calling through the server on stories260K (CPU): the tools reach the prompt, a named or
// required tool_choice gives calls whose arguments keep their tools' schemas (checked here by
// hand, not by the compiler that constrained them), streamed calls equal whole ones, and what a
// model's format cannot show is refused.
#include <gtest/gtest.h>

#include <string>

#include "serve_http_test_util.h"

namespace cellm::app::http_test {
namespace {

const Json kWeather = Json::parse(R"({"type": "function", "function": {"name": "get_weather",
    "description": "The weather in a city", "parameters": {"type": "object", "properties": {
      "city": {"type": "string", "maxLength": 6}, "days": {"type": "integer", "minimum": 1,
      "maximum": 9}}, "required": ["city"], "additionalProperties": false}}})");
const Json kTime = Json::parse(R"({"type": "function", "function": {"name": "get_time",
    "parameters": {"type": "object", "properties": {"zone": {"enum": ["utc", "cet"]}},
    "required": ["zone"], "additionalProperties": false}}})");

Json chat(Json extra) {
  // No max_tokens: as many as the context leaves (the model writes much whitespace in JSON).
  Json body = {{"messages", {{{"role", "user"}, {"content", "Weather in Oslo?"}}}},
               {"temperature", 0}};
  body.update(extra);
  return body;
}

// The arguments of a call of get_weather or get_time, checked against their schemas by hand.
void expect_valid_call(const Json& call) {
  ASSERT_EQ(call.at("type"), "function");
  EXPECT_EQ(call.at("id").get<std::string>().rfind("call_", 0), 0u);
  const std::string name = call.at("function").at("name").get<std::string>();
  const Json arguments = Json::parse(call.at("function").at("arguments").get<std::string>());
  ASSERT_TRUE(arguments.is_object()) << arguments.dump();
  if (name == "get_weather") {
    ASSERT_TRUE(arguments.contains("city") && arguments["city"].is_string()) << arguments.dump();
    EXPECT_LE(arguments["city"].get<std::string>().size(), 6u * 4);  // 6 code points
    for (const auto& [key, value] : arguments.items()) {
      EXPECT_TRUE(key == "city" || (key == "days" && value.is_number_integer() &&
                                    value.get<int>() >= 1 && value.get<int>() <= 9))
          << arguments.dump();
    }
  } else {
    ASSERT_EQ(name, "get_time");
    EXPECT_EQ(arguments.size(), 1u) << arguments.dump();
    EXPECT_TRUE(arguments.at("zone") == "utc" || arguments.at("zone") == "cet");
  }
}

TEST(ServeHttpToolsTest, TheToolsReachThePrompt) {
  Served served(4, stories_with_chat_template("chatml"));
  const Json plain = {{"messages", {{{"role", "user"}, {"content", "Weather in Oslo?"}}}}};
  Json with_tools = plain;
  with_tools["tools"] = {kWeather};
  const Reply without = post(served, "/tokenize", plain);
  const Reply with = post(served, "/tokenize", with_tools);
  ASSERT_EQ(with.status, 200) << with.body.dump();
  ASSERT_EQ(without.status, 200) << without.body.dump();
  // The tool's JSON is in the rendered prompt: its tokens decode to text holding it.
  const Reply text = post(served, "/detokenize", {{"tokens", with.body.at("tokens")}});
  ASSERT_EQ(text.status, 200);
  const std::string prompt = text.body.at("prompt").get<std::string>();
  EXPECT_NE(prompt.find("\"name\": \"get_weather\""), std::string::npos) << prompt;
  EXPECT_NE(prompt.find("\"description\": \"The weather in a city\""), std::string::npos);
  EXPECT_NE(prompt.find("<tools>"), std::string::npos);
  EXPECT_GT(with.body.at("count").get<int>(), without.body.at("count").get<int>());
  // A generation's prompt is that one.
  const Reply r =
      post(served, "/v1/chat/completions", chat({{"tools", {kWeather}}, {"max_tokens", 4}}));
  ASSERT_EQ(r.status, 200) << r.body.dump();
  EXPECT_EQ(r.body.at("usage").at("prompt_tokens"), with.body.at("count"));
}

TEST(ServeHttpToolsTest, ANamedChoiceCallsThatFunctionWithArgumentsItsSchemaTakes) {
  Served served(4, stories_with_chat_template("chatml"));
  const Reply r = post(
      served, "/v1/chat/completions",
      chat({{"tools", {kTime, kWeather}},
            {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_weather"}}}}}}));
  ASSERT_EQ(r.status, 200) << r.body.dump();
  const Json& choice = r.body.at("choices").at(0);
  EXPECT_EQ(choice.at("finish_reason"), "tool_calls") << r.body.dump();
  EXPECT_TRUE(choice.at("message").at("content").is_null());
  ASSERT_EQ(choice.at("message").at("tool_calls").size(), 1u);
  const Json& call = choice.at("message").at("tool_calls").at(0);
  EXPECT_EQ(call.at("function").at("name"), "get_weather");
  expect_valid_call(call);
}

// The token of "]": this model would rather add calls than end the list, so the parallel case
// nudges it to close the list where it may.
int32_t close_bracket_token(const Served& served) {
  const Reply r = post(served, "/tokenize", {{"prompt", "]"}, {"add_special_tokens", false}});
  EXPECT_EQ(r.status, 200);
  EXPECT_FALSE(r.body.at("tokens").empty());  // maybe the word-start piece, then "]"
  return r.body.at("tokens").back().get<int32_t>();
}

TEST(ServeHttpToolsTest, ARequiredChoiceCallsOneOrMoreOfTheTools) {
  Served served(4, stories_with_chat_template("llama-3.1"));
  const std::string close = std::to_string(close_bracket_token(served));
  for (const bool parallel : {true, false}) {
    Json body = chat({{"tools", {kTime, kWeather}},
                      {"tool_choice", "required"},
                      {"parallel_tool_calls", parallel},
                      {"temperature", 1.0},
                      {"seed", 5},
                      {"n", 3}});
    if (parallel) body["logit_bias"] = {{close, 100}};
    const Reply r = post(served, "/v1/chat/completions", body);
    ASSERT_EQ(r.status, 200) << r.body.dump();
    for (const Json& choice : r.body.at("choices")) {
      EXPECT_EQ(choice.at("finish_reason"), "tool_calls") << choice.dump();
      const Json& calls = choice.at("message").at("tool_calls");
      ASSERT_GE(calls.size(), 1u);
      if (!parallel) {
        EXPECT_EQ(calls.size(), 1u);
      }
      for (const Json& call : calls) expect_valid_call(call);
    }
  }
}

TEST(ServeHttpToolsTest, StreamedCallsEqualWholeOnes) {
  Served served(4, stories_with_chat_template("chatml"));
  const Json body = chat(
      {{"tools", {kTime, kWeather}}, {"tool_choice", "required"}, {"parallel_tool_calls", false}});
  const Reply whole = post(served, "/v1/chat/completions", body);
  ASSERT_EQ(whole.status, 200) << whole.body.dump();
  const StreamedChat streamed = stream_chat(served, body);
  EXPECT_EQ(streamed.content, "");
  EXPECT_EQ(streamed.finish, "tool_calls");
  const Json& calls = streamed.tool_calls;
  const Json& expected = whole.body.at("choices").at(0).at("message").at("tool_calls");
  ASSERT_EQ(calls.size(), expected.size()) << calls.dump();
  for (size_t i = 0; i < calls.size(); ++i) {
    EXPECT_EQ(calls[i].at("index"), i);
    EXPECT_EQ(calls[i].at("function"), expected[i].at("function"));  // greedy: the same calls
    expect_valid_call(calls[i]);
  }
}

TEST(ServeHttpToolsTest, AnAutoChoiceWithoutACallIsPlainContentStreamedAsWhole) {
  Served served(4, stories_with_chat_template("chatml"));
  const Json body = chat({{"tools", {kWeather}}, {"max_tokens", 24}});
  const Reply whole = post(served, "/v1/chat/completions", body);
  ASSERT_EQ(whole.status, 200) << whole.body.dump();
  const Json& choice = whole.body.at("choices").at(0);
  EXPECT_EQ(choice.at("finish_reason"), "length");
  EXPECT_FALSE(choice.at("message").contains("tool_calls"));
  const std::string content = choice.at("message").at("content").get<std::string>();
  EXPECT_FALSE(content.empty());
  const StreamedChat streamed = stream_chat(served, body);
  EXPECT_TRUE(streamed.tool_calls.empty());
  EXPECT_EQ(streamed.content, content);
}

// Llama 3.1's tools open the first user message, or with chat_template_kwargs'
// tools_in_user_message off follow the system turn's date.
TEST(ServeHttpToolsTest, LlamaToolsGoWhereTheTemplateVariableSays) {
  Served served(2, stories_with_chat_template("llama-3.1"));
  const Json messages = {{{"role", "user"}, {"content", "Weather in Oslo?"}}};
  const std::string in_user = prompt_text(served, messages, {{"tools", {kWeather}}});
  const std::string in_system = prompt_text(
      served, messages,
      {{"tools", {kWeather}}, {"chat_template_kwargs", {{"tools_in_user_message", false}}}});
  const std::string user_turn = "<|start_header_id|>user<|end_header_id|>\n\n";
  EXPECT_NE(in_user.find(user_turn + "Given the following functions"), std::string::npos)
      << in_user;
  EXPECT_EQ(in_user.find("You have access to the following functions"), std::string::npos);
  EXPECT_NE(in_system.find("Today Date: 26 Jul 2024\n\nYou have access to the following functions"),
            std::string::npos)
      << in_system;
  EXPECT_NE(in_system.find(user_turn + "Weather in Oslo?<|eot_id|>"), std::string::npos)
      << in_system;
}

TEST(ServeHttpToolsTest, ConversationsWithCallsAndResultsAreTakenWhereTheFormatShowsThem) {
  const Json conversation = {
      {"messages",
       {{{"role", "user"}, {"content", "Weather in Oslo?"}},
        {{"role", "assistant"},
         {"content", nullptr},
         {"tool_calls",
          {{{"id", "call_1"},
            {"type", "function"},
            {"function", {{"name", "get_weather"}, {"arguments", "{\"city\": \"Oslo\"}"}}}}}}},
        {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "4 degrees"}}}},
      {"tools", {kWeather}},
      {"max_tokens", 4}};
  for (const char* format : {"chatml", "qwen3", "llama-3.1", "llama-3.2"}) {
    Served served(2, stories_with_chat_template(format));
    const Reply r = post(served, "/v1/chat/completions", conversation);
    EXPECT_EQ(r.status, 200) << format << ": " << r.body.dump();
  }
  // Mistral v0.3's template takes back ids of 9 characters only.
  Json mistral = conversation;
  mistral["messages"][1]["tool_calls"][0]["id"] = "a1B2c3D4e";
  mistral["messages"][2]["tool_call_id"] = "a1B2c3D4e";
  for (const char* format : {"mistral-v3", "mistral-nemo"}) {
    Served mistral_served(2, stories_with_chat_template(format));
    EXPECT_EQ(post(mistral_served, "/v1/chat/completions", mistral).status, 200) << format;
    const Reply long_id = post(mistral_served, "/v1/chat/completions", conversation);
    EXPECT_EQ(long_id.status, 400) << format;
    EXPECT_NE(long_id.body.dump().find("9 characters"), std::string::npos) << long_id.body.dump();
  }
  for (const char* format : {"llama-2", "llama-3"}) {  // Llama 2, Llama 3.0: no tools
    Served served(2, stories_with_chat_template(format));
    const Reply refused = post(served, "/v1/chat/completions", conversation);
    EXPECT_EQ(refused.status, 400) << format;
    EXPECT_NE(refused.body.dump().find("takes no tools"), std::string::npos) << refused.body.dump();
  }
  Json bad_arguments = conversation;
  bad_arguments["messages"][1]["tool_calls"][0]["function"]["arguments"] = "{\"city\": ";
  Served chatml(2, stories_with_chat_template("chatml"));
  const Reply bad = post(chatml, "/v1/chat/completions", bad_arguments);
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.dump().find("messages[1].tool_calls[0].function.arguments"), std::string::npos)
      << bad.body.dump();
}

}  // namespace
}  // namespace cellm::app::http_test
