#include "core/check.h"

#include <cstdio>
#include <cstdlib>
#include <string>

namespace cellm::internal {

CheckFailure::CheckFailure(const char* file, int line, const char* condition) {
  stream_ << "CELLM_CHECK failed at " << file << ":" << line << ": " << condition << ": ";
}

CheckFailure::~CheckFailure() {
  std::string text = stream_.str();
  text += '\n';
  std::fwrite(text.data(), 1, text.size(), stderr);
  std::fflush(stderr);
  std::abort();
}

}  // namespace cellm::internal
