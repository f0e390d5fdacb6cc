#include "tokenizer/streaming_detokenizer.h"

#include <algorithm>

#include "fmt/format.h"
#include "tokenizer/utf8.h"

namespace cellm {

using tokenizer_internal::kReplacementCharacter;
using tokenizer_internal::scan_utf8;
using tokenizer_internal::Utf8Scan;

StreamingDetokenizer::StreamingDetokenizer(const Tokenizer& tokenizer, DecodeOptions options,
                                           std::vector<std::string> stop_strings)
    : tokenizer_(tokenizer), options_(options) {
  for (std::string& stop : stop_strings) {
    if (!stop.empty()) stop_strings_.push_back(std::move(stop));
  }
}

StatusOr<std::string> StreamingDetokenizer::push(int32_t id) {
  if (id < 0 || id >= tokenizer_.vocab_size()) {
    return invalid_argument(fmt::format("token id {} is out of range: the vocabulary has {} tokens",
                                        id, tokenizer_.vocab_size()));
  }
  if (stopped_) return std::string();
  const int32_t single[1] = {id};
  DecodeOptions options = options_;
  options.strip_leading_space = options_.strip_leading_space && first_token_;
  first_token_ = false;
  CELLM_ASSIGN_OR_RETURN(const std::string piece, tokenizer_.decode(single, options));
  pending_bytes_.append(piece);
  drain_bytes(/*at_end=*/false);
  return release_text(/*at_end=*/false);
}

std::string StreamingDetokenizer::finish() {
  if (stopped_) return std::string();
  drain_bytes(/*at_end=*/true);
  return release_text(/*at_end=*/true);
}

void StreamingDetokenizer::drain_bytes(bool at_end) {
  size_t i = 0;
  while (i < pending_bytes_.size()) {
    size_t length = 0;
    uint32_t cp = 0;
    const std::string_view rest = std::string_view(pending_bytes_).substr(i);
    const Utf8Scan scan = scan_utf8(rest, &length, &cp);
    if (scan == Utf8Scan::kValid) {
      held_text_.append(rest.substr(0, length));
      i += length;
    } else if (scan == Utf8Scan::kIncomplete && !at_end) {
      break;  // wait for the next token's bytes
    } else {
      held_text_.append(kReplacementCharacter);
      ++i;
    }
  }
  pending_bytes_.erase(0, i);
}

std::string StreamingDetokenizer::release_text(bool at_end) {
  // A stop string that appears: everything before it is final, the rest is dropped.
  size_t first_stop = std::string::npos;
  for (const std::string& stop : stop_strings_) {
    const size_t at = held_text_.find(stop);
    if (at < first_stop) {
      first_stop = at;
      matched_stop_ = stop;
    }
  }
  if (first_stop != std::string::npos) {
    stopped_ = true;
    std::string out = held_text_.substr(0, first_stop);
    held_text_.clear();
    pending_bytes_.clear();
    return out;
  }
  // Hold back the longest tail that could still grow into a stop string.
  size_t keep = 0;
  if (!at_end) {
    for (const std::string& stop : stop_strings_) {
      const size_t longest = std::min(stop.size() - 1, held_text_.size());
      for (size_t n = longest; n > keep; --n) {
        if (held_text_.compare(held_text_.size() - n, n, stop, 0, n) == 0) {
          keep = n;
          break;
        }
      }
    }
  }
  std::string out = held_text_.substr(0, held_text_.size() - keep);
  held_text_.erase(0, held_text_.size() - keep);
  return out;
}

}  // namespace cellm
