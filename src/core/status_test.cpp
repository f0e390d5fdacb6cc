#include "core/status.h"

#include <gtest/gtest.h>

#include <memory>

namespace cellm {
namespace {

StatusOr<int> parse_positive(int x) {
  if (x <= 0) return invalid_argument("value " + std::to_string(x) + " is not positive");
  return x;
}

StatusOr<int> doubled(int x) {
  CELLM_ASSIGN_OR_RETURN(int value, parse_positive(x));
  return value * 2;
}

Status check_both(int a, int b) {
  CELLM_RETURN_IF_ERROR(parse_positive(a).status());
  CELLM_RETURN_IF_ERROR(parse_positive(b).status());
  return ok_status();
}

TEST(StatusTest, DefaultIsOkAndPrintsOk) {
  Status status;
  EXPECT_TRUE(status.ok());
  EXPECT_EQ(status.to_string(), "OK");
}

TEST(StatusTest, ErrorCarriesCodeAndMessage) {
  Status status = data_loss("truncated header at offset 12");
  EXPECT_FALSE(status.ok());
  EXPECT_EQ(status.code(), StatusCode::kDataLoss);
  EXPECT_EQ(status.to_string(), "malformed data: truncated header at offset 12");
}

TEST(StatusTest, WithContextPrefixesTheMessageButKeepsTheCode) {
  Status status = not_found("tensor 'output.weight'").with_context("model.gguf");
  EXPECT_EQ(status.code(), StatusCode::kNotFound);
  EXPECT_EQ(status.message(), "model.gguf: tensor 'output.weight'");
  EXPECT_TRUE(ok_status().with_context("x").ok());
}

TEST(StatusTest, AssignOrReturnPropagatesTheFirstError) {
  EXPECT_EQ(*doubled(4), 8);
  StatusOr<int> bad = doubled(-1);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "value -1 is not positive");
}

TEST(StatusTest, ReturnIfErrorStopsAtTheFirstFailure) {
  EXPECT_TRUE(check_both(1, 2).ok());
  EXPECT_EQ(check_both(1, -2).message(), "value -2 is not positive");
  EXPECT_EQ(check_both(-1, -2).message(), "value -1 is not positive");
}

TEST(StatusTest, StatusOrHoldsMoveOnlyValues) {
  StatusOr<std::unique_ptr<int>> holder = std::make_unique<int>(7);
  ASSERT_TRUE(holder.ok());
  std::unique_ptr<int> taken = std::move(holder).value();
  EXPECT_EQ(*taken, 7);
}

TEST(StatusDeathTest, ValueOfAnErrorAbortsWithTheError) {
  StatusOr<int> bad = invalid_argument("no value here");
  EXPECT_DEATH((void)bad.value(), "no value here");
}

}  // namespace
}  // namespace cellm
