// HttpServer (serve_http.h) on cpp-httplib: routes, generation slots, and the bridge from a
// generation's updates (engine thread) to a request's worker thread.
#include "serve_http.h"

#include <fmt/format.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <random>
#include <thread>

#include "core/check.h"
#include "serve_api.h"
#include "serve_metrics.h"

namespace cellm::app {
namespace {

using namespace std::chrono_literals;

constexpr const char* kJson = "application/json";

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

// What the engine thread has delivered and the request's thread has not yet sent.
struct Channel {
  std::mutex mutex;
  std::condition_variable cv;
  std::string text;             // guarded by mutex
  std::vector<int32_t> tokens;  // guarded by mutex
  bool finished = false;        // guarded by mutex

  // The generation's callback. It owns the channel too: a cancelled generation's last update
  // may arrive after the request is gone.
  static GenerationCallback callback(const std::shared_ptr<Channel>& channel) {
    return [channel](const GenerationUpdate& update) {
      {
        std::lock_guard<std::mutex> lock(channel->mutex);
        channel->text.append(update.text);
        channel->tokens.insert(channel->tokens.end(), update.tokens.begin(), update.tokens.end());
        channel->finished = channel->finished || update.finished;
      }
      channel->cv.notify_all();
    };
  }
};

}  // namespace

struct HttpServer::Impl {
  Runner& runner;
  const TextCodec& codec;
  ExecutorLimits limits;
  ServeOptions options;
  httplib::Server server;

  std::mutex mutex;
  std::condition_variable slot_cv;
  int32_t num_running = 0;   // guarded by mutex: generations holding a slot
  int32_t num_queued = 0;    // guarded by mutex: requests waiting for one
  uint64_t next_ticket = 0;  // guarded by mutex: the next arrival's place in the queue
  uint64_t head_ticket = 0;  // guarded by mutex: the place whose turn it is
  bool stopping = false;     // guarded by mutex
  bool serving = false;      // guarded by mutex: serve() has not returned
  std::condition_variable served_cv;
  std::mt19937_64 seeds{std::random_device{}()};  // guarded by mutex
  std::atomic<uint64_t> num_requests{0};
  std::atomic<uint64_t> num_rejected{0};  // answered 4xx or 5xx
  std::atomic<bool> stop_requested{false};

  Impl(Runner& r, const TextCodec& c, const ExecutorLimits& l, ServeOptions o)
      : runner(r), codec(c), limits(l), options(std::move(o)) {}

  // A generation slot, held until release() or destruction.
  class Slot {
   public:
    explicit Slot(Impl* impl) : impl_(impl) {}
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;
    ~Slot() { release(); }
    void release() {
      if (impl_ == nullptr) return;
      {
        std::lock_guard<std::mutex> lock(impl_->mutex);
        --impl_->num_running;
      }
      impl_->slot_cv.notify_all();  // only the head ticket may take it
      impl_ = nullptr;
    }

   private:
    Impl* impl_;
  };

  // Waits for a free slot in arrival order (tickets: a condition variable wakes waiters in no
  // particular order); Cancelled when the server stops first.
  StatusOr<std::unique_ptr<Slot>> acquire_slot() {
    std::unique_lock<std::mutex> lock(mutex);
    const uint64_t ticket = next_ticket++;
    ++num_queued;
    slot_cv.wait(lock, [&] {
      return stopping ||
             (ticket == head_ticket && num_running < options.max_concurrent_generations);
    });
    --num_queued;
    if (stopping) return cancelled("the server is stopping");
    ++head_ticket;
    ++num_running;
    lock.unlock();
    slot_cv.notify_all();  // the next ticket may fit too
    return std::make_unique<Slot>(this);
  }

  bool is_stopping() {
    std::lock_guard<std::mutex> lock(mutex);
    return stopping;
  }

  uint64_t fresh_seed() {
    std::lock_guard<std::mutex> lock(mutex);
    return seeds();
  }

  // The prompt's token ids and the GenConfig, or why the model cannot serve the request.
  Status prepare(const ServeRequest& request, std::vector<int32_t>& prompt, GenConfig& config) {
    if (!request.model.empty() && request.model != options.model_name) {
      return not_found(fmt::format("model '{}' is not served here; this server serves '{}'",
                                   request.model, options.model_name));
    }
    StatusOr<std::vector<int32_t>> tokens = request.prompt_tokens;
    if (request.endpoint == ServeEndpoint::kChatCompletions) {
      tokens = codec.encode_conversation(request.messages);
    } else if (request.prompt_text) {
      tokens = codec.encode_prompt(*request.prompt_text);
    }
    if (!tokens.ok()) return invalid_argument(tokens.status().message());
    prompt = std::move(tokens).value();
    if (prompt.empty()) return invalid_argument("the prompt has no tokens");
    for (const int32_t id : prompt) {
      if (id < 0 || id >= limits.vocab_size) {
        return invalid_argument(fmt::format("prompt token id {} is outside the vocabulary [0, {})",
                                            id, limits.vocab_size));
      }
    }
    const int64_t room =
        static_cast<int64_t>(limits.max_session_tokens) - static_cast<int64_t>(prompt.size());
    if (room <= 0) {
      return invalid_argument(fmt::format(
          "the prompt has {} tokens; a session holds at most {}, with room for 1 new token",
          prompt.size(), limits.max_session_tokens));
    }
    if (request.max_tokens && *request.max_tokens > room) {
      return invalid_argument(fmt::format(
          "max_tokens is {}, but a prompt of {} tokens leaves room for {} in a session of {}",
          *request.max_tokens, prompt.size(), room, limits.max_session_tokens));
    }
    config = request.config;
    config.max_new_tokens = request.max_tokens ? *request.max_tokens : static_cast<int32_t>(room);
    config.seed = request.seed ? *request.seed : fresh_seed();
    return ok_status();
  }

  ServeResult new_result(const ServeRequest& request, std::vector<int32_t> prompt) {
    static std::atomic<uint64_t> counter{0};
    ServeResult result;
    const char* prefix = request.endpoint == ServeEndpoint::kChatCompletions ? "chatcmpl" : "cmpl";
    result.id =
        fmt::format("{}-{:016x}{:04x}", prefix, fresh_seed(), counter.fetch_add(1) & 0xffff);
    result.created_s = unix_seconds();
    result.model = options.model_name;
    result.prompt_tokens = std::move(prompt);
    return result;
  }

  // A generation that ended kFailed: refused at submit (it never ran a step) is the request's
  // fault, anything later the server's.
  static Status failure_status(const GenerationHandle& handle) {
    const std::string message = handle.error_message();
    return handle.metrics().first_step_us < 0 ? invalid_argument(message) : internal_error(message);
  }

  void handle_generation(const httplib::Request& http_request, httplib::Response& response,
                         ServeEndpoint endpoint) {
    num_requests.fetch_add(1);
    StatusOr<ServeRequest> request = parse_serve_request(http_request.body, endpoint);
    std::vector<int32_t> prompt;
    GenConfig config;
    Status status = request.status();
    if (status.ok()) status = prepare(*request, prompt, config);
    if (!status.ok()) {
      num_rejected.fetch_add(1);
      reply_error(response, status);
      return;
    }
    StatusOr<std::unique_ptr<Slot>> slot = acquire_slot();
    if (!slot.ok()) {
      num_rejected.fetch_add(1);
      reply_error(response, slot.status());
      return;
    }
    auto stream = std::make_shared<Stream>();
    stream->request = std::move(request).value();
    stream->result = new_result(stream->request, prompt);
    stream->slot = std::move(slot).value();
    stream->session = runner.open_session();
    stream->handle = stream->session.generate_async(std::move(prompt), std::move(config),
                                                    Channel::callback(stream->channel));
    if (stream->request.stream) {
      start_stream(stream, response);
    } else {
      finish_whole(stream, response);
    }
  }

  // One generation's state, shared by the handler and (when streaming) the content provider.
  struct Stream {
    ServeRequest request;
    ServeResult result;
    std::unique_ptr<Slot> slot;
    Session session;
    GenerationHandle handle;
    std::shared_ptr<Channel> channel = std::make_shared<Channel>();
    bool first = true;

    // Ends the generation (if it still runs), closes the session and frees the slot.
    void end() {
      if (handle.valid() && !handle.done()) handle.cancel();
      if (session.valid()) session.close();
      if (slot) slot->release();
    }
  };

  // Waits up to `timeout` for the generation to end (cancelling it when the server stops); true
  // when it has.
  bool wait_for_end(Stream& stream, std::chrono::milliseconds timeout) {
    const bool done = stream.handle.wait_for(timeout);
    if (!done && is_stopping()) stream.handle.cancel();
    return done;
  }

  // A whole (not streamed) response. Most generations end, or are refused, within the first
  // wait: an ordinary response with its status. A longer one is answered 200 at once and its JSON
  // sent when it ends, with a space every keep-alive interval before it (leading whitespace is
  // valid JSON): a client that went away fails a write, which cancels the generation, as it
  // does for a stream. A failure after that point is an error body under the 200.
  void finish_whole(const std::shared_ptr<Stream>& stream, httplib::Response& response) {
    if (wait_for_end(*stream, std::chrono::milliseconds(options.whole_response_wait_ms))) {
      reply_whole(*stream, response);
      return;
    }
    response.status = 200;
    response.set_chunked_content_provider(
        kJson,
        [this, stream](size_t /*offset*/, httplib::DataSink& sink) {
          if (!wait_for_end(*stream, std::chrono::milliseconds(options.keepalive_ms))) {
            return sink.write(" ", 1);
          }
          httplib::Response whole;
          reply_whole(*stream, whole);
          if (!sink.write(whole.body.data(), whole.body.size())) return false;
          sink.done();
          return true;
        },
        [stream](bool /*success*/) { stream->end(); });
  }

  // The response of an ended generation (its status, its body).
  void reply_whole(Stream& stream, httplib::Response& response) {
    stream.end();
    const FinishReason reason = stream.handle.finish_reason();
    if (reason == FinishReason::kFailed) {
      num_rejected.fetch_add(1);
      reply_error(response, failure_status(stream.handle));
      return;
    }
    if (reason == FinishReason::kCancelled && is_stopping()) {
      num_rejected.fetch_add(1);
      reply_error(response, cancelled("the server stopped before the generation ended"));
      return;
    }
    stream.result.text = stream.handle.text();
    stream.result.tokens = stream.handle.tokens();
    stream.result.finish_reason = reason;
    reply_json(response, 200, completion_response_json(stream.request, stream.result));
  }

  void start_stream(const std::shared_ptr<Stream>& stream, httplib::Response& response) {
    response.status = 200;
    response.set_header("Cache-Control", "no-cache");
    response.set_chunked_content_provider(
        "text/event-stream",
        [this, stream](size_t /*offset*/, httplib::DataSink& sink) {
          return send_stream(*stream, sink);
        },
        [stream](bool /*success*/) { stream->end(); });
  }

  // One call of the content provider: waits a little for the next delivered text, sends it.
  // False ends the response (the client went away: the generation is cancelled by end()).
  bool send_stream(Stream& stream, httplib::DataSink& sink) {
    const ServeRequest& request = stream.request;
    ServeResult& result = stream.result;
    auto write = [&sink](const std::string& event) {
      return sink.write(event.data(), event.size());
    };
    if (stream.first && request.endpoint == ServeEndpoint::kChatCompletions) {
      stream.first = false;  // the role first, as OpenAI's streams do
      if (!write(sse_event(completion_chunk_json(request, result, "", {}, true, std::nullopt)))) {
        return false;
      }
    }
    std::string text;
    std::vector<int32_t> tokens;
    bool finished = false;
    {
      std::unique_lock<std::mutex> lock(stream.channel->mutex);
      stream.channel->cv.wait_for(lock, 250ms, [&] {
        return stream.channel->finished || !stream.channel->text.empty() ||
               (request.return_token_ids && !stream.channel->tokens.empty());
      });
      text.swap(stream.channel->text);
      tokens.swap(stream.channel->tokens);
      finished = stream.channel->finished;
    }
    if (!finished && is_stopping()) stream.handle.cancel();
    result.tokens.insert(result.tokens.end(), tokens.begin(), tokens.end());
    result.text += text;
    if (!text.empty() || (request.return_token_ids && !tokens.empty())) {
      if (!write(sse_event(
              completion_chunk_json(request, result, text, tokens, stream.first, std::nullopt)))) {
        return false;
      }
      stream.first = false;
    }
    if (!finished) return true;
    stream.handle.wait();  // the final update arrived: done is set right after it
    result.finish_reason = stream.handle.finish_reason();
    std::string tail;
    if (result.finish_reason == FinishReason::kFailed) {
      tail = sse_event(error_json(failure_status(stream.handle)));
    } else {
      tail = sse_event(
          completion_chunk_json(request, result, "", {}, stream.first, result.finish_reason));
      if (request.stream_include_usage) tail += sse_event(usage_chunk_json(request, result));
    }
    tail += sse_done();
    if (!write(tail)) return false;
    stream.end();
    sink.done();
    return true;
  }

  ServerCounters counters() {
    ServerCounters c;
    {
      std::lock_guard<std::mutex> lock(mutex);
      c.running_generations = num_running;
      c.queued_requests = num_queued;
    }
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
    server.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
      handle_generation(req, res, ServeEndpoint::kCompletions);
    });
    server.Post("/v1/chat/completions",
                [this](const httplib::Request& req, httplib::Response& res) {
                  handle_generation(req, res, ServeEndpoint::kChatCompletions);
                });
    server.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
      nlohmann::ordered_json model = {{"id", options.model_name},
                                      {"object", "model"},
                                      {"created", unix_seconds()},
                                      {"owned_by", "cellm"},
                                      {"max_model_len", limits.max_session_tokens}};
      reply_json(res, 200, {{"object", "list"}, {"data", nlohmann::ordered_json::array({model})}});
    });
    server.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
      const bool down = is_stopping();
      reply_json(res, down ? 503 : 200, {{"status", down ? "stopping" : "ok"}});
    });
    server.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(prometheus_metrics(counters(), runner.metrics()),
                      "text/plain; version=0.0.4; charset=utf-8");
    });
    server.Get("/metrics.json", [this](const httplib::Request&, httplib::Response& res) {
      reply_json(res, 200, metrics_json(counters(), runner.metrics()));
    });
    server.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return;  // a handler's own error body
      const Status status =
          res.status == 404 ? not_found(fmt::format("no route for {} {}", req.method, req.path))
          : res.status == 413
              ? invalid_argument("the request body is larger than the server accepts")
              : invalid_argument(fmt::format("HTTP status {}", res.status));
      const int code = res.status;
      reply_json(res, code, error_json(status));
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
  impl_->slot_cv.notify_all();
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
