#include "serve_http_test_util.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <string>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "sanitizers.h"

#if CELLM_THREAD_SANITIZER
// Debian's cpp-httplib is a shared library built without ThreadSanitizer: its own synchronization
// (a function-local static's guard read on the fast path, e.g. the server's set of method names)
// is invisible, so concurrent connections look racy inside it. Reports from calls it makes are
// left out; every access of ours is still checked.
extern "C" const char* __tsan_default_suppressions() {
  return "called_from_lib:libcpp-httplib.so\n";
}
#endif

namespace cellm::app::http_test {

using namespace std::chrono_literals;

Json reference_cases() {
  std::ifstream file(testing::test_model_path("reference/stories260K-greedy.json"));
  return Json::parse(file).at("cases");
}

Served::Served(int32_t max_concurrent, const std::string& model, const std::string& api_key,
               int32_t keepalive_ms, ReasoningParser reasoning) {
  EngineFlags flags;
  flags.backend = "cpu";
  flags.num_threads = 2;
  flags.max_sessions = 16;
  StatusOr<Engine> engine = load_engine(model, flags);
  EXPECT_TRUE(engine.ok()) << engine.status().to_string();
  engine_ = std::move(engine).value();
  codec_ = std::make_unique<TextCodec>(TextCodec::from_program(*engine_.program));
  runner_ = std::make_unique<Runner>(*engine_.executor, DecodeFirstScheduler(engine_.scheduler),
                                     codec_->runner_options());
  ServeOptions serve_options;
  serve_options.model_name = "stories";
  serve_options.max_concurrent_generations = max_concurrent;
  serve_options.api_key = api_key;
  serve_options.whole_response_wait_ms = keepalive_ms;
  serve_options.keepalive_ms = keepalive_ms;
  serve_options.reasoning_parser = reasoning;
  server_ = std::make_unique<HttpServer>(*runner_, *codec_, engine_.limits, serve_options);
  StatusOr<int> port = server_->bind("127.0.0.1", 0);
  EXPECT_TRUE(port.ok()) << port.status().to_string();
  port_ = port.ok() ? *port : 0;
  thread_ = std::thread([this] { served_ = server_->serve(); });
}

Served::~Served() {
  server_->stop();
  thread_.join();
  EXPECT_TRUE(served_.ok()) << served_.to_string();
  runner_->shutdown();
}

httplib::Client Served::client() const {
  httplib::Client c("127.0.0.1", port_);
  c.set_read_timeout(120, 0);
  return c;
}

Reply post(const Served& served, const std::string& path, const Json& body) {
  httplib::Client client = served.client();
  httplib::Result result = client.Post(path, body.dump(), "application/json");
  if (!result) return {};
  Reply reply{result->status, Json::parse(result->body, nullptr, false)};
  return reply;
}

Reply get(const Served& served, const std::string& path) {
  httplib::Client client = served.client();
  httplib::Result result = client.Get(path);
  if (!result) return {};
  return {result->status, Json::parse(result->body, nullptr, false)};
}

int post_receiving(const Served& served, const Json& body,
                   std::function<bool(std::string_view)> receive, const std::string& path) {
  int status = -1;
  httplib::Request request;
  request.method = "POST";
  request.path = path;
  request.body = body.dump();
  request.set_header("Content-Type", "application/json");
  request.response_handler = [&status](const httplib::Response& response) {
    status = response.status;
    return true;
  };
  request.content_receiver = [&receive](const char* data, size_t size, uint64_t, uint64_t) {
    return receive(std::string_view(data, size));
  };
  httplib::Client client = served.client();
  client.send(request);  // an error when `receive` stopped it
  return status;
}

std::string raw_exchange(const Served& served, std::string_view request) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return {};
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(served.port()));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string answer;
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) == 0 &&
      ::send(fd, request.data(), request.size(), 0) == static_cast<ssize_t>(request.size())) {
    const timeval timeout{10, 0};  // a server that never answers fails the test, not hangs it
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    char buffer[4096];
    for (ssize_t n; (n = ::recv(fd, buffer, sizeof(buffer), 0)) > 0;) answer.append(buffer, n);
  }
  ::close(fd);
  return answer;
}

void expect_one_cancelled_early(const Served& served) {
  Json engine;
  for (int i = 0; i < 200; ++i) {
    engine = get(served, "/metrics.json").body.at("engine");
    if (engine.at("finished").at("cancelled") == 1) break;
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_EQ(engine.at("finished").at("cancelled"), 1) << engine.dump();
  EXPECT_LT(engine.at("generated_tokens").get<int64_t>(),
            served.engine().limits.max_session_tokens - 8);
}

Json greedy_request(const Json& reference_case, int max_tokens) {
  return {{"prompt", reference_case.at("prompt")},
          {"max_tokens", max_tokens},
          {"temperature", 0},
          {"return_token_ids", true}};
}

std::vector<int32_t> head(const Json& tokens, size_t n) {
  std::vector<int32_t> all = tokens.get<std::vector<int32_t>>();
  all.resize(std::min(n, all.size()));
  return all;
}

std::vector<std::string> sse_payloads(const std::string& stream) {
  std::vector<std::string> payloads;
  size_t at = 0;
  while ((at = stream.find("data: ", at)) != std::string::npos) {
    const size_t end = stream.find("\n\n", at);
    if (end == std::string::npos) break;
    payloads.push_back(stream.substr(at + 6, end - at - 6));
    at = end + 2;
  }
  return payloads;
}

StreamedChat stream_chat(const Served& served, Json body) {
  body["stream"] = true;
  std::string events;
  EXPECT_EQ(post_receiving(
                served, body,
                [&](std::string_view data) {
                  events.append(data);
                  return true;
                },
                "/v1/chat/completions"),
            200);
  StreamedChat out;
  for (const std::string& payload : sse_payloads(events)) {
    if (payload == "[DONE]") continue;
    const Json chunk = Json::parse(payload);
    const Json& choice = chunk.at("choices").at(0);
    const Json& delta = choice.at("delta");
    if (delta.contains("content")) out.content += delta["content"].get<std::string>();
    if (delta.contains("reasoning_content")) {
      out.reasoning += delta["reasoning_content"].get<std::string>();
    }
    if (delta.contains("tool_calls")) {
      for (const Json& call : delta["tool_calls"]) out.tool_calls.push_back(call);
    }
    if (!choice.at("finish_reason").is_null()) out.finish = choice["finish_reason"];
  }
  return out;
}

std::string prompt_text(const Served& served, const Json& messages, const Json& extra) {
  Json body = {{"messages", messages}};
  if (extra.is_object()) body.update(extra);
  const Reply tokens = post(served, "/tokenize", body);
  EXPECT_EQ(tokens.status, 200) << tokens.body.dump();
  if (tokens.status != 200) return "";
  const Reply prompt = post(served, "/detokenize", {{"tokens", tokens.body.at("tokens")}});
  EXPECT_EQ(prompt.status, 200) << prompt.body.dump();
  return prompt.status == 200 ? prompt.body.at("prompt").get<std::string>() : "";
}

namespace {

// The distinctive markers of each format's template (detection needs only them).
std::string template_with_markers(std::string_view format) {
  if (format == "chatml") return "{{ '<|im_start|>' + message['role'] + '<|im_end|>' }}";
  if (format == "qwen3") {
    return "{{ '<|im_start|>' + message['role'] }}{%- if enable_thinking is defined and "
           "enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}";
  }
  if (format == "llama-3") return "{{ '<|start_header_id|>' + role + '<|end_header_id|>' }}";
  if (format == "llama-3.1") {
    return "{{ '<|start_header_id|>' + role + '<|end_header_id|>' }}{{- 'Cutting Knowledge "
           "Date: December 2023\\n' }}";
  }
  if (format == "llama-3.2") {
    return "{%- set date_string = strftime_now('%d %b %Y') %}{{ '<|start_header_id|>' + role + "
           "'<|end_header_id|>' }}{{- 'Cutting Knowledge Date: December 2023\\n' }}";
  }
  if (format == "mistral-v3") return "{{ '[AVAILABLE_TOOLS] [' }}{{ '[INST] ' + content }}";
  if (format == "mistral-nemo") return "{{ '[AVAILABLE_TOOLS][' }}{{ '[INST]' + content }}";
  if (format == "deepseek-r1") return "{{'<｜User｜>' + content}}{{'<｜Assistant｜><think>\\n'}}";
  // The markers Meta's Llama-2 chat template holds ([INST], <<SYS>>).
  return "{{ bos_token + '[INST] ' + '<<SYS>>\\n' + content + ' [/INST]' }}";
}

void write_stories_with_chat_template(const std::string& path, std::string_view format) {
  StatusOr<GgufFile> file = GgufFile::open(testing::test_model_path("stories260K.gguf"));
  EXPECT_TRUE(file.ok()) << file.status().to_string();
  GgufWriter writer;
  for (const auto& [key, value] : file->metadata())
    EXPECT_TRUE(writer.add_metadata(key, value).ok());
  EXPECT_TRUE(
      writer
          .add_metadata("tokenizer.chat_template", GgufValue::string(template_with_markers(format)))
          .ok());
  for (const GgufTensorInfo& t : file->tensors()) {
    EXPECT_TRUE(writer.add_tensor(t.name, t.type, t.dims, file->tensor_data(t)).ok());
  }
  const Status written = writer.write_file(path);
  EXPECT_TRUE(written.ok()) << written.to_string();
}

}  // namespace

std::string stories_with_chat_template(std::string_view format) {
  // Written once per process and format, under a name of its own (test processes running at
  // once — ctest -j, two builds' suites — never write one file together), and removed when the
  // process ends.
  struct TempModel {
    std::string path;
    ~TempModel() { std::remove(path.c_str()); }
  };
  static std::mutex mutex;
  static std::map<std::string, TempModel, std::less<>> models;
  std::lock_guard<std::mutex> lock(mutex);
  const auto [it, added] = models.try_emplace(std::string(format));
  if (added) {  // in place: a copy's destructor would remove the file
    it->second.path = ::testing::TempDir() + "/stories260K-" + std::string(format) + "-chat-" +
                      std::to_string(getpid()) + ".gguf";
    write_stories_with_chat_template(it->second.path, format);
  }
  return it->second.path;
}

std::vector<std::vector<double>> reference_log_softmax() {
  std::ifstream file(testing::test_model_path("reference/stories260K-logits-0.f32"),
                     std::ios::binary);
  std::vector<float> logits(128 * 512);
  file.read(reinterpret_cast<char*>(logits.data()),
            static_cast<std::streamsize>(logits.size() * sizeof(float)));
  EXPECT_TRUE(file) << "reference logits";
  std::vector<std::vector<double>> rows(128);
  for (size_t r = 0; r < rows.size(); ++r) {
    const float* row = logits.data() + r * 512;
    const double top = *std::max_element(row, row + 512);
    double sum = 0.0;
    for (int i = 0; i < 512; ++i) sum += std::exp(row[i] - top);
    for (int i = 0; i < 512; ++i) rows[r].push_back(row[i] - top - std::log(sum));
  }
  return rows;
}

}  // namespace cellm::app::http_test
