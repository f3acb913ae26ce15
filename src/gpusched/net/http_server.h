#pragma once

// HttpServer: the one HTTP(S) server every gpusched daemon serves through (extender, agent, webhook, scheduler).
// It exists so that limits and timeouts are enforced in one place, for every endpoint, before any handler runs.
//
// Built on Boost.Beast over Asio (docs/dependencies.md); Beast stays inside http_server.cc, so this header is cheap.
// Connections are served asynchronously by a few I/O threads (min(threads, cores, 4)): a slow or idle client holds
// a socket and a timer, never a thread. Handlers run on a separate pool of `threads` and may block (an API call at
// bind); size `threads` for the number of handlers that may block at once. A handler declared kInlineIfSmall runs
// on the I/O thread for bodies up to kInlineBodyBytes instead (HandlerRuns). A body of declared length is read
// straight into the request in large pieces, growing with the bytes that arrived.
//
// What is enforced, per connection and request (HttpLimits):
//   connections  at most max_connections open at once, and at most max_connections_per_peer from one remote IP
//                address (the peer; the port is not part of it). The server makes room instead of refusing when it
//                can (ConnectionTable, connection_table.h). At the per-peer cap the peer's own connection idle
//                longest is closed for the new one, else the new one is closed at once. At the global cap the
//                connection idle longest is closed; failing that, when the newcomer's peer holds at least two
//                connections fewer than the peer holding most, that peer's oldest connection still reading its
//                request head; only when neither exists is the new connection closed at once. So one peer never
//                locks another out, and a probe (kubelet: the node's address; one connection at a time) is served
//                as long as some other peer holds an idle connection or two connections more. Every refusal and
//                eviction is counted in stats
//   TLS          the handshake must finish within header_timeout; with a client CA, a client certificate signed by
//                it is required, and with allowed_client_names one of its names (subject CN, DNS and URI SANs)
//                must be listed, else 403 before any handler runs
//   header       the whole request head must arrive within header_timeout of the first byte being awaited
//                (slowloris), be at most max_header_bytes (431) and hold at most max_header_fields fields (431)
//   body         at most max_body_bytes whatever the framing: Content-Length over the limit is refused before the
//                body is read (413); chunked bodies are counted as they arrive and cut off at the limit (413);
//                a body must arrive within body_timeout (408)
//   encoding     Content-Encoding other than identity (gzip, br, deflate...) gets 415 and is never inflated;
//                Transfer-Encoding other than chunked gets 501. Decoded request memory is therefore the body
//                itself: at most max_body_bytes + max_header_bytes per connection being read
//   idle         a keep-alive connection with no new request within idle_timeout is closed. A connection is idle
//                while it waits for the first byte of a request: a new connection that has sent nothing yet, or a
//                keep-alive one between requests; those are the ones closed first at the global cap
//   write        a response not taken by the client within write_timeout closes the connection
//   methods      a path served for other methods answers 405 with Allow; an unknown path 404
// Violations answer with a short text body naming the limit, and close the connection; none reaches a handler.
//
// Thread-safety: Handle() before Start() only. Start/Stop from one thread. Handlers run concurrently.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpusched/common/status.h"

namespace gpusched::net {

struct HttpLimits {
  size_t max_header_bytes = 16 * 1024;
  size_t max_header_fields = 64;
  size_t max_body_bytes = 1 << 20;
  std::chrono::milliseconds header_timeout{5000};
  std::chrono::milliseconds body_timeout{10000};
  std::chrono::milliseconds idle_timeout{30000};
  std::chrono::milliseconds write_timeout{10000};
  size_t max_connections = 256;
  // Connections open at once from one remote IP address, at most (1..; values over max_connections act as
  // max_connections). A quarter of max_connections by default: four peers at their cap fill the server, and the
  // idle ones among them give way to anyone else.
  size_t max_connections_per_peer = 64;
};

struct TlsOptions {
  std::string cert_file;  // PEM server certificate (chain); empty = plain HTTP
  std::string key_file;   // PEM private key
  // PEM CA bundle that client certificates must chain to; empty = no client certificate asked for.
  std::string client_ca_file;
  // With a client CA: the client certificate must carry one of these names (subject CN, a DNS or URI SAN),
  // compared exactly. Empty = any certificate the CA signed.
  std::vector<std::string> allowed_client_names;
};

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;  // 0 = any free port (port() tells which)
  int threads = 4;
  HttpLimits limits;
  TlsOptions tls;
  std::string name = "http";  // in log lines and error bodies ("extender", "agent")
};

// Who is calling: set from the TLS client certificate when there is one.
struct Peer {
  std::string address;  // "127.0.0.1:54321"
  bool tls = false;
  bool client_certificate = false;  // a client certificate was presented and verified
  std::string common_name;          // subject CN of the client certificate
  std::vector<std::string> names;   // CN, then the DNS and URI SANs
};

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string target;  // as sent: path and query
  std::string path;    // target without the query
  std::string query;   // after '?', undecoded; empty when none
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;  // at most limits.max_body_bytes; handlers may move from it. It has at least 64 bytes of
                     // capacity past its end (simdjson's padding), so a parser need not copy it
  Peer peer;

  // The first header of that name (case-insensitive), or "".
  [[nodiscard]] std::string_view Header(std::string_view name) const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra headers
};

using HttpHandler = std::function<HttpResponse(HttpRequest& request)>;

// Where a handler runs. kPool (the default): on the handler pool, so it may block (an API call).
// kInlineIfSmall: for a request body of at most kInlineBodyBytes, on the connection's I/O thread, saving two thread
// hand-offs (a third of a small request's latency on a 2-core VM); larger bodies go to the pool, since their work
// is longer and the I/O thread serves other connections meanwhile (and measured no faster inline). Only for
// handlers that never block (the extender's filter and prioritize).
enum class HandlerRuns { kPool, kInlineIfSmall };
inline constexpr size_t kInlineBodyBytes = 256 * 1024;

// What the server refused or saw, for /metrics and tests. Monotonic counters.
struct HttpServerStats {
  uint64_t connections_accepted = 0;
  uint64_t connections_refused = 0;           // at max_connections with nothing to close in its place
  uint64_t connections_refused_per_peer = 0;  // its peer already held max_connections_per_peer
  uint64_t connections_evicted_idle = 0;      // idle, closed at max_connections to make room
  uint64_t connections_evicted_head = 0;      // still reading its head, its peer holding most: closed to make room
  uint64_t tls_handshake_failures = 0;
  uint64_t client_identity_refused = 0;  // certificate fine, name not allowed
  uint64_t requests = 0;                 // handed to a handler
  uint64_t header_too_large = 0;         // bytes or fields
  uint64_t body_too_large = 0;
  uint64_t encoding_refused = 0;
  uint64_t timeouts = 0;  // header, body, idle or write
  uint64_t bad_requests = 0;
  uint64_t open_connections = 0;  // a gauge: open now
  uint64_t idle_connections = 0;  // a gauge: of those, waiting for a request's first byte
};

class HttpServer {
 public:
  // Fails on an unreadable certificate, key or CA, a key that does not match, or bad options; nothing listens yet.
  static common::Result<std::unique_ptr<HttpServer>> Create(HttpServerOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Serves `method` (GET, POST, ...) at exactly `path` (no query). Before Start only.
  void Handle(std::string method, std::string path, HttpHandler handler, HandlerRuns runs = HandlerRuns::kPool);

  // Binds and starts the I/O threads; returns once the socket listens.
  common::Status Start();
  [[nodiscard]] int port() const;
  // Stops accepting, closes every connection, joins the threads. Idempotent; the destructor calls it.
  void Stop();

  [[nodiscard]] HttpServerStats stats() const;
  [[nodiscard]] const HttpServerOptions& options() const;

  class Impl;

 private:
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The stats as Prometheus text: <prefix>_http_connections_total{result="accepted|refused|refused_per_peer"},
// _http_evictions_total{state="idle|reading_head"}, _http_refusals_total{reason=...}, _http_requests_total,
// _http_open_connections, _http_idle_connections.
[[nodiscard]] std::string RenderStats(const HttpServerStats& stats, std::string_view prefix);

// Whether `host` is a loopback address (127.0.0.0/8, ::1, "localhost"): daemons allow plain HTTP only there.
[[nodiscard]] bool IsLoopbackHost(std::string_view host);

// The request parser with the server's limits, on bytes in memory: what a connection would hand to a handler, or
// the status it would answer with and why. For the fuzz target and tests; the server uses the same checks.
struct ParseOutcome {
  bool complete = false;  // a whole request was parsed (else `status` says why not, or more bytes were needed)
  int status = 0;         // 0 when complete or incomplete; else the refusal (400, 413, 415, 431, 501)
  std::string reason;
  HttpRequest request;
};
[[nodiscard]] ParseOutcome ParseRequestBytes(std::string_view bytes, const HttpLimits& limits);

}  // namespace gpusched::net
