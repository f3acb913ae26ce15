#include "gpusched/adapters/influxdb/curl_post.h"

#include <mutex>

namespace gpusched::adapters::influxdb::detail {
namespace {

size_t AppendToString(char* data, size_t size, size_t n, void* user) {
  static_cast<std::string*>(user)->append(data, size * n);
  return size * n;
}

}  // namespace

common::Status CurlGlobalInit() {
  static std::once_flag once;
  static CURLcode rc = CURLE_OK;
  std::call_once(once, [] { rc = curl_global_init(CURL_GLOBAL_DEFAULT); });
  if (rc != CURLE_OK) {
    return common::Internal(std::string("curl_global_init: ") + curl_easy_strerror(rc));
  }
  return common::Status::Ok();
}

common::Status ValidateEndpoint(const std::string& url, const std::string& database,
                                std::chrono::milliseconds timeout) {
  if (url.rfind("http://", 0) != 0 && url.rfind("https://", 0) != 0) {
    return common::InvalidArgument("InfluxDB URL \"" + url + "\" must start with http:// or https://");
  }
  if (database.empty()) {
    return common::InvalidArgument("InfluxDB: no database given");
  }
  if (timeout.count() <= 0) {
    return common::InvalidArgument("InfluxDB: the timeout must be positive");
  }
  return common::Status::Ok();
}

common::Result<long> Post(CURL* curl, const std::string& url, std::string_view body, const char* content_type,
                          const PostOptions& options, std::string& response, const std::string& what) {
  curl_easy_reset(curl);
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_POST, 1L);
  curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.data());
  curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(options.timeout.count()));
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(options.timeout.count()));
  curl_easy_setopt(curl, CURLOPT_USERAGENT, options.user_agent);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &AppendToString);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &response);
  if (!options.username.empty()) {
    curl_easy_setopt(curl, CURLOPT_HTTPAUTH, CURLAUTH_BASIC);
    curl_easy_setopt(curl, CURLOPT_USERNAME, options.username.c_str());
    curl_easy_setopt(curl, CURLOPT_PASSWORD, options.password.c_str());
  }
  curl_slist* headers = curl_slist_append(nullptr, content_type);
  headers = curl_slist_append(headers, "Expect:");  // no 100-continue round trip for larger bodies
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  char error[CURL_ERROR_SIZE] = {};
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
  const CURLcode rc = curl_easy_perform(curl);
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, nullptr);
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, nullptr);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, nullptr);
  curl_slist_free_all(headers);
  if (rc != CURLE_OK) {
    const std::string message = what + (error[0] != '\0' ? error : curl_easy_strerror(rc));
    if (rc == CURLE_OPERATION_TIMEDOUT) {
      return common::DeadlineExceeded(message);
    }
    return common::Unavailable(message);
  }
  long code = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &code);
  return code;
}

std::string Shorten(std::string body) {
  while (!body.empty() && (body.back() == '\n' || body.back() == '\r')) {
    body.pop_back();
  }
  if (body.size() > 300) {
    body.resize(300);
    body += "...";
  }
  return body;
}

common::Status HttpError(long code, const std::string& what, const std::string& body) {
  const std::string message = what + "HTTP " + std::to_string(code) + " " + Shorten(body);
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
