#include "core/hash.h"

#include <gtest/gtest.h>

namespace cellm {
namespace {

TEST(HashTest, Splitmix64MatchesTheReferenceSequence) {
  // SplitMix64 seeded with 0 yields these first two outputs (the reference generator adds the
  // golden gamma to its state before each output, as splitmix64() does to its argument).
  EXPECT_EQ(splitmix64(0), 0xE220A8397B1DCDAFULL);
  EXPECT_EQ(splitmix64(0x9E3779B97F4A7C15ULL), 0x6E789E6AA1B965F4ULL);
}

}  // namespace
}  // namespace cellm
