// The subcommands of `cellm`. Each lives in its own cmd_<name>.cpp and registers itself on the
// app here; main.cpp only calls these. A command's callback stores its exit status in
// `result` (0 success, 1 failure with one clear line on stderr, 2 bad arguments).
// Thread-safety: called once, on the main thread, before parsing.
#pragma once

#include <CLI/CLI.hpp>

namespace cellm::app {

struct CommandResult {
  int exit_code = 0;
};

void add_inspect_command(CLI::App& app, CommandResult& result);
void add_generate_command(CLI::App& app, CommandResult& result);
void add_tokenize_commands(CLI::App& app, CommandResult& result);  // tokenize, detokenize
void add_run_command(CLI::App& app, CommandResult& result);
void add_perplexity_command(CLI::App& app, CommandResult& result);
void add_export_command(CLI::App& app, CommandResult& result);
void add_bench_command(CLI::App& app, CommandResult& result);
void add_serve_command(CLI::App& app, CommandResult& result);  // HTTP, with cpp-httplib

}  // namespace cellm::app
