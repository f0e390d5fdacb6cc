#include "core/check.h"

#include <gtest/gtest.h>

namespace cellm {
namespace {

TEST(CheckTest, PassingCheckHasNoEffect) {
  int evaluated = 0;
  CELLM_CHECK(++evaluated == 1) << "never printed";
  EXPECT_EQ(evaluated, 1);
}

TEST(CheckDeathTest, FailingCheckAbortsWithConditionAndMessage) {
  EXPECT_DEATH(CELLM_CHECK(1 + 1 == 3) << "arithmetic broke: " << 42,
               "1 \\+ 1 == 3.*arithmetic broke: 42");
}

TEST(CheckDeathTest, ComparisonChecksPrintBothValues) {
  int refcount = 3;
  int owners = 2;
  EXPECT_DEATH(CELLM_CHECK_EQ(refcount, owners) << "refcount equals owners", "\\(3 == 2\\)");
}

}  // namespace
}  // namespace cellm
