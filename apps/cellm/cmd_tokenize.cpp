// `cellm tokenize`: not built yet (placeholder so the command list is stable).
#include <iostream>

#include "commands.h"

namespace cellm::app {

void add_tokenize_commands(CLI::App& app, CommandResult& result) {
  CLI::App* command = app.add_subcommand("tokenize", "(not built yet)");
  command->allow_extras();
  command->callback([&result] {
    std::cerr << "cellm tokenize: not built yet\n";
    result.exit_code = 1;
  });
}

}  // namespace cellm::app
