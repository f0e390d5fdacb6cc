// serve_api's output constraints (serve_api_output.cpp): response_format's JSON object and
// schema, vLLM's guided_json / guided_regex / guided_choice, and the refusals naming their field.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "serve_api.h"
#include "serve_api_test_util.h"

namespace cellm::app {
namespace {

TEST(ServeApiTest, AJsonObjectResponseFormatConstrainsTheGeneration) {
  for (const ServeEndpoint endpoint :
       {ServeEndpoint::kCompletions, ServeEndpoint::kChatCompletions}) {
    const std::string input = endpoint == ServeEndpoint::kCompletions
                                  ? R"("prompt": "x")"
                                  : R"("messages": [{"role": "user", "content": "x"}])";
    const StatusOr<ServeRequest> r = parse_serve_request(
        "{" + input + R"(, "response_format": {"type": "json_object"}})", endpoint);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_TRUE(r->config.json_object);
  }
}

TEST(ServeApiTest, AJsonSchemaResponseFormatCarriesTheCompiledSchema) {
  const StatusOr<ServeRequest> r = parse_serve_request(
      R"({"messages": [{"role": "user", "content": "x"}],
          "response_format": {"type": "json_schema", "json_schema": {"name": "person",
            "strict": true, "schema": {"type": "object", "properties": {
              "name": {"type": "string"}}, "required": ["name"],
              "additionalProperties": false}}}})",
      ServeEndpoint::kChatCompletions);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_NE(r->config.json_schema, nullptr);
  EXPECT_FALSE(r->config.json_object);
  const JsonSchema::Node& root = r->config.json_schema->node(r->config.json_schema->root());
  ASSERT_EQ(root.properties.size(), 1u);
  EXPECT_EQ(root.properties[0].name, "name");
  EXPECT_EQ(root.additional, JsonSchema::kNoNode);
}

TEST(ServeApiTest, VllmGuidedFieldsBecomeTheConstraints) {
  const ServeRequest json = parse_ok(R"({"prompt": "x", "guided_json": {"type": "integer"},
                                         "guided_decoding_backend": "xgrammar"})");
  ASSERT_NE(json.config.json_schema, nullptr);
  EXPECT_EQ(json.config.json_schema->node(json.config.json_schema->root()).types, kJsonNumberBit);
  const ServeRequest text_schema =
      parse_ok(R"({"prompt": "x", "guided_json": "{\"type\": \"null\"}"})");
  ASSERT_NE(text_schema.config.json_schema, nullptr);

  const ServeRequest regex = parse_ok(R"j({"prompt": "x", "guided_regex": "[0-9]{2}-(a|b)"})j");
  ASSERT_NE(regex.config.text_pattern, nullptr);
  EXPECT_TRUE(regex.config.text_pattern->matches("12-a"));
  EXPECT_FALSE(regex.config.text_pattern->matches("x12-a"));  // whole, not anywhere
  EXPECT_FALSE(regex.config.text_pattern->matches("12-ab"));

  const ServeRequest choice =
      parse_ok(R"j({"prompt": "x", "guided_choice": ["yes", "no (maybe)", "a.b|c"]})j");
  ASSERT_NE(choice.config.text_pattern, nullptr);
  for (const char* text : {"yes", "no (maybe)", "a.b|c"}) {
    EXPECT_TRUE(choice.config.text_pattern->matches(text)) << text;
  }
  for (const char* text : {"ye", "no maybe", "axb|c", "c", "yesno"}) {
    EXPECT_FALSE(choice.config.text_pattern->matches(text)) << text;
  }
  const ServeRequest chat =
      parse_ok(R"({"messages": [{"role": "user", "content": "x"}], "guided_choice": ["A", "B"]})",
               ServeEndpoint::kChatCompletions);
  ASSERT_NE(chat.config.text_pattern, nullptr);
  EXPECT_TRUE(chat.config.text_pattern->matches("B"));
}

TEST(ServeApiTest, GuidedFieldsThatCannotBeHonouredAreRefusedByName) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"prompt": "x", "guided_grammar": "root ::= \"a\""})", "\"guided_grammar\""},
      {R"({"prompt": "x", "guided_json": {}, "guided_whitespace_pattern": " "})",
       "\"guided_whitespace_pattern\""},
      {R"({"prompt": "x", "guided_regex": "a", "guided_choice": ["a"]})", "exclude each other"},
      {R"({"prompt": "x", "guided_regex": "a", "response_format": {"type": "json_object"}})",
       "exclude each other"},
      {R"({"prompt": "x", "guided_regex": "(a)\\1"})",
       "\"guided_regex\" is refused: backreferences are not supported at offset 3"},
      {R"({"prompt": "x", "guided_regex": "a$b"})", "\"guided_regex\" matches no text"},
      {R"({"prompt": "x", "guided_regex": 5})", "\"guided_regex\" must be a string"},
      {R"({"prompt": "x", "guided_choice": []})", "non-empty array of strings"},
      {R"({"prompt": "x", "guided_choice": ["a", 1]})", "non-empty array of strings"},
      {R"({"prompt": "x", "guided_json": 3})", "must be a JSON schema"},
      {R"({"prompt": "x", "guided_json": {"type": "strin"}})",
       "\"guided_json\" is refused: #: unknown type"},
  };
  for (const auto& [body, expected] : cases) expect_refused(body, expected);
}

TEST(ServeApiTest, VllmStructuredOutputsBecomeTheConstraints) {
  const ServeRequest json = parse_ok(R"({"prompt": "x", "structured_outputs": {
      "json": {"type": "integer"}, "disable_fallback": true, "disable_any_whitespace": false}})");
  ASSERT_NE(json.config.json_schema, nullptr);
  EXPECT_EQ(json.config.json_schema->node(json.config.json_schema->root()).types, kJsonNumberBit);
  const ServeRequest regex =
      parse_ok(R"j({"prompt": "x", "structured_outputs": {"regex": "[0-9]{2}-(a|b)"}})j");
  ASSERT_NE(regex.config.text_pattern, nullptr);
  EXPECT_TRUE(regex.config.text_pattern->matches("12-a"));
  EXPECT_FALSE(regex.config.text_pattern->matches("12-ab"));
  const ServeRequest choice =
      parse_ok(R"({"prompt": "x", "structured_outputs": {"choice": ["yes", "no"]}})");
  ASSERT_NE(choice.config.text_pattern, nullptr);
  EXPECT_TRUE(choice.config.text_pattern->matches("no"));
  EXPECT_FALSE(choice.config.text_pattern->matches("yesno"));
  EXPECT_TRUE(parse_ok(R"({"prompt": "x", "structured_outputs": {"json_object": true}})")
                  .config.json_object);
  EXPECT_FALSE(parse_ok(R"({"prompt": "x", "structured_outputs": {}})").config.constrained());

  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"prompt": "x", "structured_outputs": {"grammar": "root ::= \"a\""}})",
       "\"structured_outputs.grammar\" is not supported"},
      {R"({"prompt": "x", "structured_outputs": {"structural_tag": "{}"}})",
       "\"structured_outputs.structural_tag\" is not supported"},
      {R"({"prompt": "x", "structured_outputs": {"json": {}, "disable_any_whitespace": true}})",
       "\"structured_outputs.disable_any_whitespace\" is not supported"},
      {R"({"prompt": "x", "structured_outputs": {"regex": "a", "choice": ["a"]}})",
       "structured_outputs.regex, structured_outputs.choice and a JSON response_format exclude"},
      {R"({"prompt": "x", "structured_outputs": {"regex": "a"}, "guided_regex": "a"})",
       "\"structured_outputs\" and \"guided_regex\" exclude each other"},
      {R"({"prompt": "x", "structured_outputs": {"json_object": true},
           "response_format": {"type": "json_object"}})",
       "\"structured_outputs.json_object\" and another output constraint"},
      {R"({"prompt": "x", "structured_outputs": {"regex": "(a)\\1"}})",
       "\"structured_outputs.regex\" is refused: backreferences"},
      {R"({"prompt": "x", "structured_outputs": {"choice": []}})",
       "\"structured_outputs.choice\" must be a non-empty array of strings"},
      {R"({"prompt": "x", "structured_outputs": ["json"]})",
       "\"structured_outputs\" must be an object"},
      {R"({"prompt": "x", "structured_outputs": {"jsn": {}}})",
       "\"structured_outputs.jsn\" is not supported"},
  };
  for (const auto& [body, expected] : cases) expect_refused(body, expected);
}

}  // namespace
}  // namespace cellm::app
