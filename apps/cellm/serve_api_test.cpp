// serve_api: request bodies to ServeRequest (fields, defaults, refusals naming the field) and
// the response bodies and events back, checked against OpenAI's documented shapes (the output
// constraints: serve_api_output_test.cpp).
#include "serve_api.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "serve_api_test_util.h"

namespace cellm::app {
namespace {

using Json = nlohmann::json;

TEST(ServeApiTest, CompletionFieldsBecomeTheGenConfig) {
  const ServeRequest r = parse_ok(R"({"model": "m", "prompt": "Once upon", "max_tokens": 7,
      "temperature": 0.5, "top_p": 0.9, "top_k": 40, "min_p": 0.05, "seed": 12,
      "presence_penalty": 0.5, "frequency_penalty": -0.5, "repetition_penalty": 1.1,
      "stop": ["\n", "END"], "stream": true, "stream_options": {"include_usage": true},
      "ignore_eos": true, "return_token_ids": true, "user": "ignored"})");
  EXPECT_EQ(r.model, "m");
  ASSERT_EQ(r.prompts.size(), 1u);
  ASSERT_TRUE(r.prompts[0].text.has_value());
  EXPECT_EQ(*r.prompts[0].text, "Once upon");
  EXPECT_TRUE(r.prompts[0].tokens.empty());
  EXPECT_EQ(r.n, 1);
  EXPECT_EQ(r.max_tokens, 7);
  EXPECT_FLOAT_EQ(r.config.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r.config.sampling.top_p, 0.9f);
  EXPECT_EQ(r.config.sampling.top_k, 40);
  EXPECT_FLOAT_EQ(r.config.sampling.min_p, 0.05f);
  EXPECT_FLOAT_EQ(r.config.sampling.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(r.config.sampling.frequency_penalty, -0.5f);
  EXPECT_FLOAT_EQ(r.config.sampling.repetition_penalty, 1.1f);
  EXPECT_EQ(r.seed, 12u);
  EXPECT_EQ(r.config.stop_strings, (std::vector<std::string>{"\n", "END"}));
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.stream_include_usage);
  EXPECT_FALSE(r.config.use_default_stop_tokens);
  EXPECT_TRUE(r.return_token_ids);
}

TEST(ServeApiTest, AbsentFieldsTakeOpenAIsDefaults) {
  const ServeRequest r = parse_ok(R"({"prompt": "hi"})");
  EXPECT_FALSE(r.max_tokens.has_value()) << "none: the server applies OpenAI's defaults";
  EXPECT_FLOAT_EQ(r.config.sampling.temperature, 1.0f);
  EXPECT_FLOAT_EQ(r.config.sampling.top_p, 1.0f);
  EXPECT_EQ(r.config.sampling.top_k, 0);
  EXPECT_FALSE(r.seed.has_value());
  EXPECT_FALSE(r.stream);
  EXPECT_TRUE(r.config.use_default_stop_tokens);
  EXPECT_TRUE(r.config.stop_strings.empty());
  EXPECT_FALSE(r.return_token_ids);
}

TEST(ServeApiTest, PromptsAreTextOrTokenIdsAloneOrInAList) {
  const ServeRequest ids = parse_ok(R"({"prompt": [1, 403, 407]})");
  ASSERT_EQ(ids.prompts.size(), 1u);
  EXPECT_FALSE(ids.prompts[0].text.has_value());
  EXPECT_EQ(ids.prompts[0].tokens, (std::vector<int32_t>{1, 403, 407}));
  const ServeRequest lists = parse_ok(R"({"prompt": [[5, 6], [7]], "n": 3})");
  ASSERT_EQ(lists.prompts.size(), 2u);
  EXPECT_EQ(lists.prompts[0].tokens, (std::vector<int32_t>{5, 6}));
  EXPECT_EQ(lists.prompts[1].tokens, (std::vector<int32_t>{7}));
  EXPECT_EQ(lists.n, 3);
  EXPECT_EQ(num_prompts(lists), 2u);
  const ServeRequest texts = parse_ok(R"({"prompt": ["a", "b c", ""]})");
  ASSERT_EQ(texts.prompts.size(), 3u);
  EXPECT_EQ(*texts.prompts[1].text, "b c");
  EXPECT_EQ(*texts.prompts[2].text, "");
  EXPECT_EQ(parse_ok(R"({"prompt": "x", "max_tokens": 3.0, "top_k": -1})").max_tokens, 3);
}

TEST(ServeApiTest, ChatMessagesKeepTheirRolesAndTextParts) {
  const ServeRequest r = parse_ok(R"({"messages": [
      {"role": "developer", "content": "Be brief."},
      {"role": "user", "content": [{"type": "text", "text": "Hello, "},
                                   {"type": "text", "text": "there"}]},
      {"role": "assistant", "content": "Hi."},
      {"role": "user", "content": "Again"}], "max_completion_tokens": 9})",
                                  ServeEndpoint::kChatCompletions);
  ASSERT_EQ(r.messages.size(), 4u);
  EXPECT_EQ(r.messages[0].role, "system") << "OpenAI's developer role is the system message";
  EXPECT_EQ(r.messages[1].content, "Hello, there");
  EXPECT_EQ(r.messages[2].role, "assistant");
  EXPECT_EQ(r.messages[3].content, "Again");
  EXPECT_EQ(r.max_tokens, 9);
  EXPECT_TRUE(r.prompts.empty());
  EXPECT_EQ(num_prompts(r), 1u);
}

TEST(ServeApiTest, LogitBiasOfMinusOneHundredBansTheToken) {
  const ServeRequest r = parse_ok(R"({"prompt": "x", "logit_bias": {"13": -100, "42": 2.5}})");
  ASSERT_EQ(r.config.sampling.logit_bias.size(), 2u);
  for (const LogitBias& b : r.config.sampling.logit_bias) {
    if (b.token == 13) {
      EXPECT_TRUE(std::isinf(b.bias) && b.bias < 0);
    } else {
      EXPECT_EQ(b.token, 42);
      EXPECT_FLOAT_EQ(b.bias, 2.5f);
    }
  }
}

TEST(ServeApiTest, EveryRefusalNamesItsField) {
  struct Case {
    std::string body;
    std::string expected;  // a part of the message
    ServeEndpoint endpoint = ServeEndpoint::kCompletions;
  };
  const std::vector<Case> cases = {
      {"{", "not valid JSON"},
      {"[1, 2]", "JSON object"},
      {"{}", "\"prompt\" is missing"},
      {R"({"prompt": 5})", "\"prompt\""},
      {R"({"prompt": []})", "\"prompt\" is an empty list"},
      {R"({"prompt": ["a", 5]})", "mixes prompts with token ids"},
      {R"({"prompt": [5, "a"]})", "mixes token ids"},
      {R"({"prompt": [[1], []]})", "\"prompt\" is an empty list"},
      {R"({"prompt": [1, -2]})", "\"prompt\""},
      {R"({"prompt": [1, 1.5]})", "\"prompt\" must be an integer"},
      {R"({"prompt": "x", "max_tokens": -1})", "\"max_tokens\" is -1"},
      {R"({"prompt": "x", "max_tokens": "9"})", "\"max_tokens\" must be an integer"},
      {R"({"prompt": "x", "max_tokens": 1e300})", "\"max_tokens\""},
      {R"({"prompt": "x", "temperature": 3})", "\"temperature\" is 3"},
      {R"({"prompt": "x", "temperature": "hot"})", "\"temperature\" must be a number"},
      {R"({"prompt": "x", "top_p": 1.5})", "top_p"},
      {R"({"prompt": "x", "top_k": -2})", "\"top_k\""},
      {R"({"prompt": "x", "presence_penalty": 3})", "\"presence_penalty\""},
      {R"({"prompt": "x", "stop": ""})", "\"stop\" holds an empty string"},
      {R"({"prompt": "x", "stop": 7})", "\"stop\""},
      {R"({"prompt": "x", "stop": ["a", 1]})", "\"stop\" must be a string"},
      {R"({"prompt": "x", "logit_bias": {"abc": 1}})", "\"logit_bias\" key 'abc'"},
      {R"({"prompt": "x", "logit_bias": {"3": 101}})", "\"logit_bias\" value 101"},
      {R"({"prompt": "x", "seed": "s"})", "\"seed\""},
      {R"({"prompt": "x", "stream": 1})", "\"stream\" must be true or false"},
      {R"({"prompt": "x", "stream_options": {"include_usage": true}})", "needs \"stream\""},
      {R"({"prompt": "x", "n": 0})", "\"n\" is 0"},
      {R"({"prompt": ["a", "b"], "n": 40})", "80 choices; at most 64"},
      {R"({"prompt": "x", "best_of": 3})", "\"best_of\""},
      {R"({"prompt": "x", "echo": 1})", "\"echo\" must be true or false"},
      {R"({"prompt": "x", "logprobs": 21})", "\"logprobs\" is 21"},
      {R"({"prompt": "x", "logprobs": true})", "\"logprobs\" must be an integer"},
      {R"({"prompt": "x", "top_logprobs": 2})", "\"top_logprobs\" is for chat"},
      {R"({"messages": [{"role": "user", "content": "x"}], "logprobs": 2})",
       "\"logprobs\" must be true or false", ServeEndpoint::kChatCompletions},
      {R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2})",
       "needs \"logprobs\": true", ServeEndpoint::kChatCompletions},
      {R"({"messages": [{"role": "user", "content": "x"}], "logprobs": true,
           "top_logprobs": 30})",
       "\"top_logprobs\" is 30", ServeEndpoint::kChatCompletions},
      {R"({"prompt": "x", "suffix": "s"})", "\"suffix\""},
      {R"({"model": 3, "prompt": "x"})", "\"model\""},
      {"{}", "\"messages\" is missing", ServeEndpoint::kChatCompletions},
      {R"({"messages": []})", "\"messages\"", ServeEndpoint::kChatCompletions},
      {R"({"messages": [{"role": "robot", "content": "x"}]})", "'robot'",
       ServeEndpoint::kChatCompletions},
      {R"({"messages": [{"role": "user"}]})", "\"content\"", ServeEndpoint::kChatCompletions},
      {R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})", "only text",
       ServeEndpoint::kChatCompletions},
      {R"({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function"}]})",
       "\"tools[0].function\"", ServeEndpoint::kChatCompletions},
      {R"({"messages": [{"role": "user", "content": "x"}],
           "response_format": {"type": "json_schema", "json_schema": {}}})",
       "must carry {\"json_schema\": {\"schema\"", ServeEndpoint::kChatCompletions},
      {R"({"prompt": "x", "response_format": {"type": "json_schema", "json_schema":
           {"name": "s", "schema": {"type": "object", "properties": {
             "code": {"type": "string", "pattern": "^(a)\\1$"}}}}}})",
       "json_schema.schema is refused: #/properties/code: \"pattern\": backreferences are not "
       "supported at offset 4"},
      {R"({"prompt": "x", "response_format": {"type": "grammar"}})",
       "type 'grammar' is not supported"},
      {R"({"messages": [{"role": "user", "content": "x"}], "response_format": "json"})",
       "\"response_format\" must be an object", ServeEndpoint::kChatCompletions},
  };
  for (const Case& c : cases) expect_refused(c.body, c.expected, c.endpoint);
}

// JSON is written and compiled recursively: a body (or a call's arguments) nested deeper than a
// request may be is refused before it is parsed, not left to overflow the stack.
TEST(ServeApiTest, BodiesNestedTooDeepAreRefused) {
  const auto nested = [](size_t depth) {
    return std::string(depth, '[') + std::string(depth, ']');
  };
  const std::string schema_body = R"({"prompt": "x", "response_format": {"type": "json_schema",
      "json_schema": {"schema": {"type": "object", "default": )" +
                                  nested(200000) + "}}}}";
  expect_refused(schema_body, "the request body nests 200004 levels deep; at most 128");
  const std::string shallow = R"({"prompt": "x", "response_format": {"type": "json_schema",
      "json_schema": {"schema": {"type": "object", "default": )" +
                              nested(100) + "}}}}";
  EXPECT_TRUE(parse_serve_request(shallow, ServeEndpoint::kCompletions).ok());
  // A bracket inside a string is not nesting.
  EXPECT_TRUE(parse_serve_request(R"({"prompt": ")" + std::string(300, '[') + R"("})",
                                  ServeEndpoint::kCompletions)
                  .ok());
  const nlohmann::json call_body = {
      {"messages",
       {{{"role", "user"}, {"content", "x"}},
        {{"role", "assistant"},
         {"content", nullptr},
         {"tool_calls",
          {{{"id", "c"},
            {"type", "function"},
            {"function", {{"name", "f"}, {"arguments", "{\"a\": " + nested(100000) + "}"}}}}}}}}}};
  expect_refused(call_body.dump(), "\"messages[1].tool_calls[0].function.arguments\" nests deeper",
                 ServeEndpoint::kChatCompletions);
}

TEST(ServeApiTest, DefaultValuedUnsupportedOptionsAreAccepted) {
  const ServeRequest r = parse_ok(R"({"prompt": "x", "n": 1, "best_of": 1, "echo": false,
                                      "logprobs": false, "tools": [],
                                      "response_format": {"type": "text"}})");
  EXPECT_FALSE(r.config.json_object);
}

ServeResult sample_result() {
  ServeResult result;
  result.id = "cmpl-1";
  result.created_s = 1700000000;
  result.model = "stories";
  result.prompt_tokens = {{1, 403, 407}};
  ServeChoice choice;
  choice.text = " there was";
  choice.finish_reason = FinishReason::kNewTokenLimit;
  choice.tokens = {432, 383};
  result.choices = {choice};
  return result;
}

ServeChoice choice_of(std::string text, FinishReason reason, std::vector<int32_t> tokens) {
  ServeChoice choice;
  choice.text = std::move(text);
  choice.finish_reason = reason;
  choice.tokens = std::move(tokens);
  return choice;
}

TEST(ServeApiTest, ACompletionResponseHasTheChoiceAndUsage) {
  ServeRequest request = parse_ok(R"({"prompt": "x", "return_token_ids": true})");
  const nlohmann::ordered_json r = completion_response_json(request, sample_result());
  EXPECT_EQ(r["object"], "text_completion");
  EXPECT_EQ(r["id"], "cmpl-1");
  EXPECT_EQ(r["model"], "stories");
  ASSERT_EQ(r["choices"].size(), 1u);
  EXPECT_EQ(r["choices"][0]["text"], " there was");
  EXPECT_EQ(r["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(r["choices"][0]["token_ids"], Json({432, 383}));
  EXPECT_EQ(r["choices"][0]["prompt_token_ids"], Json({1, 403, 407})) << "per choice, as vLLM";
  EXPECT_EQ(r["usage"]["prompt_tokens"], 3);
  EXPECT_EQ(r["usage"]["completion_tokens"], 2);
  EXPECT_EQ(r["usage"]["total_tokens"], 5);

  request.return_token_ids = false;
  EXPECT_FALSE(
      completion_response_json(request, sample_result())["choices"][0].contains("token_ids"));
}

TEST(ServeApiTest, SeveralPromptsAndChoicesAreIndexedInOrderAndCountedOnce) {
  const ServeRequest request =
      parse_ok(R"({"prompt": [[1, 2], [3, 4, 5]], "n": 2, "return_token_ids": true})");
  ServeResult result = sample_result();
  result.prompt_tokens = {{1, 2}, {3, 4, 5}};
  result.choices = {choice_of("a", FinishReason::kStopToken, {10}),
                    choice_of("b", FinishReason::kNewTokenLimit, {11, 12}),
                    choice_of("c", FinishReason::kStopString, {13}),
                    choice_of("d", FinishReason::kNewTokenLimit, {14, 15, 16})};
  const nlohmann::ordered_json r = completion_response_json(request, result);
  ASSERT_EQ(r["choices"].size(), 4u);
  for (size_t k = 0; k < 4; ++k) {
    EXPECT_EQ(r["choices"][k]["index"], k);
    EXPECT_EQ(r["choices"][k]["text"], result.choices[k].text);
    EXPECT_EQ(r["choices"][k]["prompt_token_ids"], Json(result.prompt_tokens[k / 2]));
  }
  EXPECT_EQ(r["choices"][1]["finish_reason"], "length");
  EXPECT_EQ(r["usage"]["prompt_tokens"], 5) << "each prompt once, not once per choice";
  EXPECT_EQ(r["usage"]["completion_tokens"], 7);
  const nlohmann::ordered_json chunk =
      completion_chunk_json(request, result, 3, "d", {14}, true, {});
  EXPECT_EQ(chunk["choices"][0]["index"], 3);
  EXPECT_EQ(chunk["choices"][0]["prompt_token_ids"], Json({3, 4, 5}));
}

TEST(ServeApiTest, LogprobsAreAskedPerEndpointAndShownInEachEndpointsShape) {
  EXPECT_EQ(parse_ok(R"({"prompt": "x"})").config.sampling.logprobs, -1);
  EXPECT_EQ(parse_ok(R"({"prompt": "x", "logprobs": 0})").config.sampling.logprobs, 0);
  EXPECT_EQ(parse_ok(R"({"prompt": "x", "logprobs": 5})").config.sampling.logprobs, 5);
  const char* chat_body = R"({"messages": [{"role": "user", "content": "x"}], "logprobs": true,
                              "top_logprobs": 2})";
  const ServeRequest chat = parse_ok(chat_body, ServeEndpoint::kChatCompletions);
  EXPECT_EQ(chat.config.sampling.logprobs, 2);
  EXPECT_EQ(parse_ok(R"({"messages": [{"role": "user", "content": "x"}], "logprobs": true})",
                     ServeEndpoint::kChatCompletions)
                .config.sampling.logprobs,
            0);
  EXPECT_EQ(parse_ok(R"({"messages": [{"role": "user", "content": "x"}], "logprobs": false})",
                     ServeEndpoint::kChatCompletions)
                .config.sampling.logprobs,
            -1);

  ServeResult result = sample_result();  // " there" (432) then " was" (383)
  result.choices[0].logprobs = {{{" there", -0.25f}, {{" there", -0.25f}, {" here", -2.0f}}},
                                {{" was", -INFINITY}, {{" is", -0.1f}, {"\xe2", -3.0f}}}};
  const ServeRequest completion = parse_ok(R"({"prompt": "x", "logprobs": 2})");
  const nlohmann::ordered_json c = completion_response_json(completion, result)["choices"][0];
  EXPECT_EQ(c["logprobs"]["tokens"], Json({" there", " was"}));
  EXPECT_EQ(c["logprobs"]["token_logprobs"], Json({-0.25, -9999.0})) << "no infinity in JSON";
  EXPECT_EQ(c["logprobs"]["text_offset"], Json({0, 6}));
  ASSERT_EQ(c["logprobs"]["top_logprobs"].size(), 2u);
  EXPECT_EQ(c["logprobs"]["top_logprobs"][0][" here"], -2.0);
  EXPECT_EQ(c["logprobs"]["top_logprobs"][1][" is"], -0.1f);
  EXPECT_TRUE(
      completion_response_json(parse_ok(R"({"prompt": "x"})"), result)["choices"][0]["logprobs"]
          .is_null());

  const nlohmann::ordered_json m = completion_response_json(chat, result)["choices"][0];
  ASSERT_EQ(m["logprobs"]["content"].size(), 2u);
  const Json& second = m["logprobs"]["content"][1];
  EXPECT_EQ(second["token"], " was");
  EXPECT_EQ(second["logprob"], -9999.0);
  EXPECT_EQ(second["bytes"], Json({32, 119, 97, 115}));
  ASSERT_EQ(second["top_logprobs"].size(), 2u);
  EXPECT_EQ(second["top_logprobs"][1]["bytes"], Json({0xe2})) << "a partial character's bytes";
  // The whole response still serializes (the partial character replaced in "token").
  EXPECT_NE(sse_event(completion_response_json(chat, result)).find("\"bytes\":[226]"),
            std::string::npos);

  // A stream chunk shows the entries of its tokens: the choice's last ones, offset after the
  // text before them.
  const nlohmann::ordered_json chunk =
      completion_chunk_json(completion, result, 0, " was", {383}, false, {}, 1);
  EXPECT_EQ(chunk["choices"][0]["logprobs"]["tokens"], Json({" was"}));
  EXPECT_EQ(chunk["choices"][0]["logprobs"]["text_offset"], Json({6}));
  const nlohmann::ordered_json chat_chunk =
      completion_chunk_json(chat, result, 0, " there was", {432, 383}, false, {});
  EXPECT_EQ(chat_chunk["choices"][0]["logprobs"]["content"].size(), 2u);
}

TEST(ServeApiTest, EchoPutsThePromptBeforeTheTextAndItsTokensBeforeTheLogprobs) {
  const ServeRequest plain = parse_ok(R"({"prompt": "Once", "echo": true})");
  EXPECT_TRUE(plain.echo);
  EXPECT_EQ(plain.config.sampling.prompt_logprobs, -1) << "no logprobs asked, none computed";
  const ServeRequest request = parse_ok(R"({"prompt": "Once", "echo": true, "logprobs": 1})");
  EXPECT_EQ(request.config.sampling.prompt_logprobs, 1);
  EXPECT_EQ(parse_ok(R"({"prompt": "Once", "logprobs": 1})").config.sampling.prompt_logprobs, -1);

  ServeResult result = sample_result();  // prompt ids {1, 403, 407}
  result.prompt_texts = {"Once upon"};
  EXPECT_EQ(completion_response_json(plain, result)["choices"][0]["text"], "Once upon there was");
  // The prompt's entries (its first token without a log-probability), then the generated ones.
  result.choices[0].logprobs = {{{"<s>", std::nullopt}, {}},
                                {{"Once", -3.0f}, {{"Once", -3.0f}}},
                                {{" upon", -1.0f}, {{" upon", -1.0f}}},
                                {{" there", -0.5f}, {{" there", -0.5f}}},
                                {{" was", -0.25f}, {{" was", -0.25f}}}};
  const Json lp = completion_response_json(request, result)["choices"][0]["logprobs"];
  EXPECT_EQ(lp["tokens"], Json({"<s>", "Once", " upon", " there", " was"}));
  EXPECT_TRUE(lp["token_logprobs"][0].is_null());
  EXPECT_TRUE(lp["top_logprobs"][0].is_null());
  EXPECT_EQ(lp["token_logprobs"][1], -3.0);
  EXPECT_EQ(lp["text_offset"], Json({0, 3, 7, 12, 18}));
  // Streamed, the first chunk shows every entry not sent before.
  const nlohmann::ordered_json chunk =
      completion_chunk_json(request, result, 0, "Once upon there", {432}, true, {}, 0);
  EXPECT_EQ(chunk["choices"][0]["logprobs"]["tokens"].size(), 5u);
}

TEST(ServeApiTest, AChatResponseCarriesTheAssistantMessage) {
  const ServeRequest request = parse_ok(R"({"messages": [{"role": "user", "content": "x"}]})",
                                        ServeEndpoint::kChatCompletions);
  ServeResult result = sample_result();
  result.choices[0].finish_reason = FinishReason::kStopToken;
  const nlohmann::ordered_json r = completion_response_json(request, result);
  EXPECT_EQ(r["object"], "chat.completion");
  EXPECT_EQ(r["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(r["choices"][0]["message"]["content"], " there was");
  EXPECT_EQ(r["choices"][0]["finish_reason"], "stop");
}

TEST(ServeApiTest, StreamChunksFrameTheDeltasAndTheEnd) {
  const ServeRequest chat =
      parse_ok(R"({"messages": [{"role": "user", "content": "x"}], "stream": true})",
               ServeEndpoint::kChatCompletions);
  const ServeResult result = sample_result();
  const nlohmann::ordered_json first = completion_chunk_json(chat, result, 0, "", {}, true, {});
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  EXPECT_TRUE(first["choices"][0]["finish_reason"].is_null());
  const nlohmann::ordered_json middle =
      completion_chunk_json(chat, result, 0, " there", {432}, false, {});
  EXPECT_FALSE(middle["choices"][0]["delta"].contains("role"));
  EXPECT_EQ(middle["choices"][0]["delta"]["content"], " there");
  const nlohmann::ordered_json last =
      completion_chunk_json(chat, result, 0, "", {}, false, FinishReason::kStopString);
  EXPECT_EQ(last["choices"][0]["finish_reason"], "stop");
  EXPECT_TRUE(usage_chunk_json(chat, result)["choices"].empty());
  EXPECT_EQ(usage_chunk_json(chat, result)["usage"]["total_tokens"], 5);

  const std::string event = sse_event({{"a", 1}});
  EXPECT_EQ(event, "data: {\"a\":1}\n\n");
  EXPECT_EQ(sse_done(), "data: [DONE]\n\n");
  // A partial UTF-8 character (a stop can cut one) is replaced, not thrown.
  EXPECT_NE(sse_event({{"text", std::string("\xe2\x82")}}).find("data: "), std::string::npos);
}

TEST(ServeApiTest, StatusesMapToHttpCodesAndOpenAIErrorBodies) {
  EXPECT_EQ(http_status_for(invalid_argument("x")), 400);
  EXPECT_EQ(http_status_for(not_found("x")), 404);
  EXPECT_EQ(http_status_for(cancelled("x")), 503);
  EXPECT_EQ(http_status_for(internal_error("x")), 500);
  const nlohmann::ordered_json e = error_json(invalid_argument("\"n\" must be 1"));
  EXPECT_EQ(e["error"]["message"], "\"n\" must be 1");
  EXPECT_EQ(e["error"]["type"], "invalid_request_error");
  EXPECT_EQ(e["error"]["code"], "invalid_argument");
  EXPECT_EQ(openai_finish_reason(FinishReason::kCancelled), "cancelled");
}

TEST(ServeApiTest, RefusalsBeforeAnyHandlerSayWhatWasWrong) {
  const auto message = [](const HttpRefusal& r) {
    return r.body.at("error").at("message").get<std::string>();
  };
  const HttpRefusal wrong_method = http_refusal(404, "GET", "/v1/completions", false, "POST");
  EXPECT_EQ(wrong_method.status, 405);
  EXPECT_EQ(message(wrong_method), "/v1/completions takes POST, not GET");
  EXPECT_EQ(wrong_method.body.at("error").at("code"), "method_not_allowed");
  const HttpRefusal no_route = http_refusal(404, "GET", "/v2/x", false, "");
  EXPECT_EQ(no_route.status, 404);
  EXPECT_EQ(message(no_route), "no route for GET /v2/x");
  EXPECT_EQ(no_route.body.at("error").at("type"), "not_found_error");
  const HttpRefusal too_large = http_refusal(413, "POST", "/tokenize", true, "");
  EXPECT_EQ(too_large.status, 413);
  EXPECT_NE(message(too_large).find("larger than the server accepts"), std::string::npos);
  const HttpRefusal no_length = http_refusal(400, "POST", "/tokenize", false, "");
  EXPECT_EQ(no_length.status, 400);
  EXPECT_EQ(message(no_length),
            "/tokenize takes a JSON body, and the request has no Content-Length");
  const HttpRefusal unreadable = http_refusal(400, "POST", "/tokenize", true, "");
  EXPECT_EQ(message(unreadable), "HTTP status 400") << "a body it has, unread for another reason";
  EXPECT_EQ(unreadable.body.at("error").at("type"), "invalid_request_error");
}

}  // namespace
}  // namespace cellm::app
