// The HTTP server's vLLM sampling extras end to end (stories260K on the CPU,
// serve_http_test_util.h): stop_token_ids end a greedy completion where the independent
// reference's tokens first reach one; min_tokens keeps it from them until then, the reference's
// next best token taken where it is banned.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "serve_http_test_util.h"

namespace cellm::app {
namespace {

using namespace http_test;

TEST(ServeHttpTest, StopTokenIdsEndAGenerationAndMinTokensHoldsThemOffUntilThen) {
  Served served;
  const Json c = reference_cases()[0];
  const std::vector<int32_t> reference = head(c.at("generated_tokens"), 40);
  // The first token whose first occurrence is at index >= 4.
  size_t stop_at = 4;
  while (std::find(reference.begin(), reference.begin() + static_cast<std::ptrdiff_t>(stop_at),
                   reference[stop_at]) !=
         reference.begin() + static_cast<std::ptrdiff_t>(stop_at)) {
    ++stop_at;
  }
  ASSERT_LT(stop_at, reference.size());
  const int32_t stop = reference[stop_at];

  Json request = greedy_request(c, 30);
  request["stop_token_ids"] = {stop};
  const Reply stopped = post(served, "/v1/completions", request);
  ASSERT_EQ(stopped.status, 200) << stopped.body.dump();
  const Json& choice = stopped.body.at("choices").at(0);
  EXPECT_EQ(choice.at("finish_reason"), "stop");
  EXPECT_EQ(choice.at("token_ids"), Json(head(c.at("generated_tokens"), stop_at + 1)));

  request["min_tokens"] = static_cast<int>(stop_at) + 3;
  const Reply held = post(served, "/v1/completions", request);
  ASSERT_EQ(held.status, 200) << held.body.dump();
  const std::vector<int32_t> tokens = held.body.at("choices").at(0).at("token_ids");
  ASSERT_GE(tokens.size(), stop_at + 3);
  EXPECT_EQ(std::vector<int32_t>(tokens.begin(), tokens.begin() + stop_at),
            head(c.at("generated_tokens"), stop_at));
  // At stop_at the reference's best is banned: its next best comes instead.
  const std::vector<std::vector<double>> rows = reference_log_softmax();
  std::vector<double> row = rows[stop_at];
  row[static_cast<size_t>(stop)] = -1e300;
  EXPECT_EQ(tokens[stop_at], std::max_element(row.begin(), row.end()) - row.begin());
  for (size_t i = 0; i < stop_at + 3; ++i) EXPECT_NE(tokens[i], stop) << "token " << i;

  request["min_tokens"] = 31;
  const Reply refused = post(served, "/v1/completions", request);
  EXPECT_EQ(refused.status, 400);
  EXPECT_NE(refused.body.dump().find("above the 30 max_tokens"), std::string::npos)
      << refused.body.dump();
  request["min_tokens"] = 0;
  request["stop_token_ids"] = {100000};
  const Reply outside = post(served, "/v1/completions", request);
  EXPECT_EQ(outside.status, 400);
  EXPECT_NE(outside.body.dump().find("outside the vocabulary"), std::string::npos)
      << outside.body.dump();
}

}  // namespace
}  // namespace cellm::app
