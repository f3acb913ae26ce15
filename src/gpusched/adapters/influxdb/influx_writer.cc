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
    return detail::Post(curl, url, body, content_type,
                        {.timeout = options.timeout,
                         .username = options.username,
                         .password = options.password,
                         .user_agent = "gpusched-agent/0.1"},
                        response, "InfluxDB " + base + ": ");
  }
};

InfluxWriter::InfluxWriter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
InfluxWriter::~InfluxWriter() = default;

common::Result<std::unique_ptr<InfluxWriter>> InfluxWriter::Create(InfluxWriterOptions options) {
  GPUSCHED_RETURN_IF_ERROR(detail::ValidateEndpoint(options.url, options.database, options.timeout));
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
  return detail::HttpError(code,
                           "InfluxDB write to " + impl_->base + " (db " + impl_->options.database + "): ", response);
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
                               std::to_string(code) + " " + detail::Shorten(response));
  }
  return common::Status::Ok();
}

const std::string& InfluxWriter::write_url() const { return impl_->write_url; }

}  // namespace gpusched::adapters::influxdb
