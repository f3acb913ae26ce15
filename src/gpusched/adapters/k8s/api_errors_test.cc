#include "gpusched/adapters/k8s/api_errors.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gpusched/adapters/k8s/api_client.h"

namespace gpusched::adapters::k8s {
namespace {

using common::StatusCode;
using ::testing::HasSubstr;

std::string StatusBody(int code, const std::string& reason, const std::string& message) {
  return R"({"kind":"Status","apiVersion":"v1","status":"Failure","message":")" + message + R"(","reason":")" + reason +
         R"(","code":)" + std::to_string(code) + "}";
}

struct MappingCase {
  std::string name;
  long http_code;
  std::string reason;
  StatusCode want;
};

TEST(ApiErrorsTest, MapsHttpCodes) {
  const std::vector<MappingCase> cases = {
      {.name = "bad request", .http_code = 400, .reason = "BadRequest", .want = StatusCode::kInvalidArgument},
      {.name = "invalid object", .http_code = 422, .reason = "Invalid", .want = StatusCode::kInvalidArgument},
      {.name = "no credentials", .http_code = 401, .reason = "Unauthorized", .want = StatusCode::kUnauthenticated},
      {.name = "rbac", .http_code = 403, .reason = "Forbidden", .want = StatusCode::kPermissionDenied},
      {.name = "missing", .http_code = 404, .reason = "NotFound", .want = StatusCode::kNotFound},
      {.name = "stale rv", .http_code = 409, .reason = "Conflict", .want = StatusCode::kAborted},
      {.name = "create of existing", .http_code = 409, .reason = "AlreadyExists", .want = StatusCode::kAlreadyExists},
      {.name = "expired", .http_code = 410, .reason = "Expired", .want = StatusCode::kFailedPrecondition},
      {.name = "throttled", .http_code = 429, .reason = "TooManyRequests", .want = StatusCode::kUnavailable},
      {.name = "server bug", .http_code = 500, .reason = "InternalError", .want = StatusCode::kUnavailable},
      {.name = "overloaded", .http_code = 503, .reason = "ServiceUnavailable", .want = StatusCode::kUnavailable},
      {.name = "odd code", .http_code = 418, .reason = "", .want = StatusCode::kInternal},
  };
  for (const MappingCase& c : cases) {
    const common::Status s = StatusFromHttp("PATCH", "/api/v1/nodes/n1", c.http_code, StatusBody(0, c.reason, "boom"));
    EXPECT_EQ(s.code(), c.want) << c.name << ": " << s;
    EXPECT_THAT(s.message(), HasSubstr("PATCH /api/v1/nodes/n1: HTTP " + std::to_string(c.http_code))) << c.name;
    EXPECT_THAT(s.message(), HasSubstr("boom")) << c.name;
  }
}

TEST(ApiErrorsTest, MessageCarriesServerStatusMessage) {
  const common::Status s =
      StatusFromHttp("POST", "/api/v1/namespaces/ns/pods/p/binding", 409,
                     StatusBody(409, "Conflict",
                                "Operation cannot be fulfilled on pods/binding \\\"p\\\": pod p is already assigned"));
  EXPECT_EQ(s.code(), StatusCode::kAborted);
  EXPECT_EQ(s.message(),
            "POST /api/v1/namespaces/ns/pods/p/binding: HTTP 409 Conflict: Operation cannot be fulfilled on "
            "pods/binding \"p\": pod p is already assigned");
}

TEST(ApiErrorsTest, NonStatusBodies) {
  EXPECT_EQ(StatusFromHttp("GET", "/x", 502, "upstream connect error").message(),
            "GET /x: HTTP 502 Bad Gateway: upstream connect error");
  EXPECT_EQ(StatusFromHttp("GET", "/x", 404, "").message(), "GET /x: HTTP 404 Not Found");
  // JSON that is not a Status adds nothing.
  EXPECT_EQ(StatusFromHttp("GET", "/x", 500, R"({"kind":"Pod"})").message(), "GET /x: HTTP 500 Internal Server Error");
}

TEST(ApiErrorsTest, Transport) {
  const common::Status timeout = StatusFromTransport("GET", "/api/v1/pods", true, "Timeout was reached");
  EXPECT_EQ(timeout.code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(timeout.message(), "GET /api/v1/pods: Timeout was reached");
  EXPECT_EQ(StatusFromTransport("GET", "/", false, "Couldn't connect to server").code(), StatusCode::kUnavailable);
  EXPECT_TRUE(IsRetryable(timeout));
  EXPECT_FALSE(IsRetryable(common::NotFound("x")));
}

TEST(ApiErrorsTest, UrlEncode) {
  EXPECT_EQ(UrlEncode("spec.nodeName=,status.phase!=Failed"), "spec.nodeName%3D%2Cstatus.phase%21%3DFailed");
  EXPECT_EQ(UrlEncode("a-b_c.d~e"), "a-b_c.d~e");
}

}  // namespace
}  // namespace gpusched::adapters::k8s

namespace gpusched::adapters::k8s {
namespace {

TEST(DescribeApiFailureTest, NamesTheServerAndWhetherItAnswered) {
  EXPECT_EQ(DescribeApiFailure(StatusFromTransport("GET", "/api/v1/pods", false, "Couldn't connect to server"),
                               "https://10.0.0.1:6443"),
            "cannot reach the API server at https://10.0.0.1:6443: GET /api/v1/pods: Couldn't connect to server");
  EXPECT_EQ(DescribeApiFailure(StatusFromTransport("GET", "/version", true, "Timeout was reached"), "https://k"),
            "cannot reach the API server at https://k: GET /version: Timeout was reached");
  // A 503 is an answer: the server was reached.
  EXPECT_EQ(DescribeApiFailure(StatusFromHttp("GET", "/api/v1/pods", 503, ""), "https://k")
                .rfind("the API server at https://k answered: GET /api/v1/pods: HTTP 503", 0),
            0u);
  EXPECT_EQ(DescribeApiFailure(StatusFromHttp("GET", "/api/v1/secrets/x", 403, ""), "https://k")
                .rfind("the API server at https://k answered: GET /api/v1/secrets/x: HTTP 403", 0),
            0u);
}

}  // namespace
}  // namespace gpusched::adapters::k8s
