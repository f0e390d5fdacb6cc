// Runs the `cellm` binary for the end-to-end CLI suites (tests/runtime_cli_test.cpp on the CPU,
// src/backends/cuda/cuda_cli_test.cpp on a GPU): arguments in, exit status, stdout and stderr
// out. The binary is $CELLM_BINARY, else the first `apps/cellm/cellm` found in a folder above the
// test binary (the build tree's layout); a missing binary is a test failure saying so. Header-only:
// each suite is its own binary. Thread-safety: test code, one thread.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace cellm::testing {

struct CliResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

inline std::string cellm_binary() {
  if (const char* env = std::getenv("CELLM_BINARY")) return env;
  // The build tree: <build>/apps/cellm/cellm, the test somewhere below <build>.
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe");
  for (std::filesystem::path dir = self.parent_path(); dir.has_relative_path();
       dir = dir.parent_path()) {
    const std::filesystem::path candidate = dir / "apps" / "cellm" / "cellm";
    if (std::filesystem::exists(candidate)) return candidate.string();
  }
  return (self.parent_path().parent_path() / "apps" / "cellm" / "cellm").string();
}

inline std::string slurp(const std::filesystem::path& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

inline std::string shell_quote(const std::string& arg) {
  std::string out = "'";
  for (const char c : arg) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Runs `cellm args...` through the shell with `environment` (e.g. "CUDA_VISIBLE_DEVICES=")
// prefixed to the command.
inline CliResult run_cellm(const std::vector<std::string>& args,
                           const std::string& environment = "") {
  namespace fs = std::filesystem;
  const std::string binary = cellm_binary();
  CliResult result;
  if (!fs::exists(binary)) {
    ADD_FAILURE() << "no cellm binary at " << binary << " (build the `cellm` target, or set "
                  << "CELLM_BINARY)";
    return result;
  }
  const fs::path dir = fs::temp_directory_path() / ("cellm_cli_" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::string command = environment + (environment.empty() ? "" : " ") + shell_quote(binary);
  for (const std::string& arg : args) command += " " + shell_quote(arg);
  command +=
      " >" + shell_quote((dir / "out").string()) + " 2>" + shell_quote((dir / "err").string());
  const int status = std::system(command.c_str());
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  result.out = slurp(dir / "out");
  result.err = slurp(dir / "err");
  return result;
}

// Writes `prompts` to `path` one per line, as `cellm run --prompts-file` reads them (a newline
// inside a prompt written as the two characters \n), and returns the path as a string.
inline std::string write_prompts_file(const std::filesystem::path& path,
                                      const std::vector<std::string>& prompts) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream file(path);
  for (const std::string& prompt : prompts) {
    for (const char c : prompt) file << (c == '\n' ? std::string("\\n") : std::string(1, c));
    file << "\n";
  }
  return path.string();
}

}  // namespace cellm::testing
