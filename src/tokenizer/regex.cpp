#include "tokenizer/regex.h"

#include <pcre2.h>

#include "fmt/format.h"

namespace cellm::tokenizer_internal {
namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR message[256];
  pcre2_get_error_message(code, message, sizeof(message));
  return reinterpret_cast<const char*>(message);
}

}  // namespace

struct Regex::Code {
  std::string pattern;
  pcre2_code* code = nullptr;
  int num_groups = 0;

  Code() = default;
  Code(const Code&) = delete;
  Code& operator=(const Code&) = delete;
  ~Code() { pcre2_code_free(code); }
};

StatusOr<Regex> Regex::compile(std::string_view pattern) {
  auto code = std::make_shared<Code>();
  code->pattern = std::string(pattern);
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  code->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                             PCRE2_UTF | PCRE2_UCP, &error_code, &error_offset, nullptr);
  if (code->code == nullptr) {
    return invalid_argument(fmt::format("regex '{}': {} at offset {}", pattern,
                                        pcre2_message(error_code), error_offset));
  }
  // JIT only speeds matching up; a PCRE2 built without it still matches.
  pcre2_jit_compile(code->code, PCRE2_JIT_COMPLETE);
  uint32_t num_groups = 0;
  pcre2_pattern_info(code->code, PCRE2_INFO_CAPTURECOUNT, &num_groups);
  code->num_groups = static_cast<int>(num_groups);
  Regex regex;
  regex.code_ = std::move(code);
  return regex;
}

const std::string& Regex::pattern() const { return code_->pattern; }

Regex::Matcher::Matcher(const Regex& regex)
    : regex_(regex), match_data_(pcre2_match_data_create_from_pattern(regex.code_->code, nullptr)) {
  CELLM_CHECK(match_data_ != nullptr) << "pcre2_match_data_create_from_pattern: out of memory";
}

Regex::Matcher::~Matcher() { pcre2_match_data_free(static_cast<pcre2_match_data*>(match_data_)); }

StatusOr<bool> Regex::Matcher::find(std::string_view subject, size_t start, RegexMatch* match) {
  auto* data = static_cast<pcre2_match_data*>(match_data_);
  const auto run = [&](uint32_t options) {
    return pcre2_match(regex_.code_->code, reinterpret_cast<PCRE2_SPTR>(subject.data()),
                       subject.size(), start, PCRE2_NO_UTF_CHECK | options, data, nullptr);
  };
  int rc = run(0);
  // The JIT keeps a frame per repetition of a group on its 32 KB stack, so a long run of text
  // (64 KB of U+FFFD for BERT's pattern) overflows it; the interpreter keeps its frames on the
  // heap and matches the same.
  if (rc == PCRE2_ERROR_JIT_STACKLIMIT) rc = run(PCRE2_NO_JIT);
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  if (rc < 0) {
    return resource_exhausted(
        fmt::format("regex '{}': {}", regex_.code_->pattern, pcre2_message(rc)));
  }
  const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(data);
  match->begin = ovector[0];
  match->end = ovector[1];
  match->group = 0;
  for (int g = 1; g < rc; ++g) {
    if (ovector[2 * static_cast<size_t>(g)] != PCRE2_UNSET) {
      match->group = g;
      break;
    }
  }
  return true;
}

}  // namespace cellm::tokenizer_internal
