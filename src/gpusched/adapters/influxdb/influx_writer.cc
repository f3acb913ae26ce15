#include "gpusched/adapters/influxdb/influx_writer.h"
#include "gpusched/adapters/influxdb/influx_http.h"
#include "gpusched/common/redact.h"

#include <mutex>
#include <utility>

namespace gpusched::adapters::influxdb {
struct InfluxWriter::Impl {
  InfluxWriterOptions options;
  std::string base;  // url without a trailing slash
  std::string write_url;
  std::mutex mu;
  std::string write_target;
  std::unique_ptr<net::HttpClient> http;

  // POSTs `body` to `target`; returns the HTTP status, or a Status for transport errors.
  common::Result<long> Post(const std::string& target, std::string_view body, const char* content_type,
                            std::string& response) {
    return detail::Post(*http, target, body, content_type, response, "InfluxDB " + base + ": ");
  }
};

InfluxWriter::InfluxWriter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
InfluxWriter::~InfluxWriter() = default;

common::Result<std::unique_ptr<InfluxWriter>> InfluxWriter::Create(InfluxWriterOptions options) {
  GPUSCHED_RETURN_IF_ERROR(detail::ValidateEndpoint(options.url, options.database, options.timeout));
  auto impl = std::make_unique<Impl>();
  GPUSCHED_ASSIGN_OR_RETURN(http, detail::Connect(options.url, options.timeout, options.username, options.password));
  impl->http = std::move(http);
  impl->base = common::RedactUrl(options.url);  // for messages only
  while (!impl->base.empty() && impl->base.back() == '/') {
    impl->base.pop_back();
  }
  impl->write_target = "/write?db=" + net::UrlEncode(options.database) + "&precision=ms";
  if (!options.retention_policy.empty()) {
    impl->write_target += "&rp=" + net::UrlEncode(options.retention_policy);
  }
  impl->write_url = impl->base + impl->write_target;
  impl->options = std::move(options);
  return std::unique_ptr<InfluxWriter>(new InfluxWriter(std::move(impl)));
}

common::Status InfluxWriter::Write(std::string_view lines) {
  if (lines.empty()) {
    return common::Status::Ok();
  }
  std::lock_guard lock(impl_->mu);
  std::string response;
  GPUSCHED_ASSIGN_OR_RETURN(
      code, impl_->Post(impl_->write_target, lines, "Content-Type: text/plain; charset=utf-8", response));
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
  const std::string body = "q=" + net::UrlEncode("CREATE DATABASE \"" + db + "\"");
  std::string response;
  GPUSCHED_ASSIGN_OR_RETURN(code,
                            impl_->Post("/query", body, "Content-Type: application/x-www-form-urlencoded", response));
  if (code != 200 || response.find("\"error\"") != std::string::npos) {
    return common::Unavailable("InfluxDB " + impl_->base + ": CREATE DATABASE " + impl_->options.database + ": HTTP " +
                               std::to_string(code) + " " + net::ShortenBody(response));
  }
  return common::Status::Ok();
}

const std::string& InfluxWriter::write_url() const { return impl_->write_url; }

}  // namespace gpusched::adapters::influxdb
