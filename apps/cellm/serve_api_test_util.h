// Test helpers shared by serve_api's tests. Test code only.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "serve_api.h"

namespace cellm::app {

// The request `body` parses into; a test failure (and an empty request) when it is refused.
inline ServeRequest parse_ok(const std::string& body,
                             ServeEndpoint endpoint = ServeEndpoint::kCompletions) {
  StatusOr<ServeRequest> request = parse_serve_request(body, endpoint);
  EXPECT_TRUE(request.ok()) << body << ": " << request.status().to_string();
  return request.ok() ? std::move(request).value() : ServeRequest{};
}

// `body` is refused as an invalid argument whose message holds `expected`.
inline void expect_refused(const std::string& body, const std::string& expected,
                           ServeEndpoint endpoint = ServeEndpoint::kCompletions) {
  const StatusOr<ServeRequest> r = parse_serve_request(body, endpoint);
  ASSERT_FALSE(r.ok()) << body;
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << body;
  EXPECT_NE(r.status().message().find(expected), std::string::npos)
      << body << " -> " << r.status().message();
}

}  // namespace cellm::app
