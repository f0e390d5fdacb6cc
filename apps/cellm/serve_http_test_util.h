// The HTTP server's end-to-end tests' shared parts (serve_http_test.cpp,
// serve_http_logprobs_test.cpp): stories260K on the CPU behind an HttpServer on a free local port
// (Served), requests by cpp-httplib's client, and readers of what comes back. Test code only.
// Thread-safety: a Served is used from the test's thread; it serves on its own.
#pragma once

#include <httplib.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "batching/runner.h"
#include "cmd_engine.h"
#include "cmd_text.h"
#include "serve_http.h"
#include "test_models.h"

namespace cellm::app::http_test {

using Json = nlohmann::json;

// The independent reference's stories260K greedy cases (reference/stories260K-greedy.json).
Json reference_cases();

// One model, runner and server on a free port, serving on its own thread.
class Served {
 public:
  explicit Served(int32_t max_concurrent = 8,
                  const std::string& model = testing::test_model_path("stories260K.gguf"),
                  const std::string& api_key = "", int32_t keepalive_ms = 1000,
                  ReasoningParser reasoning = ReasoningParser::kNone);
  ~Served();

  int port() const { return port_; }
  HttpServer& server() { return *server_; }
  const Engine& engine() const { return engine_; }
  const TextCodec& codec() const { return *codec_; }
  httplib::Client client() const;

 private:
  Engine engine_;
  std::unique_ptr<TextCodec> codec_;
  std::unique_ptr<Runner> runner_;
  std::unique_ptr<HttpServer> server_;
  int port_ = 0;
  std::thread thread_;
  Status served_;
};

struct Reply {
  int status = -1;
  Json body;
};

Reply post(const Served& served, const std::string& path, const Json& body);
Reply get(const Served& served, const std::string& path);

// POSTs `body` to `path` handing the response's bytes to `receive` as they come; the connection
// closes (the client hangs up) when it returns false. The response's status, -1 when none came.
int post_receiving(const Served& served, const Json& body,
                   std::function<bool(std::string_view)> receive,
                   const std::string& path = "/v1/completions");

// Sends `request` (an HTTP request's bytes, as a client that httplib's would not send) on a new
// connection and returns every byte the server answers until it closes the connection.
std::string raw_exchange(const Served& served, std::string_view request);

// The engine ends the one generation a client left as cancelled, well before its session's
// context is full (it asked for all of it).
void expect_one_cancelled_early(const Served& served);

// A greedy completions request of a reference case's prompt, its token ids returned.
Json greedy_request(const Json& reference_case, int max_tokens);

// The first n of a JSON list of token ids.
std::vector<int32_t> head(const Json& tokens, size_t n);

// The log-softmax of reference case 0's logits rows (the rows before each generated token; 128
// rows of stories260K's 512), in double: [row][token].
std::vector<std::vector<double>> reference_log_softmax();

// The "data: " payloads of a server-sent event stream, in order.
std::vector<std::string> sse_payloads(const std::string& stream);

// A streamed chat completion's first choice, its deltas joined: content, reasoning_content, the
// tool_calls deltas in order, and its finish_reason ("" while none came).
struct StreamedChat {
  std::string content;
  std::string reasoning;
  Json tool_calls = Json::array();
  std::string finish;
};

// POSTs `body` with "stream": true to /v1/chat/completions; a test failure unless the answer is
// 200.
StreamedChat stream_chat(const Served& served, Json body);

// The prompt text /tokenize gives a chat of `messages` (with the request fields in `extra`), read
// back by /detokenize; a test failure unless both answer 200.
std::string prompt_text(const Served& served, const Json& messages, const Json& extra = {});

// stories260K with a chat template of `format` added (its markers: no test model carries one),
// written once into the test's temporary folder. Its vocabulary has Llama-2's <s> and </s> but
// none of the other formats' control tokens, so their markup is plain text to it.
std::string stories_with_chat_template(std::string_view format = "llama-2");

}  // namespace cellm::app::http_test
