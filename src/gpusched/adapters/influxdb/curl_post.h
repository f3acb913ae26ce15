#pragma once

// The libcurl set-up the InfluxDB writer and source share (both POST to InfluxDB 1.x with the same options).

#include <curl/curl.h>

#include <chrono>
#include <string>
#include <string_view>

#include "gpusched/common/status.h"

namespace gpusched::adapters::influxdb::detail {

// curl_global_init, once per process.
common::Status CurlGlobalInit();

struct PostOptions {
  std::chrono::milliseconds timeout{5000};  // the whole request, connect included
  std::string username;                     // with password: HTTP basic authentication
  std::string password;
  const char* user_agent = "gpusched/0.1";
};

// Resets `curl` and sets it up to POST `body` (which must outlive the transfer) to `url`, appending the answer to
// `response`. The caller adds headers and performs the transfer.
void PreparePost(CURL* curl, const std::string& url, std::string_view body, const PostOptions& options,
                 std::string* response);

}  // namespace gpusched::adapters::influxdb::detail
