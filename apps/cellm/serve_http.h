// HttpServer: `cellm serve`'s HTTP front over one Runner — OpenAI-compatible completions and chat
// completions (whole or streamed as server-sent events), the model list, health, and metrics
// (GET /metrics in Prometheus' text format, GET /metrics.json).
//
// Each generation request (its prompts × n choices, serve_exchange.h: a Runner session each,
// closed when it ends, so prefix reuse keeps it as a retained prefix) waits for a free generation
// slot per choice first: at most `max_concurrent_generations` run at once, the rest queue in
// arrival order. A request whose
// client goes away is cancelled at the next token (streamed) or keep-alive space (whole response)
// it cannot send; a request still queued when the server stops is answered 503. Request bodies are
// parsed by serve_api.h; a request the model cannot serve (prompt plus max_tokens beyond a
// session's context, token ids outside the vocabulary, a chat request to a model without a chat
// template) is a 400 naming the reason. It knows no backend and no tokenizer type (TextCodec). The
// HTTP library stays in the .cpp. Thread-safety: bind() and serve() from one thread; stop() from
// any thread (a signal handler's thread included); request handlers run on the server's own worker
// threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "batching/executor.h"
#include "batching/runner.h"
#include "cmd_text.h"
#include "core/status.h"
#include "serve_reasoning.h"

namespace cellm::app {

struct ServeOptions {
  std::string model_name;  // what /v1/models lists and responses name
  int32_t max_concurrent_generations = 64;
  // Connections served at once beyond the generations (health, metrics, queued requests).
  int32_t extra_threads = 16;
  size_t max_body_bytes = 16u << 20;
  // A whole (not streamed) response still running after whole_response_wait_ms is answered 200
  // and kept alive by a space every keepalive_ms until its JSON: how a client that went away is
  // noticed (the write fails) and its generation cancelled.
  int32_t whole_response_wait_ms = 1000;
  int32_t keepalive_ms = 1000;
  // Not empty: every route but /health needs "Authorization: Bearer <api_key>" (401 otherwise).
  std::string api_key;
  // Chat answers' thinking as reasoning_content (serve_reasoning.h); not for constrained output.
  ReasoningParser reasoning_parser = ReasoningParser::kNone;
};

class HttpServer {
 public:
  // `runner` and `codec` outlive the server. `limits` are the executor's (the context check).
  HttpServer(Runner& runner, const TextCodec& codec, const ExecutorLimits& limits,
             ServeOptions options);
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;
  ~HttpServer();  // stop(), then waits for serve() to return

  // Binds and listens on host:port (port 0: any free port); the port bound. Connections queue
  // from here on, before serve().
  StatusOr<int> bind(const std::string& host, int port);
  // Accepts and serves until stop(); returns after the workers finished their requests.
  Status serve();
  // Stops accepting, cancels queued requests, ends streaming ones. Idempotent.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace cellm::app
