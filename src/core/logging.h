// Leveled logging to stderr: `CELLM_LOG(kInfo) << "loaded " << n << " tensors";`.
//
// One process-wide threshold (set_log_level, or CELLM_LOG_LEVEL=debug|info|warn|error|off in the
// environment, read once at first use). Messages below it cost one comparison. Each message is
// written whole, with its level and a monotonic timestamp, so lines from threads never interleave.
// Thread-safety: every function here may be called from any thread.
#pragma once

#include <sstream>
#include <string_view>

namespace cellm {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3, kOff = 4 };

LogLevel log_level();
void set_log_level(LogLevel level);
// Parses "debug", "info", "warn", "error" or "off"; false if the name is none of them.
bool parse_log_level(std::string_view name, LogLevel* level);

namespace internal {

class LogMessage {
 public:
  LogMessage(LogLevel level, const char* file, int line);
  LogMessage(const LogMessage&) = delete;
  LogMessage& operator=(const LogMessage&) = delete;
  ~LogMessage();

  template <typename T>
  LogMessage& operator<<(const T& value) {
    stream_ << value;
    return *this;
  }

 private:
  LogLevel level_;
  std::ostringstream stream_;
};

struct LogVoidify {
  void operator&(LogMessage&) {}
};

}  // namespace internal
}  // namespace cellm

#define CELLM_LOG(level)                            \
  (::cellm::LogLevel::level < ::cellm::log_level()) \
      ? (void)0                                     \
      : ::cellm::internal::LogVoidify() &           \
            ::cellm::internal::LogMessage(::cellm::LogLevel::level, __FILE__, __LINE__)
