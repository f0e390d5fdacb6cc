// Token ids as every layer sees them: int32 indices into the model's vocabulary.
// kNoToken means "no token": an absent special token, or an output not sampled yet.
// Thread-safety: constants.
#pragma once

#include <cstdint>

namespace cellm {

inline constexpr int32_t kNoToken = -1;

}  // namespace cellm
