#include "batching/stop_matcher.h"

#include <algorithm>
#include <string_view>

#include "core/check.h"

namespace cellm {

StopMatcher::StopMatcher(std::vector<int32_t> stop_tokens, std::vector<std::string> stop_strings,
                         std::unique_ptr<TextStream> text, int32_t min_tokens)
    : stop_tokens_(std::move(stop_tokens)),
      stop_strings_(std::move(stop_strings)),
      text_(std::move(text)),
      min_tokens_(min_tokens) {
  std::sort(stop_tokens_.begin(), stop_tokens_.end());
  stop_tokens_.erase(std::unique(stop_tokens_.begin(), stop_tokens_.end()), stop_tokens_.end());
  CELLM_CHECK(text_ != nullptr || stop_strings_.empty()) << "stop strings without a TextStream";
  for (const std::string& stop : stop_strings_) CELLM_CHECK(!stop.empty()) << "empty stop string";
}

size_t StopMatcher::num_held_back() const {
  size_t held = 0;
  const std::string_view text(held_);
  for (const std::string& stop : stop_strings_) {
    // The longest proper prefix of `stop` that `text` ends with.
    for (size_t k = std::min(stop.size() - 1, text.size()); k > held; --k) {
      if (text.substr(text.size() - k) == std::string_view(stop).substr(0, k)) {
        held = k;
        break;
      }
    }
  }
  return held;
}

StopMatcher::Step StopMatcher::push(int32_t token) {
  CELLM_CHECK(!finished_) << "StopMatcher::push after the generation ended";
  Step step;
  if (text_ != nullptr) held_ += text_->append(token);
  if (std::binary_search(stop_tokens_.begin(), stop_tokens_.end(), token)) {
    step.outcome = Outcome::kStopToken;
    step.text = finish();
    return step;
  }
  size_t match = std::string::npos;
  // Within the first min_tokens_ tokens every match is shown; held_ keeps only a tail shorter
  // than any stop string, so no match made then is found later.
  if (++num_tokens_ > min_tokens_) {
    for (const std::string& stop : stop_strings_) match = std::min(match, held_.find(stop));
  }
  if (match != std::string::npos) {
    step.outcome = Outcome::kStopString;
    step.text = held_.substr(0, match);
    held_.clear();
    finished_ = true;
    return step;
  }
  const size_t emit = held_.size() - num_held_back();
  step.text = held_.substr(0, emit);
  held_.erase(0, emit);
  return step;
}

std::string StopMatcher::finish() {
  if (finished_) return {};
  finished_ = true;
  std::string rest = std::move(held_);
  held_.clear();
  if (text_ != nullptr) rest += text_->finish();
  // A stop string the last held bytes complete is cut too (past the first min_tokens_ tokens).
  size_t match = std::string::npos;
  if (num_tokens_ > min_tokens_) {
    for (const std::string& stop : stop_strings_) match = std::min(match, rest.find(stop));
  }
  if (match != std::string::npos) rest.resize(match);
  return rest;
}

}  // namespace cellm
