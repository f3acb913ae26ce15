#pragma once

// InfluxWriter: POSTs line protocol to an InfluxDB 1.x server (`<url>/write?db=<db>&precision=ms`), as the
// agent's `--influxdb-url` push does every interval. A failed write is a Status naming the URL and the server's
// answer (or the transport error); the caller logs it and tries again at the next interval: nothing is buffered.
//
// Thread-safety: Write and CreateDatabase may be called from any thread; calls are serialised on one reused
// keep-alive connection (net::HttpClient).

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "gpusched/common/status.h"

namespace gpusched::adapters::influxdb {

struct InfluxWriterOptions {
  std::string url;               // "http://127.0.0.1:8086" (a trailing slash is fine)
  std::string database;          // required
  std::string retention_policy;  // empty: the database's default
  std::string username;          // with password: HTTP basic authentication
  std::string password;
  std::chrono::milliseconds timeout{5000};  // the whole request, connect included
};

class InfluxWriter {
 public:
  // InvalidArgument for a URL that is not http(s):// or an empty database.
  [[nodiscard]] static common::Result<std::unique_ptr<InfluxWriter>> Create(InfluxWriterOptions options);
  ~InfluxWriter();
  InfluxWriter(const InfluxWriter&) = delete;
  InfluxWriter& operator=(const InfluxWriter&) = delete;

  // Writes line protocol with millisecond timestamps. OK on 204. Errors: Unavailable when the server cannot be
  // reached or answers 5xx, DeadlineExceeded on timeout, NotFound when the database does not exist (404),
  // InvalidArgument on a parse error (400), PermissionDenied on 401/403; each with the server's message.
  [[nodiscard]] common::Status Write(std::string_view lines);
  // `CREATE DATABASE "<db>"` through /query (idempotent in InfluxDB 1.x).
  [[nodiscard]] common::Status CreateDatabase();

  [[nodiscard]] const std::string& write_url() const;

 private:
  struct Impl;
  explicit InfluxWriter(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpusched::adapters::influxdb
