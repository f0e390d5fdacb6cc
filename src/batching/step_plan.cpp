#include "batching/step_plan.h"

#include <algorithm>
#include <string>

#include "core/check.h"

namespace cellm {

const char* slice_method_name(SliceMethod method) {
  return method == SliceMethod::kPrefill ? "prefill" : "decode";
}

Status validate_slice_params(int32_t max_step_tokens, int32_t min_prefill_chunk,
                             std::span<const int32_t> decode_widths) {
  if (min_prefill_chunk < 1) {
    return invalid_argument("min_prefill_chunk is " + std::to_string(min_prefill_chunk) +
                            "; it must be at least 1");
  }
  if (max_step_tokens < min_prefill_chunk) {
    return invalid_argument("max_step_tokens (" + std::to_string(max_step_tokens) +
                            ") is below min_prefill_chunk (" + std::to_string(min_prefill_chunk) +
                            ")");
  }
  if (decode_widths.empty() || decode_widths[0] != 1) {
    return invalid_argument("decode_widths must start at 1");
  }
  for (size_t i = 1; i < decode_widths.size(); ++i) {
    if (decode_widths[i] <= decode_widths[i - 1]) {
      return invalid_argument("decode_widths must be strictly ascending; " +
                              std::to_string(decode_widths[i]) + " follows " +
                              std::to_string(decode_widths[i - 1]));
    }
  }
  if (decode_widths.back() > max_step_tokens) {
    return invalid_argument("decode width " + std::to_string(decode_widths.back()) +
                            " is wider than max_step_tokens (" + std::to_string(max_step_tokens) +
                            ")");
  }
  return ok_status();
}

std::vector<SliceCall> plan_slices(int32_t total, int32_t max_step_tokens,
                                   int32_t min_prefill_chunk,
                                   std::span<const int32_t> decode_widths) {
  const Status params = validate_slice_params(max_step_tokens, min_prefill_chunk, decode_widths);
  CELLM_CHECK(params.ok()) << "plan_slices: " << params.message();
  CELLM_CHECK_GE(total, 0) << "plan_slices of a negative token count";
  std::vector<SliceCall> calls;
  const int32_t widest_decode = decode_widths.back();
  for (int32_t begin = 0; begin < total;) {
    const int32_t slice = std::min(max_step_tokens, total - begin);
    if (slice >= min_prefill_chunk) {
      calls.push_back({SliceMethod::kPrefill, begin, slice, slice});
      begin += slice;
      continue;
    }
    // Fewest calls: fill the widest decode width, then one call for the rest, padded up.
    for (int32_t left = slice; left > 0;) {
      const int32_t n = std::min(left, widest_decode);
      const int32_t width = *std::lower_bound(decode_widths.begin(), decode_widths.end(), n);
      calls.push_back({SliceMethod::kDecode, begin, n, width});
      begin += n;
      left -= n;
    }
  }
  return calls;
}

}  // namespace cellm
