#include "gpusched/adapters/influxdb/influx_http.h"

#include <utility>

#include "gpusched/common/redact.h"

namespace gpusched::adapters::influxdb::detail {
common::Status ValidateEndpoint(const std::string& url, const std::string& database,
                                std::chrono::milliseconds timeout) {
  if (url.rfind("http://", 0) != 0 && url.rfind("https://", 0) != 0) {
    return common::InvalidArgument("InfluxDB URL \"" + common::RedactUrl(url) +
                                   "\" must start with http:// or https://");
  }
  if (database.empty()) {
    return common::InvalidArgument("InfluxDB: no database given");
  }
  if (timeout.count() <= 0) {
    return common::InvalidArgument("InfluxDB: the timeout must be positive");
  }
  return common::Status::Ok();
}

common::Result<std::unique_ptr<net::HttpClient>> Connect(const std::string& url, std::chrono::milliseconds timeout,
                                                         const std::string& username, const std::string& password) {
  return net::HttpClient::Create(net::HttpClientOptions{.base_url = url,
                                                        .timeout = timeout,
                                                        .connect_timeout = timeout,
                                                        .basic_username = username,
                                                        .basic_password = password,
                                                        .max_idle_handles = 1});
}

common::Result<long> Post(net::HttpClient& client, const std::string& target, std::string_view body,
                          const char* content_type, std::string& response, const std::string& what) {
  net::ClientRequest request{.method = "POST", .target = target, .body = body};
  request.headers.emplace_back(content_type);
  common::Result<net::ClientResponse> answer = client.Send(request);
  if (!answer.ok()) {
    return common::Status(answer.status().code(), what + answer.status().message());
  }
  response = std::move(answer->body);
  return answer->status;
}

common::Status HttpError(long code, const std::string& what, const std::string& body) {
  const std::string message = what + "HTTP " + std::to_string(code) + " " + net::ShortenBody(body);
  switch (code) {
    case 400:
      return common::InvalidArgument(message);
    case 401:
    case 403:
      return common::PermissionDenied(message);
    case 404:
      return common::NotFound(message);
    default:
      return common::Unavailable(message);
  }
}

}  // namespace gpusched::adapters::influxdb::detail
