// The `cellm` command: the only place that picks a backend. Each subcommand is a cmd_*.cpp.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>

#include "commands.h"
#include "core/logging.h"

int main(int argc, char** argv) {
  CLI::App app{"cellm: batched text generation from one language model"};
  app.require_subcommand(1);
  // Argument errors: one line and exit status 2.
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    return std::string("cellm: ") + e.what() + "\n";
  });
  std::string log_level = "warn";
  app.add_option("--log-level", log_level, "debug, info, warn, error or off")
      ->check(CLI::IsMember({"debug", "info", "warn", "error", "off"}));
  app.parse_complete_callback([&] {
    cellm::LogLevel level;
    if (cellm::parse_log_level(log_level, &level)) cellm::set_log_level(level);
  });

  cellm::app::CommandResult result;
  cellm::app::add_inspect_command(app, result);
  cellm::app::add_generate_command(app, result);
  cellm::app::add_tokenize_commands(app, result);
  cellm::app::add_run_command(app, result);
  cellm::app::add_perplexity_command(app, result);
  cellm::app::add_export_command(app, result);
  cellm::app::add_bench_command(app, result);
  cellm::app::add_serve_command(app, result);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);  // prints help (code 0) or the one-line failure message
    return code == 0 ? 0 : 2;
  } catch (const std::exception& e) {
    // What no command turned into a Status (out of memory or threads, a library's own error):
    // one line and exit status 1, not an abort.
    std::fprintf(stderr, "cellm: %s\n", e.what());
    return 1;
  }
  return result.exit_code;
}
