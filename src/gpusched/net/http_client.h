#pragma once

// HttpClient: the one HTTP(S) client every gpusched adapter talks through (the Kubernetes API server, Prometheus,
// InfluxDB), over libcurl (docs/dependencies.md). libcurl stays inside http_client.cc, so this header is cheap.
//
// What it does the same way for every caller:
//   connections  a small pool of curl handles: a call borrows one and gives it back, so keep-alive connections and
//                TLS sessions are reused between calls; nothing is held locked across network I/O
//   TLS          the server certificate is verified against `ca_pem` (the system store when empty) unless
//                insecure_skip_verify; a client certificate and key are passed as PEM blobs, never written to disk
//   timeouts     every request is bounded (HttpClientOptions::timeout, or ClientRequest::timeout); the connect phase
//                by connect_timeout; a stream by its own bound
//   headers      no "Expect: 100-continue" round trip for large bodies; User-Agent gpusched/<version>
//   errors       a transport failure (refused, reset, TLS, timeout) is a Status: DeadlineExceeded for a timeout,
//                Unavailable otherwise, its message curl's explanation; every HTTP status is a response
//
// Thread-safety: any number of threads may call Send and Stream at once.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpusched/common/status.h"

namespace gpusched::net {

struct ClientTls {
  bool insecure_skip_verify = false;
  std::string ca_pem;           // PEM bundle the server certificate must chain to; empty = the system store
  std::string client_cert_pem;  // PEM client certificate (with client_key_pem), or empty
  std::string client_key_pem;
};

struct HttpClientOptions {
  // scheme://host[:port][/prefix]: http or https; a trailing slash is dropped. Targets are appended to it.
  std::string base_url;
  std::chrono::milliseconds timeout{10000};  // a whole request, unless the request says otherwise
  std::chrono::milliseconds connect_timeout{10000};
  ClientTls tls;
  bool accept_gzip = false;    // ask for (and inflate) gzip-encoded responses
  std::string basic_username;  // HTTP basic authentication when not empty
  std::string basic_password;
  bool tcp_keepalive = false;       // TCP keep-alive probes on idle connections (long watches)
  size_t receive_buffer_bytes = 0;  // curl's receive buffer (0 = its default, 16 KiB); larger for big bodies
  size_t max_idle_handles = 8;      // handles (and their connections) kept between calls
};

struct ClientRequest {
  std::string method = "GET";                        // GET, POST, PUT, PATCH, DELETE, ...
  std::string target;                                // path and query, appended to the base URL
  std::string_view body;                             // sent when not empty, or for POST; must outlive the call
  std::vector<std::string> headers;                  // "Name: value" lines
  std::optional<std::chrono::milliseconds> timeout;  // instead of the client's; zero = unbounded (streams only)
  size_t reserve = 0;                                // expected response size, allocated at once rather than grown
};

struct ClientResponse {
  long status = 0;
  std::string body;
};

// How a stream ended that was not a transport failure.
struct StreamEnd {
  long status = 0;         // the HTTP status (0 when no response arrived)
  bool stopped = false;    // the stop flag became true
  bool aborted = false;    // the data callback returned false
  bool timed_out = false;  // the request's time bound passed after the response had begun (status != 0)
  std::string detail;      // curl's explanation when timed_out
};

class HttpClient {
 public:
  static common::Result<std::unique_ptr<HttpClient>> Create(HttpClientOptions options);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  [[nodiscard]] const HttpClientOptions& options() const;

  // One request, the whole response in memory.
  common::Result<ClientResponse> Send(const ClientRequest& request);

  // One request whose response body is handed to `on_data` as it arrives (with the HTTP status, known by then);
  // returning false ends the transfer (aborted). `stop` is looked at least every `poll` while the stream is idle:
  // when it becomes true the transfer ends (stopped). The stream uses a handle of its own for its whole life.
  // An exception from `on_data` ends the transfer and is rethrown from Stream once curl has returned (never thrown
  // through curl's frames).
  using DataHandler = std::function<bool(long status, std::string_view data)>;
  common::Result<StreamEnd> Stream(const ClientRequest& request, const DataHandler& on_data,
                                   const std::atomic<bool>& stop,
                                   std::chrono::milliseconds poll = std::chrono::milliseconds(100));

 private:
  struct Impl;
  explicit HttpClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// A response body for an error message: without trailing newlines, cut to `max` bytes with "..." after.
[[nodiscard]] std::string ShortenBody(std::string body, size_t max = 300);

// Percent-encodes a query parameter or form value: RFC 3986's unreserved characters stay, every other byte is %XX.
[[nodiscard]] std::string UrlEncode(std::string_view value);

}  // namespace gpusched::net
