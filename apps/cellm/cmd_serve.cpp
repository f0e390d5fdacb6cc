// `cellm serve`: the engine behind an OpenAI-compatible HTTP server (serve_http.h) until SIGINT or
// SIGTERM. Prints one line when it listens ("cellm serve: listening on http://HOST:PORT ...", on
// stdout, flushed: with --port 0 it names the port the system chose) and a metrics summary when
// it stops. Bad arguments: one line on stderr, exit status 2; a failure (the model, the port):
// one line, exit status 1. Built only with cpp-httplib (CELLM_HAVE_HTTP); without it the command
// exists and says so.
#include <fmt/format.h>
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <thread>

#include "batching/runner.h"
#include "cmd_engine.h"
#include "cmd_run_report.h"
#include "cmd_text.h"
#include "commands.h"
#include "serve_reasoning.h"
#ifdef CELLM_HAVE_HTTP
#include "serve_http.h"
#endif

namespace cellm::app {
namespace {

struct ServeFlags {
  std::string model;
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string model_name;  // empty: the model file's name without its extension
  int32_t max_concurrent = kUnset;
  bool no_prefix_reuse = false;
  std::string api_key;  // empty: none
  std::string reasoning_parser = "none";
  EngineFlags engine;
};

constexpr int kFailure = 1;
constexpr int kBadArguments = 2;

int report_error(const Status& status, int exit_code) {
  std::cerr << "cellm serve: " << status.message() << "\n";
  return exit_code;
}

Status check_flags(const ServeFlags& f) {
  if (f.port < 0 || f.port > 65535) {
    return invalid_argument(fmt::format("--port is {}; it must be in [0, 65535]", f.port));
  }
  if (f.max_concurrent != kUnset && f.max_concurrent < 1) {
    return invalid_argument(
        fmt::format("--max-concurrent is {}; it must be at least 1", f.max_concurrent));
  }
  if (!reasoning_parser_from_name(f.reasoning_parser)) {
    return invalid_argument(fmt::format(
        "--reasoning-parser is '{}'; it must be qwen3, deepseek_r1 or none", f.reasoning_parser));
  }
  return check_engine_flags(f.engine);
}

#ifdef CELLM_HAVE_HTTP
int serve_command(const ServeFlags& f) {
  if (const Status status = check_flags(f); !status.ok()) {
    return report_error(status, kBadArguments);
  }
  // SIGINT and SIGTERM go to one waiting thread only: blocked here, before any thread starts.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  StatusOr<Engine> engine = load_engine(f.model, f.engine);
  if (!engine.ok()) {
    const bool bad_flags = engine.status().code() == StatusCode::kInvalidArgument;
    return report_error(engine.status(), bad_flags ? kBadArguments : kFailure);
  }
  const int32_t max_sessions = engine->limits.max_sessions;
  if (f.max_concurrent != kUnset && f.max_concurrent > max_sessions) {
    return report_error(invalid_argument(fmt::format(
                            "--max-concurrent is {}, above the {} sessions the engine holds "
                            "(--max-sessions)",
                            f.max_concurrent, max_sessions)),
                        kBadArguments);
  }
  const TextCodec codec = TextCodec::from_program(*engine->program);
  RunnerOptions runner_options = codec.runner_options();
  runner_options.prefix_reuse.enabled = !f.no_prefix_reuse;
  Runner runner(*engine->executor, DecodeFirstScheduler(engine->scheduler), runner_options);

  ServeOptions options;
  options.model_name =
      f.model_name.empty() ? std::filesystem::path(f.model).stem().string() : f.model_name;
  options.max_concurrent_generations =
      f.max_concurrent != kUnset ? f.max_concurrent : std::min<int32_t>(max_sessions, 256);
  options.api_key = f.api_key;
  options.reasoning_parser = *reasoning_parser_from_name(f.reasoning_parser);  // checked
  HttpServer server(runner, codec, engine->limits, options);
  StatusOr<int> port = server.bind(f.host, f.port);
  if (!port.ok()) return report_error(port.status(), kFailure);
  std::cout << fmt::format(
                   "cellm serve: listening on http://{}:{} (model '{}', backend {}: {}, {} "
                   "generations at once, {} positions per session{})",
                   f.host, *port, options.model_name, engine->backend, engine->backend_detail,
                   options.max_concurrent_generations, engine->limits.max_session_tokens,
                   options.api_key.empty() ? "" : ", API key required")
            << std::endl;

  std::thread signal_thread([&server, stop_signals] {
    int signal_number = 0;
    sigwait(&stop_signals, &signal_number);
    server.stop();
  });
  const Status served = server.serve();
  pthread_kill(signal_thread.native_handle(), SIGTERM);  // a no-op wait when a signal came first
  signal_thread.join();
  runner.shutdown();
  std::cout << "cellm serve: stopped\n" << run_summary_text(runner.metrics(), 0) << std::flush;
  if (!served.ok()) return report_error(served, kFailure);
  return 0;
}
#else
int serve_command(const ServeFlags& f) {
  if (const Status status = check_flags(f); !status.ok()) {
    return report_error(status, kBadArguments);
  }
  return report_error(unimplemented("this cellm was built without cpp-httplib (Debian's "
                                    "libcpp-httplib-dev); rebuild with it to serve HTTP"),
                      kFailure);
}
#endif

}  // namespace

void add_serve_command(CLI::App& app, CommandResult& result) {
  auto f = std::make_shared<ServeFlags>();
  CLI::App* c = app.add_subcommand(
      "serve", "Serve the model over HTTP (OpenAI-compatible completions and chat completions)");
  c->add_option("--model", f->model, "Program or GGUF model file")->required();
  c->add_option("--host", f->host, "Address to listen on (127.0.0.1)");
  c->add_option("--port", f->port, "Port to listen on; 0 picks a free one (8080)");
  c->add_option("--model-name", f->model_name,
                "The model's name in requests and responses (the file's name)");
  c->add_option("--max-concurrent", f->max_concurrent,
                "Generations run at once; more requests wait (the sessions the engine holds, at "
                "most 256)");
  add_prefix_reuse_flag(*c, f->no_prefix_reuse);
  if (const char* key = std::getenv("CELLM_API_KEY")) f->api_key = key;
  c->add_option("--reasoning-parser", f->reasoning_parser,
                "Chat answers' thinking as reasoning_content: qwen3 (Qwen3, QwQ: an answer that "
                "opens <think>), deepseek_r1 (DeepSeek-R1 and distills: every answer begins "
                "thinking), none (the default)")
      ->check(CLI::IsMember({"none", "qwen3", "deepseek_r1"}));
  c->add_option("--api-key", f->api_key,
                "Require \"Authorization: Bearer KEY\" on every route but /health (default: "
                "$CELLM_API_KEY; none when empty)");
  add_engine_flags(*c, f->engine);
  c->callback([f, &result] { result.exit_code = serve_command(*f); });
}

}  // namespace cellm::app
