// The HTTP server's response_format end to end (stories260K on the CPU, serve_http_test_util.h):
// {"type": "json_object"} gives a text that is one JSON object when the choice stops, and a
// prefix of one when max_tokens cuts it, whole or streamed; the prompt's own tokens are free;
// {"type": "json_schema"} gives a value the schema's validator (json_schema_oracle_test_util.h)
// accepts (an asserted format's strings among them); vLLM's guided_choice and guided_regex give a
// text they match whole.
#include <gtest/gtest.h>

#include <algorithm>
#include <regex>
#include <string>
#include <vector>

#include "batching/json_oracle_test_util.h"
#include "batching/json_schema_oracle_test_util.h"
#include "serve_http_test_util.h"

namespace cellm::app {
namespace {

using namespace http_test;

Json json_request(int max_tokens, double temperature, int seed) {
  return {{"prompt", "Once upon a time"},
          {"max_tokens", max_tokens},
          {"temperature", temperature},
          {"seed", seed},
          {"response_format", {{"type", "json_object"}}}};
}

TEST(ServeHttpFormatTest, AJsonObjectFormatGivesOneObjectOrAPrefixCutByMaxTokens) {
  Served served;
  for (int seed = 0; seed < 6; ++seed) {
    for (const int max_tokens : {12, 160}) {
      const Reply reply =
          post(served, "/v1/completions", json_request(max_tokens, seed == 0 ? 0.0 : 0.9, seed));
      ASSERT_EQ(reply.status, 200) << reply.body.dump();
      const Json& choice = reply.body.at("choices").at(0);
      const std::string text = choice.at("text");
      const std::string finish = choice.at("finish_reason");
      EXPECT_TRUE(testing::is_prefix_of_json_object(text)) << text;
      if (finish == "stop") {
        EXPECT_TRUE(Json::parse(text).is_object()) << text;
      } else {
        EXPECT_EQ(finish, "length") << text;
        EXPECT_EQ(reply.body.at("usage").at("completion_tokens"), max_tokens);
      }
    }
  }
}

// The model writes stories, not JSON: a bias toward '"', ':' and '}' (each a token of its own)
// makes it close an object within a few tokens, and the choice stops there.
TEST(ServeHttpFormatTest, AChoiceStopsOnceItsObjectIsWhole) {
  Served served;
  Json bias = Json::object();
  for (int32_t id = 0; id < served.engine().limits.vocab_size; ++id) {
    const std::string piece = served.codec().token_piece(id);
    if (piece == "\"" || piece == ":" || piece == "}") bias[std::to_string(id)] = 100;
  }
  ASSERT_GE(bias.size(), 3u) << bias.dump();  // a piece and its byte token may both exist
  for (int seed = 0; seed < 3; ++seed) {
    Json request = json_request(64, seed == 0 ? 0.0 : 1.0, seed);
    request["logit_bias"] = bias;
    const Reply reply = post(served, "/v1/completions", request);
    ASSERT_EQ(reply.status, 200) << reply.body.dump();
    const Json& choice = reply.body.at("choices").at(0);
    const std::string text = choice.at("text");
    EXPECT_EQ(choice.at("finish_reason"), "stop") << text;
    EXPECT_TRUE(Json::parse(text).is_object()) << text;
    EXPECT_LT(reply.body.at("usage").at("completion_tokens").get<int>(), 64);
  }
}

// Every value this schema accepts is short (an enum, a bounded string held to a pattern, no other
// keys), so even a model that writes stories ends it well within max_tokens.
TEST(ServeHttpFormatTest, AJsonSchemaFormatGivesAValueTheSchemaAccepts) {
  Served served;
  const Json schema = Json::parse(R"({"type": "object", "properties": {
      "mood": {"enum": ["happy", "sad", "sleepy"]},
      "name": {"type": "string", "pattern": "^[A-Z][a-z]+$", "maxLength": 12},
      "friends": {"type": "array", "items": {"type": "boolean"}, "maxItems": 2}},
    "required": ["mood", "name"], "additionalProperties": false})");
  for (int seed = 0; seed < 4; ++seed) {
    Json request = json_request(400, seed == 0 ? 0.0 : 1.0, seed);
    request["response_format"] = {{"type", "json_schema"},
                                  {"json_schema", {{"name", "character"}, {"schema", schema}}}};
    const Reply reply = post(served, "/v1/completions", request);
    ASSERT_EQ(reply.status, 200) << reply.body.dump();
    const Json& choice = reply.body.at("choices").at(0);
    const std::string text = choice.at("text");
    EXPECT_EQ(choice.at("finish_reason"), "stop") << text;
    const Json value = Json::parse(text);
    EXPECT_TRUE(testing::oracle_valid(schema, schema, value)) << text;
  }
  const Reply refused =
      post(served, "/v1/completions",
           {{"prompt", "x"},
            {"response_format",
             {{"type", "json_schema"},
              {"json_schema", {{"schema", {{"type", "string"}, {"pattern", "a(?=b)"}}}}}}}});
  EXPECT_EQ(refused.status, 400);
  EXPECT_NE(refused.body.dump().find("lookaround"), std::string::npos) << refused.body.dump();
}

// A string held to an asserted format is one of that format's strings by an independent check
// (string_format_oracle_test_util.h); the strings are short, so every choice stops.
TEST(ServeHttpFormatTest, AnAssertedFormatGivesAStringOfThatFormat) {
  Served served;
  for (const std::string format : {"date", "date-time", "uuid", "ipv4", "ipv6", "email", "uri"}) {
    for (int seed = 0; seed < 2; ++seed) {
      Json request = json_request(120, seed == 0 ? 0.0 : 1.0, seed);
      request["response_format"] = {
          {"type", "json_schema"},
          {"json_schema",
           {{"schema", {{"type", "string"}, {"format", format}, {"maxLength", 40}}}}}};
      const Reply reply = post(served, "/v1/completions", request);
      ASSERT_EQ(reply.status, 200) << reply.body.dump();
      const Json& choice = reply.body.at("choices").at(0);
      const std::string text = choice.at("text");
      ASSERT_EQ(choice.at("finish_reason"), "stop") << format << ": " << text;
      const Json value = Json::parse(text);
      ASSERT_TRUE(value.is_string()) << text;
      EXPECT_TRUE(testing::oracle_matches_format(format, value.get<std::string>()))
          << format << ": " << text;
    }
  }
}

// A union whose branches are objects alike (pydantic's Union of models, and a discriminated one
// as oneOf) gives a value the validator accepts.
TEST(ServeHttpFormatTest, AUnionOfObjectBranchesGivesAValueOneBranchAccepts) {
  Served served;
  const Json branches = Json::parse(R"([
      {"type": "object", "properties": {"kind": {"const": "a"}, "n": {"type": "integer",
        "minimum": 0, "maximum": 9}}, "required": ["kind", "n"], "additionalProperties": false},
      {"type": "object", "properties": {"kind": {"const": "b"}, "ok": {"type": "boolean"}},
        "required": ["kind", "ok"], "additionalProperties": false}])");
  for (const char* combinator : {"anyOf", "oneOf"}) {
    const Json schema = {{combinator, branches}};
    for (int seed = 0; seed < 3; ++seed) {
      Json request = json_request(200, seed == 0 ? 0.0 : 1.0, seed);
      request["response_format"] = {{"type", "json_schema"}, {"json_schema", {{"schema", schema}}}};
      const Reply reply = post(served, "/v1/completions", request);
      ASSERT_EQ(reply.status, 200) << reply.body.dump();
      const Json& choice = reply.body.at("choices").at(0);
      const std::string text = choice.at("text");
      ASSERT_EQ(choice.at("finish_reason"), "stop") << text;
      EXPECT_TRUE(testing::oracle_valid(schema, schema, Json::parse(text))) << text;
    }
  }
}

// vLLM's choice and regex, as structured_outputs fields (0.12 on) and as guided_choice and
// guided_regex: the whole text is one of the choices, or matches the regex (by the standard
// library's ECMAScript regex), when the choice stops.
TEST(ServeHttpFormatTest, GuidedChoiceAndRegexGiveATextTheyMatchWhole) {
  Served served;
  const std::vector<std::string> choices = {"happy", "sad", "a very sleepy cat"};
  const std::string regex = "[A-Z][a-z]{1,6}( [a-z]{1,6}){0,2}\\.";
  for (int seed = 0; seed < 4; ++seed) {
    Json request = {{"prompt", "Once upon a time"},
                    {"max_tokens", 40},
                    {"temperature", seed == 0 ? 0.0 : 1.0},
                    {"seed", seed},
                    {"guided_choice", choices}};
    if (seed % 2 == 1) {
      request.erase("guided_choice");
      request["structured_outputs"] = {{"choice", choices}};
    }
    Reply reply = post(served, "/v1/completions", request);
    ASSERT_EQ(reply.status, 200) << reply.body.dump();
    const Json& picked = reply.body.at("choices").at(0);
    EXPECT_EQ(picked.at("finish_reason"), "stop") << picked.dump();
    EXPECT_NE(std::find(choices.begin(), choices.end(), picked.at("text")), choices.end())
        << picked.dump();

    request.erase("guided_choice");
    request.erase("structured_outputs");
    if (seed % 2 == 1) {
      request["structured_outputs"] = {{"regex", regex}};
    } else {
      request["guided_regex"] = regex;
    }
    reply = post(served, "/v1/completions", request);
    ASSERT_EQ(reply.status, 200) << reply.body.dump();
    const Json& matched = reply.body.at("choices").at(0);
    EXPECT_EQ(matched.at("finish_reason"), "stop") << matched.dump();
    EXPECT_TRUE(std::regex_match(testing::utf8_to_wide(matched.at("text")),
                                 std::wregex(testing::utf8_to_wide(regex))))
        << matched.dump();
  }
}

TEST(ServeHttpFormatTest, AStreamedJsonObjectSendsTheSameTextAsAWholeOne) {
  Served served;
  const Json request = json_request(48, 0.8, 3);
  const Reply whole = post(served, "/v1/completions", request);
  ASSERT_EQ(whole.status, 200) << whole.body.dump();
  Json streamed_request = request;
  streamed_request["stream"] = true;
  httplib::Client client = served.client();
  httplib::Result result =
      client.Post("/v1/completions", streamed_request.dump(), "application/json");
  ASSERT_TRUE(result);
  ASSERT_EQ(result->status, 200);
  std::string text;
  std::string finish;
  for (const std::string& payload : sse_payloads(result->body)) {
    if (payload == "[DONE]") continue;
    const Json event = Json::parse(payload);
    const Json& choice = event.at("choices").at(0);
    text += choice.at("text").get<std::string>();
    if (!choice.at("finish_reason").is_null()) finish = choice.at("finish_reason");
  }
  EXPECT_EQ(text, whole.body.at("choices").at(0).at("text"));
  EXPECT_EQ(finish, whole.body.at("choices").at(0).at("finish_reason"));
  EXPECT_TRUE(testing::is_prefix_of_json_object(text)) << text;
}

}  // namespace
}  // namespace cellm::app
