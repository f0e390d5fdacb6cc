// HttpServer end to end: stories260K on the CPU behind a server on a free local port, driven by
// real HTTP connections (cpp-httplib's client). Greedy completions equal the independent
// reference tokens whole, streamed and under concurrency; bad requests get clear errors and the
// server goes on; a client that goes away cancels its generation; stop() ends everything
// (log-probabilities: serve_http_logprobs_test.cpp; the shared parts: serve_http_test_util.h).
#include "serve_http.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "cellm_cli.h"
#include "cmd_engine.h"
#include "cmd_text.h"
#include "serve_http_test_util.h"
#include "test_models.h"

namespace cellm::app {
namespace {

using namespace http_test;
using namespace std::chrono_literals;

TEST(ServeHttpTest, GreedyCompletionsEqualTheReferenceTokens) {
  Served served;
  const Json cases = reference_cases();
  for (const Json& c : cases) {
    const Reply r = post(served, "/v1/completions", greedy_request(c, 128));
    ASSERT_EQ(r.status, 200) << r.body.dump();
    EXPECT_EQ(r.body.at("object"), "text_completion");
    EXPECT_EQ(r.body.at("model"), "stories");
    const Json& choice = r.body.at("choices").at(0);
    EXPECT_EQ(choice.at("prompt_token_ids"), c.at("prompt_tokens"));
    EXPECT_EQ(choice.at("token_ids"), c.at("generated_tokens")) << c.at("prompt");
    EXPECT_EQ(choice.at("text"), c.at("text"));
    EXPECT_EQ(choice.at("finish_reason"), c.at("stopped_at_eos") ? "stop" : "length");
    EXPECT_EQ(r.body.at("usage").at("completion_tokens"), c.at("generated_tokens").size());
  }
  // Token ids are taken as given (no BOS added): the reference's own ids give its tokens.
  Json by_ids = greedy_request(cases[1], 20);
  by_ids["prompt"] = cases[1].at("prompt_tokens");
  const Reply r = post(served, "/v1/completions", by_ids);
  ASSERT_EQ(r.status, 200) << r.body.dump();
  EXPECT_EQ(r.body.at("choices").at(0).at("token_ids").get<std::vector<int32_t>>(),
            head(cases[1].at("generated_tokens"), 20));
}

TEST(ServeHttpTest, ConcurrentRequestsEachGetTheirSoloTokensThroughTwoSlots) {
  Served served(/*max_concurrent=*/2);
  const Json cases = reference_cases();
  constexpr int kRequests = 6;
  std::vector<Reply> replies(kRequests);
  std::vector<std::thread> threads;
  for (int i = 0; i < kRequests; ++i) {
    threads.emplace_back([&, i] {
      replies[i] = post(served, "/v1/completions", greedy_request(cases[i % 3], 24 + 8 * i));
    });
  }
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < kRequests; ++i) {
    ASSERT_EQ(replies[i].status, 200) << i << ": " << replies[i].body.dump();
    EXPECT_EQ(replies[i].body.at("choices").at(0).at("token_ids").get<std::vector<int32_t>>(),
              head(cases[i % 3].at("generated_tokens"), 24 + 8 * i))
        << "request " << i;
  }
  const Reply metrics = get(served, "/metrics.json");
  ASSERT_EQ(metrics.status, 200);
  EXPECT_EQ(metrics.body.at("server").at("requests"), kRequests);
  EXPECT_EQ(metrics.body.at("server").at("running_generations"), 0);
  // The same counters in Prometheus' text format.
  httplib::Client client = served.client();
  httplib::Result text = client.Get("/metrics");
  ASSERT_TRUE(text);
  EXPECT_EQ(text->status, 200);
  EXPECT_NE(text->body.find("\ncellm_requests_total 6\n"), std::string::npos) << text->body;
  EXPECT_NE(text->body.find("# TYPE cellm_time_to_first_token_seconds summary"), std::string::npos);
  int64_t generated = 0;
  for (int i = 0; i < kRequests; ++i) generated += 24 + 8 * i;
  EXPECT_NE(text->body.find("\ncellm_generated_tokens_total " + std::to_string(generated) + "\n"),
            std::string::npos)
      << text->body;
}

TEST(ServeHttpTest, SeveralPromptsAndChoicesEachGetTheirTokensWholeAndStreamed) {
  Served served;
  const Json cases = reference_cases();
  Json prompts = Json::array();  // the first three: 5 tokens each
  for (size_t i = 0; i < 3; ++i) prompts.push_back(cases[i].at("prompt_tokens"));
  Json request = {{"prompt", prompts},
                  {"n", 2},
                  {"max_tokens", 16},
                  {"temperature", 0},
                  {"return_token_ids", true}};
  const Reply whole = post(served, "/v1/completions", request);
  ASSERT_EQ(whole.status, 200) << whole.body.dump();
  ASSERT_EQ(whole.body.at("choices").size(), 6u);
  for (size_t k = 0; k < 6; ++k) {
    const Json& choice = whole.body.at("choices").at(k);
    EXPECT_EQ(choice.at("index"), k);
    EXPECT_EQ(choice.at("prompt_token_ids"), cases[k / 2].at("prompt_tokens"));
    EXPECT_EQ(choice.at("token_ids").get<std::vector<int32_t>>(),
              head(cases[k / 2].at("generated_tokens"), 16))
        << "choice " << k;
  }
  EXPECT_EQ(whole.body.at("usage").at("completion_tokens"), 96);
  EXPECT_EQ(whole.body.at("usage").at("prompt_tokens"), 15) << "three 5-token prompts, once each";

  request["stream"] = true;
  httplib::Client client = served.client();
  httplib::Result streamed = client.Post("/v1/completions", request.dump(), "application/json");
  ASSERT_TRUE(streamed);
  std::vector<std::vector<int32_t>> tokens(6);
  std::vector<std::string> finish(6);
  const std::vector<std::string> payloads = sse_payloads(streamed->body);
  ASSERT_FALSE(payloads.empty());
  EXPECT_EQ(payloads.back(), "[DONE]");
  for (size_t i = 0; i + 1 < payloads.size(); ++i) {
    const Json event = Json::parse(payloads[i]);
    const Json& choice = event.at("choices").at(0);
    const size_t k = choice.at("index");
    ASSERT_LT(k, 6u);
    for (const int32_t id : choice.at("token_ids")) tokens[k].push_back(id);
    if (!choice.at("finish_reason").is_null()) finish[k] = choice.at("finish_reason");
  }
  for (size_t k = 0; k < 6; ++k) {
    EXPECT_EQ(tokens[k], head(cases[k / 2].at("generated_tokens"), 16)) << "choice " << k;
    EXPECT_EQ(finish[k], "length") << "choice " << k;
  }
}

TEST(ServeHttpTest, ChoiceKSamplesWithTheSeedPlusK) {
  Served served;
  Json request = {{"prompt", "Once upon a time"}, {"n", 3},    {"max_tokens", 24},
                  {"temperature", 1.0},           {"seed", 7}, {"return_token_ids", true}};
  const Reply three = post(served, "/v1/completions", request);
  ASSERT_EQ(three.status, 200) << three.body.dump();
  request["n"] = 1;
  request["seed"] = 9;
  const Reply third = post(served, "/v1/completions", request);
  ASSERT_EQ(third.status, 200) << third.body.dump();
  EXPECT_EQ(three.body.at("choices").at(2).at("token_ids"),
            third.body.at("choices").at(0).at("token_ids"));
}

TEST(ServeHttpTest, WithoutMaxTokensACompletionGenerates16AndAChatTheRestOfTheContext) {
  Served served(8, stories_with_chat_template());
  const Reply completion =
      post(served, "/v1/completions", {{"prompt", "Once upon a time"}, {"ignore_eos", true}});
  ASSERT_EQ(completion.status, 200) << completion.body.dump();
  EXPECT_EQ(completion.body.at("usage").at("completion_tokens"), 16);
  const Reply chat =
      post(served, "/v1/chat/completions",
           {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"ignore_eos", true}});
  ASSERT_EQ(chat.status, 200) << chat.body.dump();
  EXPECT_EQ(chat.body.at("usage").at("total_tokens"), served.engine().limits.max_session_tokens);
  EXPECT_EQ(chat.body.at("choices").at(0).at("finish_reason"), "length");
}

TEST(ServeHttpTest, TokenizeAndDetokenizeAgreeWithTheReference) {
  Served served;
  for (const Json& c : reference_cases()) {
    if (c.at("prompt").get<std::string>().empty()) continue;
    const Reply tokens = post(served, "/tokenize", {{"prompt", c.at("prompt")}});
    ASSERT_EQ(tokens.status, 200) << tokens.body.dump();
    EXPECT_EQ(tokens.body.at("tokens"), c.at("prompt_tokens")) << c.at("prompt");
    EXPECT_EQ(tokens.body.at("count"), c.at("prompt_tokens").size());
    const Reply text = post(served, "/detokenize", {{"tokens", c.at("generated_tokens")}});
    ASSERT_EQ(text.status, 200) << text.body.dump();
    EXPECT_EQ(text.body.at("prompt"), c.at("text")) << c.at("prompt");
  }
  const Json c = reference_cases()[0];
  const Reply bare =
      post(served, "/tokenize", {{"prompt", c.at("prompt")}, {"add_special_tokens", false}});
  ASSERT_EQ(bare.status, 200);
  std::vector<int32_t> without_bos = c.at("prompt_tokens").get<std::vector<int32_t>>();
  without_bos.erase(without_bos.begin());
  EXPECT_EQ(bare.body.at("tokens").get<std::vector<int32_t>>(), without_bos);
  EXPECT_EQ(post(served, "/detokenize", {{"tokens", {1, 512}}}).status, 400);
  EXPECT_EQ(post(served, "/detokenize", {{"tokens", "x"}}).status, 400);
  EXPECT_EQ(post(served, "/tokenize", {{"prompt", 5}}).status, 400);
}

TEST(ServeHttpTest, AStreamedCompletionSendsTheSameTextInEvents) {
  Served served;
  const Json c = reference_cases()[0];
  Json request = greedy_request(c, 64);
  request["stream"] = true;
  request["stream_options"] = {{"include_usage", true}};
  httplib::Client client = served.client();
  httplib::Result result = client.Post("/v1/completions", request.dump(), "application/json");
  ASSERT_TRUE(result);
  ASSERT_EQ(result->status, 200);
  EXPECT_NE(result->get_header_value("Content-Type").find("text/event-stream"), std::string::npos);
  const std::vector<std::string> payloads = sse_payloads(result->body);
  ASSERT_GE(payloads.size(), 3u);
  EXPECT_EQ(payloads.back(), "[DONE]");
  std::string text;
  std::vector<int32_t> tokens;
  std::string finish_reason;
  for (size_t i = 0; i + 1 < payloads.size(); ++i) {
    const Json event = Json::parse(payloads[i]);
    if (event.at("choices").empty()) {  // the usage chunk
      EXPECT_EQ(event.at("usage").at("completion_tokens"), 64);
      continue;
    }
    const Json& choice = event.at("choices").at(0);
    text += choice.at("text").get<std::string>();
    for (const int32_t id : choice.at("token_ids")) tokens.push_back(id);
    if (!choice.at("finish_reason").is_null()) finish_reason = choice.at("finish_reason");
  }
  EXPECT_EQ(tokens, head(c.at("generated_tokens"), 64));
  EXPECT_EQ(finish_reason, "length");
  const Reply whole = post(served, "/v1/completions", greedy_request(c, 64));
  EXPECT_EQ(text, whole.body.at("choices").at(0).at("text")) << "streamed text = whole text";
}

TEST(ServeHttpTest, BadRequestsGetClearErrorsAndTheServerGoesOn) {
  Served served;
  const int32_t context = served.engine().limits.max_session_tokens;
  struct Case {
    std::string path;
    std::string body;
    int status;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"/v1/completions", "{not json", 400, "not valid JSON: parse error at line 1"},
      {"/v1/completions", "", 400, "the request body is empty"},
      {"/v1/completions", R"({"prompt": "x", "best_of": 2})", 400, "\"best_of\""},
      {"/v1/completions", R"({"prompt": "x", "n": 9})", 400, "at most 8 at once"},
      {"/v1/completions", R"({"prompt": [1, 512]})", 400, "outside the vocabulary"},
      {"/v1/completions", Json{{"prompt", std::vector<int32_t>(context, 5)}}.dump(), 400,
       "a session holds at most"},
      {"/v1/completions", Json{{"prompt", "Once"}, {"max_tokens", context}}.dump(), 400,
       "max_tokens is"},
      {"/v1/completions", R"({"model": "gpt-4", "prompt": "x"})", 404, "'gpt-4' is not served"},
      {"/v1/chat/completions", R"({"messages": [{"role": "user", "content": "hi"}]})", 400,
       "chat template"},
      {"/v1/nothing", "{}", 404, "no route"},
  };
  for (const Case& c : cases) {
    httplib::Client client = served.client();
    httplib::Result result = client.Post(c.path, c.body, "application/json");
    ASSERT_TRUE(result) << c.body;
    EXPECT_EQ(result->status, c.status) << c.body << " -> " << result->body;
    const Json body = Json::parse(result->body, nullptr, false);
    ASSERT_TRUE(body.is_object()) << result->body;
    const std::string message = body.at("error").at("message");
    EXPECT_NE(message.find(c.expected), std::string::npos) << c.body << " -> " << message;
  }
  // No body at all (no Content-Length): refused before any route, with a message that says so.
  const std::string bare =
      raw_exchange(served, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(bare.rfind("HTTP/1.1 400", 0), 0u) << bare;
  EXPECT_NE(bare.find("takes a JSON body, and the request has no Content-Length"),
            std::string::npos)
      << bare;
  const Reply ok = post(served, "/v1/completions", greedy_request(reference_cases()[2], 8));
  ASSERT_EQ(ok.status, 200) << ok.body.dump();
  EXPECT_EQ(ok.body.at("choices").at(0).at("token_ids").get<std::vector<int32_t>>(),
            head(reference_cases()[2].at("generated_tokens"), 8));
  const Reply health = get(served, "/health");
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(health.body.at("status"), "ok");
  const Reply models = get(served, "/v1/models");
  ASSERT_EQ(models.status, 200);
  EXPECT_EQ(models.body.at("data").at(0).at("id"), "stories");
  EXPECT_EQ(models.body.at("data").at(0).at("max_model_len"), context);
}

TEST(ServeHttpTest, ARouteAskedWithAnotherMethodIsMethodNotAllowed) {
  Served served;
  httplib::Client client = served.client();
  const httplib::Result wrong_get = client.Get("/v1/chat/completions");
  ASSERT_TRUE(wrong_get);
  EXPECT_EQ(wrong_get->status, 405) << wrong_get->body;
  EXPECT_EQ(wrong_get->get_header_value("Allow"), "POST");
  const Json body = Json::parse(wrong_get->body, nullptr, false);
  ASSERT_TRUE(body.is_object()) << wrong_get->body;
  EXPECT_EQ(body.at("error").at("code"), "method_not_allowed");
  EXPECT_NE(body.at("error").at("message").get<std::string>().find("takes POST, not GET"),
            std::string::npos);

  const httplib::Result wrong_post = client.Post("/health", "{}", "application/json");
  ASSERT_TRUE(wrong_post);
  EXPECT_EQ(wrong_post->status, 405) << wrong_post->body;
  EXPECT_EQ(wrong_post->get_header_value("Allow"), "GET");
  const httplib::Result unknown = client.Get("/v1/embeddings");
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 404) << "a path with no route at all stays not found";
  EXPECT_EQ(get(served, "/health").status, 200) << "the right method still works";
}

TEST(ServeHttpTest, AClientThatGoesAwayCancelsItsGeneration) {
  Served served;
  Json body = {{"prompt", "Once upon a time"},
               {"stream", true},
               {"ignore_eos", true},
               {"temperature", 0},
               {"max_tokens", 2000}};
  int events = 0;
  post_receiving(served, body, [&](std::string_view) {
    return ++events < 3;  // hang up after a few events
  });
  EXPECT_GE(events, 3);

  expect_one_cancelled_early(served);
  const Reply after = post(served, "/v1/completions", greedy_request(reference_cases()[0], 4));
  EXPECT_EQ(after.status, 200) << "the server goes on";
}

TEST(ServeHttpTest, ALongWholeResponseIsKeptAliveWithSpacesAndStillParses) {
  Served served(8, testing::test_model_path("stories260K.gguf"), "", /*keepalive_ms=*/1);
  const Json c = reference_cases()[0];
  httplib::Client client = served.client();
  httplib::Result result =
      client.Post("/v1/completions", greedy_request(c, 128).dump(), "application/json");
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 200);
  ASSERT_FALSE(result->body.empty());
  EXPECT_EQ(result->body[0], ' ') << "128 tokens take longer than 1 ms: the keep-alive path";
  const Json body = Json::parse(result->body);  // leading whitespace is valid JSON
  EXPECT_EQ(body.at("choices").at(0).at("token_ids"), c.at("generated_tokens"));
}

TEST(ServeHttpTest, AClientThatGoesAwayFromAWholeResponseCancelsItsGeneration) {
  Served served(8, testing::test_model_path("stories260K.gguf"), "", /*keepalive_ms=*/20);
  const Json body = {{"prompt", "Once upon a time"},
                     {"ignore_eos", true},
                     {"temperature", 0},
                     {"max_tokens", 2000}};
  std::string received;
  post_receiving(served, body, [&](std::string_view bytes) {
    received.append(bytes);
    return false;  // hang up at the first bytes
  });
  EXPECT_EQ(received.substr(0, 1), " ") << "the keep-alive path";
  expect_one_cancelled_early(served);
}

TEST(ServeHttpTest, StopEndsAStreamingRequestAndServeReturns) {
  auto served = std::make_unique<Served>();
  std::atomic<bool> streaming{false};
  std::thread client_thread([&] {
    const Json body = {
        {"prompt", "Once"}, {"stream", true}, {"ignore_eos", true}, {"max_tokens", 2000}};
    post_receiving(*served, body, [&](std::string_view bytes) {
      if (bytes.find("data: ") != std::string_view::npos) streaming = true;
      return true;
    });
  });
  for (int i = 0; i < 500 && !streaming; ++i) std::this_thread::sleep_for(20ms);
  EXPECT_TRUE(streaming) << "it was streaming";
  served.reset();  // stop(), serve() returns, the runner shuts down
  client_thread.join();
}

TEST(ServeHttpTest, AnApiKeyGuardsEveryRouteButHealth) {
  Served served(8, testing::test_model_path("stories260K.gguf"), "s3cret");
  httplib::Client client = served.client();
  const std::string body = greedy_request(reference_cases()[0], 4).dump();
  httplib::Result none = client.Post("/v1/completions", body, "application/json");
  ASSERT_TRUE(none);
  EXPECT_EQ(none->status, 401);
  EXPECT_NE(none->body.find("API key"), std::string::npos);
  client.set_bearer_token_auth("s3cre");
  EXPECT_EQ(client.Get("/v1/models")->status, 401) << "a prefix of the key is not the key";
  client.set_bearer_token_auth("s3cret");
  httplib::Result ok = client.Post("/v1/completions", body, "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  EXPECT_EQ(client.Get("/metrics")->status, 200);
  httplib::Client anonymous = served.client();
  EXPECT_EQ(anonymous.Get("/health")->status, 200);
  EXPECT_EQ(anonymous.Get("/metrics")->status, 401);
}

TEST(ServeHttpTest, ARequestSharingAnEarlierPromptsStartReusesItsCells) {
  Served served;
  const Json c = reference_cases()[0];
  // 40 prompt tokens: the reference's first 35 generated tokens after its prompt.
  std::vector<int32_t> prompt = c.at("prompt_tokens").get<std::vector<int32_t>>();
  const std::vector<int32_t> generated = c.at("generated_tokens").get<std::vector<int32_t>>();
  prompt.insert(prompt.end(), generated.begin(), generated.begin() + 35);
  Json request = greedy_request(c, 0);
  request["prompt"] = prompt;
  request["max_tokens"] = 10;
  for (int round = 0; round < 2; ++round) {
    const Reply r = post(served, "/v1/completions", request);
    ASSERT_EQ(r.status, 200) << r.body.dump();
    EXPECT_EQ(r.body.at("choices").at(0).at("token_ids").get<std::vector<int32_t>>(),
              std::vector<int32_t>(generated.begin() + 35, generated.begin() + 45))
        << "round " << round;
  }
  const Json prefix = get(served, "/metrics.json").body.at("engine").at("prefix_reuse");
  EXPECT_EQ(prefix.at("hits"), 1) << prefix.dump();
  EXPECT_GE(prefix.at("reused_tokens"), 16);
}

TEST(ServeHttpTest, AChatCompletionIsTheConversationsTokensGreedy) {
  Served served(8, stories_with_chat_template());
  const std::vector<ChatTurn> turns = {{"system", "You are terse."}, {"user", "Hello there"}};
  StatusOr<std::vector<int32_t>> ids = served.codec().encode_conversation(turns);
  ASSERT_TRUE(ids.ok()) << ids.status().to_string();
  const Json chat = {{"messages",
                      {{{"role", "system"}, {"content", "You are terse."}},
                       {{"role", "user"}, {"content", "Hello there"}}}},
                     {"max_tokens", 12},
                     {"temperature", 0},
                     {"ignore_eos", true},
                     {"return_token_ids", true}};
  const Reply r = post(served, "/v1/chat/completions", chat);
  ASSERT_EQ(r.status, 200) << r.body.dump();
  EXPECT_EQ(r.body.at("object"), "chat.completion");
  EXPECT_EQ(r.body.at("choices").at(0).at("message").at("role"), "assistant");
  EXPECT_EQ(r.body.at("prompt_token_ids").get<std::vector<int32_t>>(), *ids);
  // The same ids as a plain completion give the same tokens.
  const Json plain = {{"prompt", *ids},
                      {"max_tokens", 12},
                      {"temperature", 0},
                      {"ignore_eos", true},
                      {"return_token_ids", true}};
  const Reply p = post(served, "/v1/completions", plain);
  ASSERT_EQ(p.status, 200) << p.body.dump();
  EXPECT_EQ(r.body.at("choices").at(0).at("token_ids"), p.body.at("choices").at(0).at("token_ids"));
  EXPECT_EQ(r.body.at("choices").at(0).at("token_ids").size(), 12u);
}

// The command itself: `cellm serve --port 0` says where it listens, serves, and stops on SIGTERM
// with exit status 0 and its summary.
TEST(ServeHttpTest, TheServeCommandListensServesAndStopsOnSigterm) {
  const std::string binary = testing::cellm_binary();
  const std::string model = testing::test_model_path("stories260K.gguf");
  int out[2];
  ASSERT_EQ(pipe(out), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    dup2(out[1], STDOUT_FILENO);
    close(out[0]);
    close(out[1]);
    setenv("CUDA_VISIBLE_DEVICES", "", 1);
    execl(binary.c_str(), "cellm", "serve", "--model", model.c_str(), "--port", "0", "--backend",
          "cpu", "--threads", "1", static_cast<char*>(nullptr));
    _exit(127);
  }
  close(out[1]);
  // Reads what the server prints until `want` shows up or 60 s pass.
  std::string printed;
  auto read_until = [&](const std::string& want) {
    for (int i = 0; i < 600 && printed.find(want) == std::string::npos; ++i) {
      pollfd p{out[0], POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      char buffer[4096];
      const ssize_t n = read(out[0], buffer, sizeof(buffer));
      if (n <= 0) break;
      printed.append(buffer, static_cast<size_t>(n));
    }
    return printed.find(want) != std::string::npos;
  };
  ASSERT_TRUE(read_until("listening on http://127.0.0.1:")) << binary << ": " << printed;
  const size_t at = printed.find("127.0.0.1:") + 10;
  const int port = std::stoi(printed.substr(at, printed.find_first_not_of("0123456789", at) - at));
  httplib::Client client("127.0.0.1", port);
  EXPECT_EQ(client.Get("/health")->status, 200);
  const Json c = reference_cases()[0];
  httplib::Result r =
      client.Post("/v1/completions", greedy_request(c, 8).dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(Json::parse(r->body).at("choices").at(0).at("token_ids").get<std::vector<int32_t>>(),
            head(c.at("generated_tokens"), 8));
  ASSERT_EQ(kill(pid, SIGTERM), 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_TRUE(read_until("cellm serve: stopped")) << printed;
  close(out[0]);
}

}  // namespace
}  // namespace cellm::app
