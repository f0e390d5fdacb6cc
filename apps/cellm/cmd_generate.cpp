// `cellm generate`: not built yet (placeholder so the command list is stable).
#include <iostream>

#include "commands.h"

namespace cellm::app {

void add_generate_command(CLI::App& app, CommandResult& result) {
  CLI::App* command = app.add_subcommand("generate", "(not built yet)");
  command->allow_extras();
  command->callback([&result] {
    std::cerr << "cellm generate: not built yet\n";
    result.exit_code = 1;
  });
}

}  // namespace cellm::app
