#pragma once

// How API-server answers become Status (k8s-gpu-protocols.md §7). Pure functions, unit-tested in api_errors_test.cc.
//
//   400, 422                  InvalidArgument
//   401                       Unauthenticated
//   403                       PermissionDenied
//   404                       NotFound
//   409, reason AlreadyExists AlreadyExists  (POST of an object that exists, e.g. a Lease another replica created)
//   409 otherwise             Aborted        (stale resourceVersion, pod already bound)
//   410                       FailedPrecondition "gone" (expired resourceVersion or continue token)
//   429, 5xx                  Unavailable    (retry later)
//   other non-2xx             Internal
// Transport failures: a timeout is DeadlineExceeded, anything else (refused connection, TLS handshake, reset)
// Unavailable. Every message holds the method, the path, the HTTP code and, when the body is a metav1.Status, its
// message: "PATCH /api/v1/nodes/n1: HTTP 409 Conflict: the object has been modified".

#include <string>
#include <string_view>

#include "gpusched/common/status.h"

namespace gpusched::adapters::k8s {

[[nodiscard]] common::Status StatusFromHttp(std::string_view method, std::string_view path, long http_code,
                                            std::string_view body);

// `timed_out` is true for curl's operation/connect timeouts; `detail` is curl's error text.
[[nodiscard]] common::Status StatusFromTransport(std::string_view method, std::string_view path, bool timed_out,
                                                 std::string_view detail);

// True for codes a caller may retry after a pause (Unavailable, DeadlineExceeded).
[[nodiscard]] bool IsRetryable(const common::Status& status);
// A failed request as a log line names it, with the server first: "cannot reach the API server at <server>:
// <message>" when no HTTP answer came (refused, reset, TLS handshake, timeout), else "the API server at <server>
// answered: <message>" (the message holds the method, path and HTTP code).
[[nodiscard]] std::string DescribeApiFailure(const common::Status& status, std::string_view server);

}  // namespace gpusched::adapters::k8s
