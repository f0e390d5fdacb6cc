// The `cellm` command: the only place that picks a backend.
#include <CLI/CLI.hpp>

int main(int argc, char** argv) {
  CLI::App app{"cellm: batched text generation from one language model"};
  app.require_subcommand(1);
  CLI11_PARSE(app, argc, argv);
  return 0;
}
