#include "gpusched/adapters/influxdb/influx_writer.h"
#include "gpusched/adapters/influxdb/curl_post.h"

#include <curl/curl.h>

#include <mutex>
#include <utility>

namespace gpusched::adapters::influxdb {
namespace {

std::string UrlEncode(CURL* h, const std::string& s) {
  char* e = curl_easy_escape(h, s.c_str(), static_cast<int>(s.size()));
  std::string out = e != nullptr ? e : "";
  curl_free(e);
  return out;
}

// The body of an InfluxDB error is {"error":"..."}; keep it short in a Status.
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

}  // namespace

struct InfluxWriter::Impl {
  InfluxWriterOptions options;
  std::string base;  // url without a trailing slash
  std::string write_url;
  std::mutex mu;
  CURL* curl = nullptr;  // GUARDED_BY(mu)

  ~Impl() {
    if (curl != nullptr) {
      curl_easy_cleanup(curl);
    }
  }

  // POSTs `body` to `url`; returns the HTTP status, or a Status for transport errors.
  common::Result<long> Post(const std::string& url, std::string_view body, const char* content_type,
                            std::string& response) {
    detail::PreparePost(curl, url, body,
                        {.timeout = options.timeout,
                         .username = options.username,
                         .password = options.password,
                         .user_agent = "gpusched-agent/0.1"},
                        &response);
    curl_slist* headers = curl_slist_append(nullptr, content_type);
    headers = curl_slist_append(headers, "Expect:");  // no 100-continue round trip for larger batches
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    char error[CURL_ERROR_SIZE] = {};
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
    const CURLcode rc = curl_easy_perform(curl);
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, nullptr);
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, nullptr);
    curl_slist_free_all(headers);
    if (rc != CURLE_OK) {
      const std::string what = "InfluxDB " + base + ": " + (error[0] != '\0' ? error : curl_easy_strerror(rc));
      if (rc == CURLE_OPERATION_TIMEDOUT) {
        return common::DeadlineExceeded(what);
      }
      return common::Unavailable(what);
    }
    long code = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &code);
    return code;
  }
};

InfluxWriter::InfluxWriter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
InfluxWriter::~InfluxWriter() = default;

common::Result<std::unique_ptr<InfluxWriter>> InfluxWriter::Create(InfluxWriterOptions options) {
  if (options.url.rfind("http://", 0) != 0 && options.url.rfind("https://", 0) != 0) {
    return common::InvalidArgument("InfluxDB URL \"" + options.url + "\" must start with http:// or https://");
  }
  if (options.database.empty()) {
    return common::InvalidArgument("InfluxDB: no database given");
  }
  if (options.timeout.count() <= 0) {
    return common::InvalidArgument("InfluxDB: the timeout must be positive");
  }
  GPUSCHED_RETURN_IF_ERROR(detail::CurlGlobalInit());
  auto impl = std::make_unique<Impl>();
  impl->curl = curl_easy_init();
  if (impl->curl == nullptr) {
    return common::Internal("InfluxDB: curl_easy_init failed");
  }
  impl->base = options.url;
  while (!impl->base.empty() && impl->base.back() == '/') {
    impl->base.pop_back();
  }
  impl->write_url = impl->base + "/write?db=" + UrlEncode(impl->curl, options.database) + "&precision=ms";
  if (!options.retention_policy.empty()) {
    impl->write_url += "&rp=" + UrlEncode(impl->curl, options.retention_policy);
  }
  impl->options = std::move(options);
  return std::unique_ptr<InfluxWriter>(new InfluxWriter(std::move(impl)));
}

common::Status InfluxWriter::Write(std::string_view lines) {
  if (lines.empty()) {
    return common::Status::Ok();
  }
  std::lock_guard lock(impl_->mu);
  std::string response;
  GPUSCHED_ASSIGN_OR_RETURN(code,
                            impl_->Post(impl_->write_url, lines, "Content-Type: text/plain; charset=utf-8", response));
  if (code == 204 || code == 200) {
    return common::Status::Ok();
  }
  const std::string what = "InfluxDB write to " + impl_->base + " (db " + impl_->options.database + "): HTTP " +
                           std::to_string(code) + " " + Shorten(response);
  switch (code) {
    case 400:
      return common::InvalidArgument(what);
    case 401:
    case 403:
      return common::PermissionDenied(what);
    case 404:
      return common::NotFound(what);
    default:
      return common::Unavailable(what);
  }
}

common::Status InfluxWriter::CreateDatabase() {
  std::lock_guard lock(impl_->mu);
  std::string db;
  for (const char c : impl_->options.database) {
    if (c == '"' || c == '\\') {
      db += '\\';
    }
    db += c;
  }
  const std::string body = "q=" + UrlEncode(impl_->curl, "CREATE DATABASE \"" + db + "\"");
  std::string response;
  GPUSCHED_ASSIGN_OR_RETURN(
      code, impl_->Post(impl_->base + "/query", body, "Content-Type: application/x-www-form-urlencoded", response));
  if (code != 200 || response.find("\"error\"") != std::string::npos) {
    return common::Unavailable("InfluxDB " + impl_->base + ": CREATE DATABASE " + impl_->options.database + ": HTTP " +
                               std::to_string(code) + " " + Shorten(response));
  }
  return common::Status::Ok();
}

const std::string& InfluxWriter::write_url() const { return impl_->write_url; }

}  // namespace gpusched::adapters::influxdb
