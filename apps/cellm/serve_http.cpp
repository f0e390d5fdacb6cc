// HttpServer (serve_http.h) on cpp-httplib: routes, the API key, generation slots in arrival
// order (serve_slots.h), and each request's ServeExchange written out whole or as events.
#include "serve_http.h"

#include <fmt/format.h>
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/check.h"
#include "serve_api.h"
#include "serve_exchange.h"
#include "serve_metrics.h"
#include "serve_slots.h"

namespace cellm::app {
namespace {

using namespace std::chrono_literals;

constexpr const char* kJson = "application/json";
constexpr int32_t kDefaultCompletionTokens = 16;  // OpenAI's max_tokens default for completions

int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void reply_json(httplib::Response& response, int status, const nlohmann::ordered_json& body) {
  response.status = status;
  response.set_content(body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n",
                       kJson);
}

void reply_error(httplib::Response& response, const Status& status) {
  reply_json(response, http_status_for(status), error_json(status));
}

}  // namespace

struct HttpServer::Impl {
  Runner& runner;
  const TextCodec& codec;
  ExecutorLimits limits;
  ServeOptions options;
  // One slot per choice of a running generation. Declared before the server, so it outlives the
  // server's handlers and content providers, which hold leases.
  SlotQueue slots;
  httplib::Server server;

  std::mutex mutex;
  bool stopping = false;  // guarded by mutex
  bool serving = false;   // guarded by mutex: serve() has not returned
  std::condition_variable served_cv;
  std::mt19937_64 seeds{std::random_device{}()};  // guarded by mutex
  std::atomic<uint64_t> num_requests{0};
  std::atomic<uint64_t> num_rejected{0};  // answered 4xx or 5xx

  Impl(Runner& r, const TextCodec& c, const ExecutorLimits& l, ServeOptions o)
      : runner(r),
        codec(c),
        limits(l),
        options(std::move(o)),
        slots(options.max_concurrent_generations) {}

  bool is_stopping() {
    std::lock_guard<std::mutex> lock(mutex);
    return stopping;
  }

  uint64_t fresh_seed() {
    std::lock_guard<std::mutex> lock(mutex);
    return seeds();
  }

  // Prompt `index` as token ids: a chat's conversation through its template, text through the
  // tokenizer (BOS first where the vocabulary adds one, unless !add_special_tokens), ids as given.
  // InvalidArgument when the model cannot encode it (no chat template, say).
  StatusOr<std::vector<int32_t>> encode(const ServeRequest& request, size_t index,
                                        bool add_special_tokens) {
    StatusOr<std::vector<int32_t>> tokens = std::vector<int32_t>();
    if (request.endpoint == ServeEndpoint::kChatCompletions) {
      std::vector<ChatToolText> tools;
      for (const ServeTool& tool : request.tools.tools) tools.push_back(tool.text);
      tokens = codec.encode_conversation(request.messages, tools, request.chat_prompt);
    } else if (request.prompts[index].text) {
      tokens = codec.encode_prompt(*request.prompts[index].text);
      if (tokens.ok() && !add_special_tokens && codec.adds_bos() && !tokens->empty()) {
        tokens->erase(tokens->begin());
      }
    } else {
      tokens = request.prompts[index].tokens;
    }
    if (!tokens.ok()) return invalid_argument(tokens.status().message());
    return tokens;
  }

  // A prompt's token ids, checked against the vocabulary and a session's context.
  StatusOr<std::vector<int32_t>> prompt_ids(const ServeRequest& request, size_t index) {
    StatusOr<std::vector<int32_t>> tokens = encode(request, index, /*add_special_tokens=*/true);
    if (!tokens.ok()) return tokens.status();
    const std::string which =
        num_prompts(request) > 1 ? fmt::format("prompt {}", index) : std::string("the prompt");
    if (tokens->empty()) return invalid_argument(which + " has no tokens");
    for (const int32_t id : *tokens) {
      if (id < 0 || id >= limits.vocab_size) {
        return invalid_argument(fmt::format("{}: token id {} is outside the vocabulary [0, {})",
                                            which, id, limits.vocab_size));
      }
    }
    const int64_t room =
        static_cast<int64_t>(limits.max_session_tokens) - static_cast<int64_t>(tokens->size());
    if (room <= 0) {
      return invalid_argument(
          fmt::format("{} has {} tokens; a session holds at most {}, with room for 1 new token",
                      which, tokens->size(), limits.max_session_tokens));
    }
    if (request.max_tokens && *request.max_tokens > room) {
      return invalid_argument(
          fmt::format("max_tokens is {}, but {} of {} tokens leaves room for {} in a session of {}",
                      *request.max_tokens, which, tokens->size(), room, limits.max_session_tokens));
    }
    return tokens;
  }

  // The prompts' token ids and one GenConfig per choice, or why the server cannot serve them.
  Status prepare(const ServeRequest& request, ServeResult& header,
                 std::vector<GenConfig>& configs) {
    if (!request.model.empty() && request.model != options.model_name) {
      return not_found(fmt::format("model '{}' is not served here; this server serves '{}'",
                                   request.model, options.model_name));
    }
    const size_t num_choices = num_prompts(request) * static_cast<size_t>(request.n);
    if (num_choices > static_cast<size_t>(options.max_concurrent_generations)) {
      return invalid_argument(
          fmt::format("the request asks for {} generations; this server runs at most {} at once "
                      "(--max-concurrent)",
                      num_choices, options.max_concurrent_generations));
    }
    for (size_t i = 0; i < num_prompts(request); ++i) {
      CELLM_ASSIGN_OR_RETURN(std::vector<int32_t> ids, prompt_ids(request, i));
      if (request.echo && request.endpoint == ServeEndpoint::kChatCompletions) {
        // The final message, where the answer continues the assistant's.
        const ChatTurn& last = request.messages.back();
        header.prompt_texts.push_back(last.role == "assistant" ? last.content : "");
      } else if (request.echo) {  // the prompt's own text, or its ids' text
        const std::optional<std::string>& text = request.prompts[i].text;
        CELLM_ASSIGN_OR_RETURN(std::string shown,
                               text ? StatusOr<std::string>(*text) : codec.decode(ids));
        header.prompt_texts.push_back(std::move(shown));
      }
      header.prompt_tokens.push_back(std::move(ids));
    }
    const uint64_t seed = request.seed ? *request.seed : fresh_seed();
    for (size_t k = 0; k < num_choices; ++k) {
      GenConfig config = request.config;
      const size_t prompt_length = header.prompt_tokens[k / static_cast<size_t>(request.n)].size();
      // Without max_tokens: OpenAI's defaults, 16 for a completion, the rest of the session's
      // context for a chat completion.
      const int32_t room = limits.max_session_tokens - static_cast<int32_t>(prompt_length);
      config.max_new_tokens = request.max_tokens ? *request.max_tokens
                              : request.endpoint == ServeEndpoint::kChatCompletions
                                  ? room
                                  : std::min(kDefaultCompletionTokens, room);
      if (config.min_new_tokens > config.max_new_tokens) {
        return invalid_argument(fmt::format("\"min_tokens\" is {}, above the {} max_tokens{}",
                                            config.min_new_tokens, config.max_new_tokens,
                                            request.max_tokens ? "" : " of the default"));
      }
      config.seed = seed + k;  // choices of one prompt differ when they sample
      configs.push_back(std::move(config));
    }
    return ok_status();
  }

  ServeResult new_header(const ServeRequest& request) {
    static std::atomic<uint64_t> counter{0};
    ServeResult header;
    const char* prefix = request.endpoint == ServeEndpoint::kChatCompletions ? "chatcmpl" : "cmpl";
    header.id =
        fmt::format("{}-{:016x}{:04x}", prefix, fresh_seed(), counter.fetch_add(1) & 0xffff);
    header.created_s = unix_seconds();
    header.model = options.model_name;
    return header;
  }

  // One request's generations and the slots they hold, shared by the handler and (when the
  // response outlives the handler) the content provider.
  struct Exchange {
    std::unique_ptr<ServeExchange> generations;
    std::unique_ptr<SlotQueue::Lease> slots;

    // Ends the generations still running, closes their sessions, frees the slots.
    void end() {
      generations->end();
      slots->release();
    }
  };

  void handle_generation(const httplib::Request& http_request, httplib::Response& response,
                         ServeEndpoint endpoint) {
    num_requests.fetch_add(1);
    StatusOr<ServeRequest> request = parse_serve_request(http_request.body, endpoint);
    if (request.ok()) {
      request->tools.syntax = codec.tool_syntax();
      if (endpoint == ServeEndpoint::kChatCompletions && !request->config.constrained()) {
        request->reasoning = options.reasoning_parser;
      }
    }
    ServeResult header;
    std::vector<GenConfig> configs;
    Status status = request.status();
    if (status.ok()) {
      header = new_header(*request);
      status = prepare(*request, header, configs);
    }
    StatusOr<std::unique_ptr<SlotQueue::Lease>> lease =
        status.ok() ? slots.acquire(static_cast<int32_t>(configs.size()))
                    : StatusOr<std::unique_ptr<SlotQueue::Lease>>(status);
    if (!lease.ok()) {
      num_rejected.fetch_add(1);
      reply_error(response, lease.status());
      return;
    }
    auto exchange = std::make_shared<Exchange>();
    exchange->slots = std::move(lease).value();
    exchange->generations = std::make_unique<ServeExchange>(
        runner, std::move(request).value(), std::move(header), std::move(configs),
        [this](int32_t id) { return codec.token_piece(id); });
    if (exchange->generations->request().stream) {
      start_stream(exchange, response);
    } else {
      finish_whole(exchange, response);
    }
  }

  // POST /tokenize: a prompt's token ids as a completion (or, with "messages", a chat
  // completion) would run them, with the context's length beside them.
  void handle_tokenize(const httplib::Request& req, httplib::Response& res) {
    StatusOr<TokenizeRequest> request = parse_tokenize_request(req.body);
    if (!request.ok()) return reply_error(res, request.status());
    const StatusOr<std::vector<int32_t>> tokens =
        encode(request->prompt, 0, request->add_special_tokens);
    if (!tokens.ok()) return reply_error(res, tokens.status());
    reply_json(res, 200,
               {{"count", tokens->size()},
                {"max_model_len", limits.max_session_tokens},
                {"tokens", *tokens}});
  }

  // Waits up to `timeout` for every choice to end (cancelling them when the server stops); true
  // when all have.
  bool wait_for_end(Exchange& exchange, std::chrono::milliseconds timeout) {
    const bool done = exchange.generations->wait_all(timeout);
    if (!done && is_stopping()) exchange.generations->cancel();
    return done;
  }

  // A whole (not streamed) response. Most generations end, or are refused, within the first
  // wait: an ordinary response with its status. A longer one is answered 200 at once and its JSON
  // sent when it ends, with a space every keep-alive interval before it (leading whitespace is
  // valid JSON): a client that went away fails a write, which cancels the generations, as it
  // does for a stream. A failure after that point is an error body under the 200.
  void finish_whole(const std::shared_ptr<Exchange>& exchange, httplib::Response& response) {
    if (wait_for_end(*exchange, std::chrono::milliseconds(options.whole_response_wait_ms))) {
      reply_whole(*exchange, response);
      return;
    }
    response.status = 200;
    response.set_chunked_content_provider(
        kJson,
        [this, exchange](size_t /*offset*/, httplib::DataSink& sink) {
          if (!wait_for_end(*exchange, std::chrono::milliseconds(options.keepalive_ms))) {
            return sink.write(" ", 1);
          }
          httplib::Response whole;
          reply_whole(*exchange, whole);
          if (!sink.write(whole.body.data(), whole.body.size())) return false;
          sink.done();
          return true;
        },
        [exchange](bool /*success*/) { exchange->end(); });
  }

  // The response of a request whose generations all ended (its status, its body).
  void reply_whole(Exchange& exchange, httplib::Response& response) {
    exchange.end();
    StatusOr<nlohmann::ordered_json> body = exchange.generations->whole_response(is_stopping());
    if (!body.ok()) {
      num_rejected.fetch_add(1);
      reply_error(response, body.status());
      return;
    }
    reply_json(response, 200, *body);
  }

  void start_stream(const std::shared_ptr<Exchange>& exchange, httplib::Response& response) {
    response.status = 200;
    response.set_header("Cache-Control", "no-cache");
    response.set_chunked_content_provider(
        "text/event-stream",
        [this, exchange](size_t /*offset*/, httplib::DataSink& sink) {
          // One call: wait a little for the next deliveries, send their events. False ends the
          // response (the client went away: end() cancels the generations).
          if (is_stopping()) exchange->generations->cancel();
          bool done = false;
          const std::string events = exchange->generations->next_events(250ms, done);
          if (!events.empty() && !sink.write(events.data(), events.size())) return false;
          if (done) {
            exchange->end();
            sink.done();
          }
          return true;
        },
        [exchange](bool /*success*/) { exchange->end(); });
  }

  ServerCounters counters() {
    ServerCounters c;
    c.running_generations = slots.num_running();
    c.queued_requests = slots.num_queued();
    c.max_concurrent_generations = options.max_concurrent_generations;
    c.requests = static_cast<int64_t>(num_requests.load());
    c.rejected_requests = static_cast<int64_t>(num_rejected.load());
    return c;
  }

  // With an API key, every route but /health needs "Authorization: Bearer <key>" (compared in
  // time independent of where it differs).
  bool authorized(const httplib::Request& req) const {
    if (options.api_key.empty() || req.path == "/health") return true;
    const std::string expected = "Bearer " + options.api_key;
    const std::string given = req.get_header_value("Authorization");
    unsigned char differ = given.size() == expected.size() ? 0 : 1;
    for (size_t i = 0; i < expected.size(); ++i) {
      differ |= static_cast<unsigned char>(expected[i] ^ (i < given.size() ? given[i] : 0));
    }
    return differ == 0;
  }

  // Every route with its method, as add_routes() registers them (filled before serving; read-only
  // afterwards): the error handler tells a wrong method from a missing route by it.
  std::vector<std::pair<std::string, std::string>> routes;

  void post(const std::string& path, httplib::Server::Handler handler) {
    routes.emplace_back(path, "POST");
    server.Post(path, std::move(handler));
  }
  void get(const std::string& path, httplib::Server::Handler handler) {
    routes.emplace_back(path, "GET");
    server.Get(path, std::move(handler));
  }
  // The method `path` takes ("" for no route).
  std::string route_method(const std::string& path) const {
    for (const auto& [route, method] : routes) {
      if (route == path) return method;
    }
    return {};
  }

  void add_routes() {
    server.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (authorized(req)) return httplib::Server::HandlerResponse::Unhandled;
      res.set_header("WWW-Authenticate", "Bearer");
      reply_json(res, 401,
                 {{"error",
                   {{"message", "a missing or wrong API key: send \"Authorization: Bearer <key>\""},
                    {"type", "authentication_error"},
                    {"code", "unauthenticated"}}}});
      return httplib::Server::HandlerResponse::Handled;
    });
    post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
      handle_generation(req, res, ServeEndpoint::kCompletions);
    });
    post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
      handle_generation(req, res, ServeEndpoint::kChatCompletions);
    });
    post("/tokenize", [this](const httplib::Request& req, httplib::Response& res) {
      handle_tokenize(req, res);
    });
    post("/detokenize", [this](const httplib::Request& req, httplib::Response& res) {
      StatusOr<std::vector<int32_t>> tokens = parse_detokenize_request(req.body);
      Status status = tokens.status();
      for (size_t i = 0; status.ok() && i < tokens->size(); ++i) {
        if ((*tokens)[i] >= limits.vocab_size) {
          status = invalid_argument(fmt::format("token id {} is outside the vocabulary [0, {})",
                                                (*tokens)[i], limits.vocab_size));
        }
      }
      StatusOr<std::string> text = status.ok() ? codec.decode(*tokens) : status;
      if (!text.ok()) return reply_error(res, invalid_argument(text.status().message()));
      reply_json(res, 200, {{"prompt", *text}});
    });
    get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
      nlohmann::ordered_json model = {{"id", options.model_name},
                                      {"object", "model"},
                                      {"created", unix_seconds()},
                                      {"owned_by", "cellm"},
                                      {"max_model_len", limits.max_session_tokens}};
      reply_json(res, 200, {{"object", "list"}, {"data", nlohmann::ordered_json::array({model})}});
    });
    get("/health", [this](const httplib::Request&, httplib::Response& res) {
      const bool down = is_stopping();
      reply_json(res, down ? 503 : 200, {{"status", down ? "stopping" : "ok"}});
    });
    get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(prometheus_metrics(counters(), runner.metrics()),
                      "text/plain; version=0.0.4; charset=utf-8");
    });
    get("/metrics.json", [this](const httplib::Request&, httplib::Response& res) {
      reply_json(res, 200, metrics_json(counters(), runner.metrics()));
    });
    server.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return;  // a handler's own error body
      const std::string allowed = res.status == 404 ? route_method(req.path) : "";
      if (!allowed.empty()) res.set_header("Allow", allowed);
      const bool has_body_length =
          req.has_header("Content-Length") || req.has_header("Transfer-Encoding");
      const HttpRefusal refusal =
          http_refusal(res.status, req.method, req.path, has_body_length, allowed);
      reply_json(res, refusal.status, refusal.body);
    });
    server.set_exception_handler(
        [this](const httplib::Request&, httplib::Response& res, std::exception_ptr error) {
          num_rejected.fetch_add(1);
          std::string what = "unknown exception";
          try {
            std::rethrow_exception(error);
          } catch (const std::exception& e) {
            what = e.what();
          } catch (...) {
          }
          reply_error(res, internal_error("the request failed: " + what));
        });
  }
};

HttpServer::HttpServer(Runner& runner, const TextCodec& codec, const ExecutorLimits& limits,
                       ServeOptions options)
    : impl_(std::make_unique<Impl>(runner, codec, limits, std::move(options))) {
  CELLM_CHECK(impl_->options.max_concurrent_generations >= 1)
      << "max_concurrent_generations must be at least 1";
  const size_t num_threads = static_cast<size_t>(impl_->options.max_concurrent_generations) +
                             static_cast<size_t>(std::max(impl_->options.extra_threads, 1));
  impl_->server.new_task_queue = [num_threads] { return new httplib::ThreadPool(num_threads); };
  impl_->server.set_payload_max_length(impl_->options.max_body_bytes);
  impl_->add_routes();
}

HttpServer::~HttpServer() {
  stop();
  std::unique_lock<std::mutex> lock(impl_->mutex);
  impl_->served_cv.wait(lock, [&] { return !impl_->serving; });
}

StatusOr<int> HttpServer::bind(const std::string& host, int port) {
  const int bound = port == 0 ? impl_->server.bind_to_any_port(host)
                              : (impl_->server.bind_to_port(host, port) ? port : -1);
  if (bound < 0) {
    return io_error(
        fmt::format("cannot listen on {}:{} (address in use or not local?)", host, port));
  }
  return bound;
}

Status HttpServer::serve() {
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    if (impl_->stopping) return ok_status();
    impl_->serving = true;
  }
  const bool ok = impl_->server.listen_after_bind();
  bool stopped;
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->serving = false;
    stopped = impl_->stopping;
  }
  impl_->served_cv.notify_all();
  if (!ok && !stopped) return io_error("the server's listening socket failed");
  return ok_status();
}

void HttpServer::stop() {
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->stopping = true;
  }
  impl_->slots.stop();
  // serve() may be between its check of `stopping` and the accept loop, where the library's
  // stop() does nothing: repeat until it runs (then stop() ends it) or has returned.
  for (;;) {
    impl_->server.stop();
    {
      std::lock_guard<std::mutex> lock(impl_->mutex);
      if (!impl_->serving) return;
    }
    if (impl_->server.is_running()) {
      impl_->server.stop();
      return;
    }
    std::this_thread::sleep_for(1ms);
  }
}

}  // namespace cellm::app
