#include "batching/gen_config.h"

#include <cmath>
#include <string>
#include <utility>

namespace cellm {
std::string_view finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStopToken:
      return "stop_token";
    case FinishReason::kStopString:
      return "stop_string";
    case FinishReason::kFormatComplete:
      return "format_complete";
    case FinishReason::kNewTokenLimit:
      return "new_token_limit";
    case FinishReason::kCancelled:
      return "cancelled";
    case FinishReason::kFailed:
      return "failed";
  }
  return "unknown";
}

Status validate_gen_config(const GenConfig& config) {
  const SamplingParams& s = config.sampling;
  if (config.max_new_tokens < 0) {
    return invalid_argument("max_new_tokens is " + std::to_string(config.max_new_tokens) +
                            "; it must be at least 0");
  }
  if (config.min_new_tokens < 0 || config.min_new_tokens > config.max_new_tokens) {
    return invalid_argument("min_new_tokens is " + std::to_string(config.min_new_tokens) +
                            "; it must be in [0, max_new_tokens " +
                            std::to_string(config.max_new_tokens) + "]");
  }
  if (config.min_new_tokens > 0 && config.constrained()) {
    return invalid_argument(
        "min_new_tokens beside a constrained output (a JSON format or a text pattern) is not "
        "supported: the format decides where the output ends");
  }
  if (!std::isfinite(s.temperature)) return invalid_argument("temperature is not finite");
  if (s.top_k < 0) {
    return invalid_argument("top_k is " + std::to_string(s.top_k) + "; it must be at least 0");
  }
  if (!(s.top_p > 0.0f && s.top_p <= 1.0f)) {
    return invalid_argument("top_p is " + std::to_string(s.top_p) + "; it must be in (0, 1]");
  }
  if (!(s.min_p >= 0.0f && s.min_p <= 1.0f)) {
    return invalid_argument("min_p is " + std::to_string(s.min_p) + "; it must be in [0, 1]");
  }
  if (!(s.repetition_penalty > 0.0f) || !std::isfinite(s.repetition_penalty)) {
    return invalid_argument("repetition_penalty is " + std::to_string(s.repetition_penalty) +
                            "; it must be positive");
  }
  if (!std::isfinite(s.presence_penalty)) return invalid_argument("presence_penalty is not finite");
  if (!std::isfinite(s.frequency_penalty)) {
    return invalid_argument("frequency_penalty is not finite");
  }
  if (s.penalty_window < -1) {
    return invalid_argument("penalty_window is " + std::to_string(s.penalty_window) +
                            "; it must be -1 (the whole context) or at least 0");
  }
  for (const auto& [name, value] :
       {std::pair{"logprobs", s.logprobs}, std::pair{"prompt_logprobs", s.prompt_logprobs}}) {
    if (value < -1 || value > kMaxLogprobs) {
      return invalid_argument(std::string(name) + " is " + std::to_string(value) +
                              "; it must be -1 (none) or in [0, " + std::to_string(kMaxLogprobs) +
                              "]");
    }
  }
  for (const LogitBias& bias : s.logit_bias) {
    if (std::isnan(bias.bias) || bias.bias == INFINITY) {
      return invalid_argument("logit_bias of token " + std::to_string(bias.token) +
                              " is NaN or +infinity");
    }
  }
  for (size_t i = 0; i < config.stop_strings.size(); ++i) {
    if (config.stop_strings[i].empty()) {
      return invalid_argument("stop_strings[" + std::to_string(i) + "] is empty");
    }
  }
  return ok_status();
}

}  // namespace cellm
