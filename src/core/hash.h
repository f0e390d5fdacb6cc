// splitmix64: a fast, well-mixed 64-bit hash of one integer (Steele, Lea and Flood's SplitMix64
// step followed by its finalizer).
//
// For reproducible pseudo-random values that are a pure function of their inputs (the sampler's
// draws of (seed, position), test models' logits); not for security or hash tables keyed by
// untrusted input. Host and device code (the CUDA executor draws tokens with it:
// core/listed_draw.h). Thread-safety: a pure function.
#pragma once

#include <cstdint>

#include "core/host_device.h"

namespace cellm {

CELLM_HOST_DEVICE constexpr uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

}  // namespace cellm
