#pragma once

// What the InfluxDB writer and source share: both POST to InfluxDB 1.x through net::HttpClient with the same
// options, check the same endpoint settings, and map transport failures and HTTP errors to the same Status codes.

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "gpusched/common/status.h"
#include "gpusched/net/http_client.h"

namespace gpusched::adapters::influxdb::detail {

// InvalidArgument unless `url` is http(s)://..., `database` is set and `timeout` is positive.
common::Status ValidateEndpoint(const std::string& url, const std::string& database, std::chrono::milliseconds timeout);

// The client of one InfluxDB endpoint: `timeout` bounds each whole request, connect included; with a username,
// HTTP basic authentication.
common::Result<std::unique_ptr<net::HttpClient>> Connect(const std::string& url, std::chrono::milliseconds timeout,
                                                         const std::string& username, const std::string& password);

// POSTs `body` to `target` (path and query) with the header `content_type` (e.g. "Content-Type: text/plain"),
// leaving the answer in `response`, and returns the HTTP status. A transport failure is DeadlineExceeded (timed out)
// or Unavailable, with the message `what` + the client's reason.
common::Result<long> Post(net::HttpClient& client, const std::string& target, std::string_view body,
                          const char* content_type, std::string& response, const std::string& what);

// An HTTP error status as a Status whose message is `what` + "HTTP <code> " + the shortened body: 400
// InvalidArgument, 401 and 403 PermissionDenied, 404 NotFound, anything else Unavailable.
common::Status HttpError(long code, const std::string& what, const std::string& body);

}  // namespace gpusched::adapters::influxdb::detail
