#pragma once

// What the InfluxDB writer and source share: both POST to InfluxDB 1.x with the same libcurl options, check the
// same endpoint settings, and map transport failures and HTTP errors to the same Status codes.

#include <curl/curl.h>

#include <chrono>
#include <string>
#include <string_view>

#include "gpusched/common/status.h"

namespace gpusched::adapters::influxdb::detail {

// curl_global_init, once per process.
common::Status CurlGlobalInit();

// InvalidArgument unless `url` is http(s)://..., `database` is set and `timeout` is positive.
common::Status ValidateEndpoint(const std::string& url, const std::string& database, std::chrono::milliseconds timeout);

struct PostOptions {
  std::chrono::milliseconds timeout{5000};  // the whole request, connect included
  std::string username;                     // with password: HTTP basic authentication
  std::string password;
  const char* user_agent = "gpusched/0.1";
};

// POSTs `body` to `url` with the header `content_type` (e.g. "Content-Type: text/plain"), appending the answer to
// `response`, and returns the HTTP status. A transport failure is DeadlineExceeded (timed out) or Unavailable, with
// the message `what` + libcurl's reason. `curl` is reset first and left without borrowed pointers.
common::Result<long> Post(CURL* curl, const std::string& url, std::string_view body, const char* content_type,
                          const PostOptions& options, std::string& response, const std::string& what);

// An InfluxDB error body ({"error":"..."}) without trailing newlines, cut to 300 characters.
std::string Shorten(std::string body);

// An HTTP error status as a Status whose message is `what` + "HTTP <code> " + the shortened body: 400
// InvalidArgument, 401 and 403 PermissionDenied, 404 NotFound, anything else Unavailable.
common::Status HttpError(long code, const std::string& what, const std::string& body);

}  // namespace gpusched::adapters::influxdb::detail
