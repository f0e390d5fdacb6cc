// plan_slices: how one step's packed tokens are cut into method calls (forwards).
//
// In order, slices of at most W (max_step_tokens) tokens; a slice of at least m
// (min_prefill_chunk) tokens is one `prefill` call of exactly its width; a shorter one runs as
// `decode` calls of static widths: one call per token when the only width is 1, otherwise as few
// calls as possible, each padded up to the smallest width that holds it (the executor fills the
// padding rows with a scratch cell and drops their logits). Pure: it knows counts, not tokens,
// sessions or cells. Called by executors once per step. Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/status.h"

namespace cellm {

enum class SliceMethod { kPrefill, kDecode };

const char* slice_method_name(SliceMethod method);  // "prefill" or "decode"

struct SliceCall {
  SliceMethod method = SliceMethod::kPrefill;
  int32_t begin = 0;       // first token of the call on the packed axis
  int32_t num_tokens = 0;  // real tokens: [begin, begin + num_tokens); 1 <= num_tokens <= width
  int32_t width = 0;       // the forward's width: num_tokens for prefill (in [m, W]); for decode
                           // the smallest decode width >= num_tokens (width - num_tokens padded)
  bool operator==(const SliceCall&) const = default;
};

// Checks the parameters plan_slices needs (as a program's metadata gives them): W >= m >= 1,
// decode widths strictly ascending, starting at 1, none above W. The message names the bad one.
Status validate_slice_params(int32_t max_step_tokens, int32_t min_prefill_chunk,
                             std::span<const int32_t> decode_widths);

// The calls covering [0, total) contiguously, in order. Requires total >= 0 and parameters that
// validate_slice_params accepts (a CELLM_CHECK otherwise: validate them once, at load).
std::vector<SliceCall> plan_slices(int32_t total, int32_t max_step_tokens,
                                   int32_t min_prefill_chunk,
                                   std::span<const int32_t> decode_widths);

}  // namespace cellm
