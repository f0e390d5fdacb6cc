// parse_serve_request under ≈ 12,000 fixed-seed mutants of valid request bodies (byte flips,
// cuts, duplicated ranges, field names and extreme values spliced in): every one keeps the
// promises of serve_api_checks.h. CI runs it under ASan+UBSan; fuzz/serve_request_fuzz.cpp
// explores further with the same checks.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "serve_api_checks.h"

namespace cellm::app {
namespace {

struct Seed {
  ServeEndpoint endpoint;
  std::string body;
};

const std::vector<Seed>& seeds() {
  static const std::vector<Seed> all = {
      {ServeEndpoint::kCompletions,
       R"({"model": "m", "prompt": "Once upon a time", "max_tokens": 16, "temperature": 0.7,
           "top_p": 0.9, "top_k": 40, "stop": ["\n", "END"], "seed": 3})"},
      {ServeEndpoint::kCompletions,
       R"({"prompt": [1, 403, 407], "stream": true, "stream_options": {"include_usage": true},
           "logit_bias": {"13": -100, "7": 2}, "return_token_ids": true, "ignore_eos": true})"},
      {ServeEndpoint::kChatCompletions,
       R"({"messages": [{"role": "system", "content": "Be brief."},
           {"role": "user", "content": [{"type": "text", "text": "Hi"}]},
           {"role": "assistant", "content": "Hello"}], "max_completion_tokens": 8,
           "min_p": 0.1, "presence_penalty": 0.5, "frequency_penalty": -1, "n": 1})"},
      {ServeEndpoint::kChatCompletions,
       R"({"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": null,
           "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f",
           "arguments": "{\"a\": [1.5, \"<tool_call>\"]}"}}]},
           {"role": "tool", "tool_call_id": "c", "content": "r"}],
           "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type":
           "object", "properties": {"a": {"type": "array"}}}}}, {"type": "function", "function":
           {"name": "g"}}], "tool_choice": "required", "parallel_tool_calls": false,
           "x": "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>"})"},
      {ServeEndpoint::kChatCompletions,
       R"({"messages": [{"role": "user", "content": "Capital?"}, {"role": "assistant",
           "content": "The capital", "reasoning_content": "Easy."}], "add_generation_prompt":
           false, "continue_final_message": true, "chat_template_kwargs": {"enable_thinking":
           false}})"},
  };
  return all;
}

const std::vector<std::string>& splices() {
  static const std::vector<std::string> all = {"\"prompt\"",
                                               "\"messages\"",
                                               "\"role\"",
                                               "\"content\"",
                                               "\"max_tokens\"",
                                               "\"stop\"",
                                               "\"stream\"",
                                               "\"logit_bias\"",
                                               "\"temperature\"",
                                               "\"top_k\"",
                                               "\"seed\"",
                                               "\"tools\"",
                                               "\"tool_choice\"",
                                               "\"tool_calls\"",
                                               "\"continue_final_message\"",
                                               "\"chat_template_kwargs\"",
                                               "\"reasoning_content\"",
                                               "\"auto\"",
                                               "{\"name\": \"f\", \"parameters\": {}}",
                                               "\"n\"",
                                               "null",
                                               "true",
                                               "false",
                                               "[]",
                                               "{}",
                                               "-1",
                                               "0",
                                               "1e308",
                                               "-1e308",
                                               "2147483648",
                                               "18446744073709551616",
                                               "-9223372036854775809",
                                               "1.5",
                                               "\"\"",
                                               "\"\\u0000\"",
                                               "\"\\ud800\"",
                                               "\xff",
                                               "\xc3",
                                               ",",
                                               ":",
                                               "[",
                                               "]",
                                               "{",
                                               "}",
                                               "\"",
                                               "\\"};
  return all;
}

std::string mutate(std::string body, std::mt19937& rng) {
  auto pick = [&rng](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); };
  const size_t num_edits = 1 + pick(4);
  for (size_t e = 0; e < num_edits && !body.empty(); ++e) {
    const size_t at = pick(body.size());
    switch (pick(5)) {
      case 0:  // flip a byte
        body[at] = static_cast<char>(body[at] ^ (1 << pick(8)));
        break;
      case 1:  // cut a range
        body.erase(at, 1 + pick(16));
        break;
      case 2:  // duplicate a range
        body.insert(at, body.substr(at, 1 + pick(32)));
        break;
      case 3:  // splice a field name or an extreme value in
        body.insert(at, splices()[pick(splices().size())]);
        break;
      default:  // replace a token-sized range with a splice
        body.replace(at, 1 + pick(6), splices()[pick(splices().size())]);
        break;
    }
  }
  return body;
}

TEST(ServeApiMutationTest, EveryMutantKeepsTheParsersPromises) {
  std::mt19937 rng(20261203);
  int accepted = 0, refused = 0;
  for (const Seed& seed : seeds()) {
    ASSERT_EQ(serve_testing::check_serve_parse(seed.body, seed.endpoint), "") << seed.body;
    ASSERT_TRUE(parse_serve_request(seed.body, seed.endpoint).ok()) << seed.body;
    for (int i = 0; i < 4000; ++i) {
      const std::string body = mutate(seed.body, rng);
      const std::string broken = serve_testing::check_serve_parse(body, seed.endpoint);
      ASSERT_EQ(broken, "") << "mutant: " << body;
      (parse_serve_request(body, seed.endpoint).ok() ? accepted : refused) += 1;
    }
  }
  // Both outcomes are exercised (a parser refusing everything would pass the promises).
  EXPECT_GT(accepted, 500);
  EXPECT_GT(refused, 500);
}

}  // namespace
}  // namespace cellm::app
