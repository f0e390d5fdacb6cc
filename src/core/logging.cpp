#include "core/logging.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

namespace cellm {
namespace {

LogLevel initial_level() {
  LogLevel level = LogLevel::kInfo;
  if (const char* env = std::getenv("CELLM_LOG_LEVEL")) parse_log_level(env, &level);
  return level;
}

std::atomic<LogLevel>& level_storage() {
  static std::atomic<LogLevel> level{initial_level()};
  return level;
}

std::mutex& output_mutex() {
  static std::mutex mutex;
  return mutex;
}

const char* level_tag(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "D";
    case LogLevel::kInfo:
      return "I";
    case LogLevel::kWarn:
      return "W";
    case LogLevel::kError:
      return "E";
    case LogLevel::kOff:
      break;
  }
  return "?";
}

double seconds_since_start() {
  static const auto start = std::chrono::steady_clock::now();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

LogLevel log_level() { return level_storage().load(std::memory_order_relaxed); }

void set_log_level(LogLevel level) { level_storage().store(level, std::memory_order_relaxed); }

bool parse_log_level(std::string_view name, LogLevel* level) {
  if (name == "debug") {
    *level = LogLevel::kDebug;
  } else if (name == "info") {
    *level = LogLevel::kInfo;
  } else if (name == "warn") {
    *level = LogLevel::kWarn;
  } else if (name == "error") {
    *level = LogLevel::kError;
  } else if (name == "off") {
    *level = LogLevel::kOff;
  } else {
    return false;
  }
  return true;
}

namespace internal {

LogMessage::LogMessage(LogLevel level, const char* file, int line) : level_(level) {
  std::string_view path(file);
  if (auto slash = path.rfind('/'); slash != std::string_view::npos) path.remove_prefix(slash + 1);
  char prefix[64];
  std::snprintf(prefix, sizeof(prefix), "[%s %9.3f ", level_tag(level), seconds_since_start());
  stream_ << prefix << path << ":" << line << "] ";
}

LogMessage::~LogMessage() {
  (void)level_;
  std::string text = stream_.str();
  text += '\n';
  std::lock_guard<std::mutex> lock(output_mutex());
  std::fwrite(text.data(), 1, text.size(), stderr);
}

}  // namespace internal
}  // namespace cellm
