#include "gpusched/net/http_server.h"

#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <type_traits>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include "gpusched/common/log.h"
#include "gpusched/net/connection_table.h"

namespace gpusched::net {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Parser = http::request_parser<http::string_body>;

namespace {

bool IEquals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) {
    s.remove_suffix(1);
  }
  return s;
}

struct Refusal {
  int status = 0;  // 0 = none
  std::string reason;
};

// The checks on a complete request head, shared by the server and ParseRequestBytes.
Refusal CheckHeader(const http::request_header<>& head, const HttpLimits& limits) {
  size_t fields = 0;
  for (auto it = head.begin(); it != head.end(); ++it) {
    ++fields;
  }
  if (fields > limits.max_header_fields) {
    return {431, "too many header fields: " + std::to_string(fields) + " (at most " +
                     std::to_string(limits.max_header_fields) + ")"};
  }
  // Both are lists ("gzip, identity"); repeated fields add to the list.
  auto tokens = [&](http::field f, auto&& check) -> Refusal {
    auto range = head.equal_range(f);
    for (auto it = range.first; it != range.second; ++it) {
      const std::string_view value(it->value().data(), it->value().size());
      size_t start = 0;
      for (;;) {
        const size_t comma = value.find(',', start);
        const std::string_view token =
            Trim(value.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
        if (!token.empty()) {
          if (Refusal r = check(token); r.status != 0) {
            return r;
          }
        }
        if (comma == std::string_view::npos) {
          break;
        }
        start = comma + 1;
      }
    }
    return {};
  };
  // Anything but identity would need inflating, which this server never does: the decoded size is the body's.
  if (Refusal r = tokens(
          http::field::content_encoding,
          [](std::string_view t) -> Refusal {
            if (IEquals(t, "identity")) {
              return {};
            }
            return {415, "Content-Encoding \"" + std::string(t) + "\" is not accepted (send the body uncompressed)"};
          });
      r.status != 0) {
    return r;
  }
  if (Refusal r = tokens(http::field::transfer_encoding,
                         [](std::string_view t) -> Refusal {
                           if (IEquals(t, "chunked") || IEquals(t, "identity")) {
                             return {};
                           }
                           return {501, "Transfer-Encoding \"" + std::string(t) + "\" is not supported (only chunked)"};
                         });
      r.status != 0) {
    return r;
  }
  return {};
}

// A Beast parse error as the status this server answers with.
Refusal FromParseError(const beast::error_code& ec, const HttpLimits& limits) {
  if (ec == http::error::header_limit || ec == http::error::buffer_overflow) {
    return {431, "request head is larger than " + std::to_string(limits.max_header_bytes) + " bytes"};
  }
  if (ec == http::error::body_limit) {
    return {413, "request body is larger than " + std::to_string(limits.max_body_bytes) + " bytes"};
  }
  return {400, "malformed request: " + ec.message()};
}

void ConvertRequest(Parser& parser, HttpRequest& out) {
  auto& msg = parser.get();
  out.method = std::string(msg.method_string());
  out.target = std::string(msg.target());
  const size_t q = out.target.find('?');
  out.path = out.target.substr(0, q);
  out.query = q == std::string::npos ? std::string() : out.target.substr(q + 1);
  out.headers.clear();
  for (const auto& f : msg) {
    out.headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
  }
  out.body = std::move(msg.body());
}

// Subject CN, then DNS and URI SANs, of a verified peer certificate.
std::vector<std::string> CertificateNames(X509* cert, std::string& common_name) {
  std::vector<std::string> names;
  if (X509_NAME* subject = X509_get_subject_name(cert); subject != nullptr) {
    const int idx = X509_NAME_get_index_by_NID(subject, NID_commonName, -1);
    if (idx >= 0) {
      const ASN1_STRING* data = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, idx));
      if (data != nullptr) {
        common_name.assign(reinterpret_cast<const char*>(ASN1_STRING_get0_data(data)),
                           static_cast<size_t>(ASN1_STRING_length(data)));
        names.push_back(common_name);
      }
    }
  }
  auto* sans = static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  if (sans != nullptr) {
    for (int i = 0; i < sk_GENERAL_NAME_num(sans); ++i) {
      const GENERAL_NAME* name = sk_GENERAL_NAME_value(sans, i);
      const ASN1_STRING* s = nullptr;
      if (name->type == GEN_DNS) {
        s = name->d.dNSName;
      } else if (name->type == GEN_URI) {
        s = name->d.uniformResourceIdentifier;
      }
      if (s != nullptr) {
        names.emplace_back(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),
                           static_cast<size_t>(ASN1_STRING_length(s)));
      }
    }
    GENERAL_NAMES_free(sans);
  }
  return names;
}

}  // namespace

std::string_view HttpRequest::Header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (IEquals(k, name)) {
      return v;
    }
  }
  return {};
}

std::string RenderStats(const HttpServerStats& s, std::string_view prefix) {
  const std::string p(prefix);
  std::string out;
  out += "# HELP " + p +
         "_http_connections_total Connections accepted, or closed at once: over the connection limit with "
         "nothing to close in their place (refused), or over the limit per peer address (refused_per_peer).\n";
  out += "# TYPE " + p + "_http_connections_total counter\n";
  out += p + "_http_connections_total{result=\"accepted\"} " + std::to_string(s.connections_accepted) + "\n";
  out += p + "_http_connections_total{result=\"refused\"} " + std::to_string(s.connections_refused) + "\n";
  out += p + "_http_connections_total{result=\"refused_per_peer\"} " + std::to_string(s.connections_refused_per_peer) +
         "\n";
  out += "# HELP " + p +
         "_http_evictions_total Open connections closed to make room for a new one at the connection limit, by "
         "the state they were in.\n";
  out += "# TYPE " + p + "_http_evictions_total counter\n";
  out += p + "_http_evictions_total{state=\"idle\"} " + std::to_string(s.connections_evicted_idle) + "\n";
  out += p + "_http_evictions_total{state=\"reading_head\"} " + std::to_string(s.connections_evicted_head) + "\n";
  out += "# HELP " + p + "_http_refusals_total Requests and connections the HTTP layer refused, by reason.\n";
  out += "# TYPE " + p + "_http_refusals_total counter\n";
  const std::pair<const char*, uint64_t> reasons[] = {{"tls_handshake", s.tls_handshake_failures},
                                                      {"client_identity", s.client_identity_refused},
                                                      {"header_too_large", s.header_too_large},
                                                      {"body_too_large", s.body_too_large},
                                                      {"encoding", s.encoding_refused},
                                                      {"timeout", s.timeouts},
                                                      {"bad_request", s.bad_requests}};
  for (const auto& [reason, n] : reasons) {
    out += p + "_http_refusals_total{reason=\"" + reason + "\"} " + std::to_string(n) + "\n";
  }
  out += "# HELP " + p + "_http_requests_total Requests handed to a handler.\n";
  out += "# TYPE " + p + "_http_requests_total counter\n";
  out += p + "_http_requests_total " + std::to_string(s.requests) + "\n";
  out += "# HELP " + p + "_http_open_connections Connections open now.\n";
  out += "# TYPE " + p + "_http_open_connections gauge\n";
  out += p + "_http_open_connections " + std::to_string(s.open_connections) + "\n";
  out += "# HELP " + p + "_http_idle_connections Open connections waiting for the first byte of a request.\n";
  out += "# TYPE " + p + "_http_idle_connections gauge\n";
  out += p + "_http_idle_connections " + std::to_string(s.idle_connections) + "\n";
  return out;
}

bool IsLoopbackHost(std::string_view host) {
  if (host == "localhost" || host == "::1" || host == "[::1]") {
    return true;
  }
  boost::system::error_code ec;
  const auto addr = asio::ip::make_address(std::string(host), ec);
  return !ec && addr.is_loopback();
}

ParseOutcome ParseRequestBytes(std::string_view bytes, const HttpLimits& limits) {
  ParseOutcome out;
  Parser parser;
  parser.header_limit(static_cast<std::uint32_t>(std::min<size_t>(limits.max_header_bytes, UINT32_MAX)));
  parser.body_limit(limits.max_body_bytes);
  parser.eager(true);
  bool checked = false;
  while (!bytes.empty()) {
    beast::error_code ec;
    const size_t used = parser.put(asio::buffer(bytes.data(), bytes.size()), ec);
    if (ec == http::error::need_more) {
      // Beast asks for the whole head before it consumes any of it; the server reads in pieces, same result.
      if (!parser.is_header_done() && bytes.size() > limits.max_header_bytes) {
        Refusal r = FromParseError(http::error::header_limit, limits);
        out.status = r.status;
        out.reason = r.reason;
      }
      return out;
    }
    if (ec) {
      Refusal r = FromParseError(ec, limits);
      out.status = r.status;
      out.reason = r.reason;
      return out;
    }
    bytes.remove_prefix(used);
    if (parser.is_header_done() && !checked) {
      checked = true;
      if (Refusal r = CheckHeader(parser.get().base(), limits); r.status != 0) {
        out.status = r.status;
        out.reason = r.reason;
        return out;
      }
    }
    if (parser.is_done()) {
      out.complete = true;
      ConvertRequest(parser, out.request);
      return out;
    }
    if (used == 0) {
      return out;
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// The server.

class HttpServer::Impl {
 public:
  explicit Impl(HttpServerOptions options)
      : options_(std::move(options)),
        // A strand of its own: the accept loop and the close in Stop() run on different I/O threads otherwise.
        connections_(options_.limits.max_connections, options_.limits.max_connections_per_peer),
        acceptor_(asio::make_strand(ioc_)),
        handlers_(static_cast<size_t>(std::max(1, options_.threads))) {}
  ~Impl() { Stop(); }

  common::Status Init() {
    if (options_.threads < 1) {
      return common::InvalidArgument(options_.name + ": threads must be at least 1");
    }
    if (options_.limits.max_connections < 1) {
      return common::InvalidArgument(options_.name + ": max_connections must be at least 1");
    }
    if (options_.limits.max_connections_per_peer < 1) {
      return common::InvalidArgument(options_.name + ": max_connections_per_peer must be at least 1");
    }
    const TlsOptions& tls = options_.tls;
    if (tls.cert_file.empty() != tls.key_file.empty()) {
      return common::InvalidArgument(options_.name + ": TLS needs both a certificate and a key file");
    }
    if (tls.cert_file.empty() && !tls.client_ca_file.empty()) {
      return common::InvalidArgument(options_.name + ": a client CA needs TLS (a certificate and a key file)");
    }
    if (tls.client_ca_file.empty() && !tls.allowed_client_names.empty()) {
      return common::InvalidArgument(options_.name + ": allowed client names need a client CA file");
    }
    if (tls.cert_file.empty()) {
      return common::Status::Ok();
    }
    ssl_.emplace(asio::ssl::context::tls_server);
    std::string what = "certificate";
    std::string file = tls.cert_file;
    try {
      ssl_->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                        asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 | asio::ssl::context::no_tlsv1_1 |
                        asio::ssl::context::single_dh_use);
      SSL_CTX_set_options(ssl_->native_handle(), SSL_OP_NO_RENEGOTIATION);
      ssl_->use_certificate_chain_file(tls.cert_file);
      what = "key";
      file = tls.key_file;
      ssl_->use_private_key_file(tls.key_file, asio::ssl::context::pem);
      if (SSL_CTX_check_private_key(ssl_->native_handle()) != 1) {
        return common::InvalidArgument(options_.name + ": TLS key " + tls.key_file + " does not match certificate " +
                                       tls.cert_file);
      }
      if (!tls.client_ca_file.empty()) {
        what = "client CA";
        file = tls.client_ca_file;
        ssl_->load_verify_file(tls.client_ca_file);
        if (STACK_OF(X509_NAME)* list = SSL_load_client_CA_file(tls.client_ca_file.c_str()); list != nullptr) {
          SSL_CTX_set_client_CA_list(ssl_->native_handle(), list);
        }
        ssl_->set_verify_mode(asio::ssl::verify_peer | asio::ssl::verify_fail_if_no_peer_cert);
      }
    } catch (const boost::system::system_error& e) {
      return common::InvalidArgument(options_.name + ": cannot load TLS " + what + " " + file + ": " +
                                     e.code().message());
    }
    return common::Status::Ok();
  }

  void Handle(std::string method, std::string path, HttpHandler handler, HandlerRuns runs) {
    methods_[path].insert(method);
    routes_[{std::move(method), std::move(path)}] = Route{std::move(handler), runs};
  }

  // Whether the handler for this request runs on the I/O thread (declared non-blocking, and a small body);
  // unknown paths answer inline too (404/405 cost nothing).
  bool RunsInline(const HttpRequest& req) const {
    auto it = routes_.find({req.method, req.path});
    return it == routes_.end() ||
           (it->second.runs == HandlerRuns::kInlineIfSmall && req.body.size() <= kInlineBodyBytes);
  }

  common::Status Start() {
    boost::system::error_code ec;
    std::string host = options_.host;
    if (host == "localhost") {
      host = "127.0.0.1";
    }
    if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
      host = host.substr(1, host.size() - 2);
    }
    const auto addr = asio::ip::make_address(host, ec);
    if (ec) {
      return common::InvalidArgument(options_.name + ": cannot listen on \"" + options_.host +
                                     "\": not an IP address (" + ec.message() + ")");
    }
    const tcp::endpoint endpoint(addr, static_cast<unsigned short>(options_.port));
    auto fail = [&](const char* what) {
      return common::Unavailable(options_.name + ": cannot listen on " + options_.host + ":" +
                                 std::to_string(options_.port) + ": " + what + ": " + ec.message());
    };
    if (acceptor_.open(endpoint.protocol(), ec); ec) {
      return fail("open");
    }
    if (acceptor_.set_option(asio::socket_base::reuse_address(true), ec); ec) {
      return fail("reuse_address");
    }
    if (acceptor_.bind(endpoint, ec); ec) {
      return fail("bind");
    }
    if (acceptor_.listen(asio::socket_base::max_listen_connections, ec); ec) {
      return fail("listen");
    }
    port_ = acceptor_.local_endpoint().port();
    Accept();
    // Few I/O threads (a connection's reads hop between them otherwise, and each wake-up costs on a small VM);
    // the handlers, which may block on an API call, run on their own pool of `threads`.
    const unsigned hw = std::max(1U, std::thread::hardware_concurrency());
    const auto io_threads = static_cast<int>(std::min<unsigned>({static_cast<unsigned>(options_.threads), hw, 4U}));
    threads_.reserve(static_cast<size_t>(io_threads));
    for (int i = 0; i < io_threads; ++i) {
      threads_.emplace_back([this] { Run(); });
    }
    return common::Status::Ok();
  }

  void Stop() {
    std::lock_guard lock(stop_mu_);
    if (stopped_) {
      return;
    }
    stopped_ = true;
    asio::post(acceptor_.get_executor(), [this] {
      boost::system::error_code ignored;
      acceptor_.close(ignored);
    });
    ioc_.stop();
    for (auto& t : threads_) {
      if (t.joinable()) {
        t.join();
      }
    }
    // Handlers already running finish; what they post back to the stopped I/O context is dropped with it.
    handlers_.stop();
    handlers_.join();
  }

  int port() const { return port_; }
  const HttpServerOptions& options() const { return options_; }

  HttpServerStats Stats() const {
    const ConnectionTable::Counts c = connections_.counts();
    return HttpServerStats{.connections_accepted = c.served,
                           .connections_refused = c.refused,
                           .connections_refused_per_peer = c.refused_per_peer,
                           .connections_evicted_idle = c.evicted_idle,
                           .connections_evicted_head = c.evicted_head,
                           .tls_handshake_failures = handshake_failures_.load(),
                           .client_identity_refused = identity_refused_.load(),
                           .requests = requests_.load(),
                           .header_too_large = header_too_large_.load(),
                           .body_too_large = body_too_large_.load(),
                           .encoding_refused = encoding_refused_.load(),
                           .timeouts = timeouts_.load(),
                           .bad_requests = bad_requests_.load(),
                           .open_connections = c.open,
                           .idle_connections = c.idle};
  }

  // Route lookup and the handler call; exceptions become 500 (a handler must not take the server down).
  HttpResponse Dispatch(HttpRequest& req) {
    auto it = routes_.find({req.method, req.path});
    if (it == routes_.end()) {
      if (req.method == "GET" && req.path == "/version") {
        // Every daemon answers /version (its release), unless it serves the path itself.
        return HttpResponse{
            .content_type = "application/json",
            .body = std::string(R"({"version":")") + GPUSCHED_VERSION + R"(","component":")" + options_.name + "\"}\n"};
      }
      auto m = methods_.find(req.path);
      if (m == methods_.end()) {
        return HttpResponse{.status = 404, .body = "no such endpoint: " + req.path + "\n"};
      }
      std::string allow;
      for (const auto& name : m->second) {
        allow += (allow.empty() ? "" : ", ") + name;
      }
      return HttpResponse{
          .status = 405, .body = req.method + " is not allowed on " + req.path + "\n", .headers = {{"Allow", allow}}};
    }
    requests_.fetch_add(1);
    try {
      return it->second.handler(req);
    } catch (const std::exception& e) {
      common::Log(common::LogLevel::kError,
                  options_.name + ": handler for " + req.method + " " + req.path + " threw: " + e.what());
      return HttpResponse{.status = 500, .body = "internal error\n"};
    }
  }

  bool AllowedIdentity(const std::vector<std::string>& names) const {
    const auto& allowed = options_.tls.allowed_client_names;
    if (allowed.empty()) {
      return true;
    }
    return std::any_of(names.begin(), names.end(), [&](const std::string& n) {
      return std::find(allowed.begin(), allowed.end(), n) != allowed.end();
    });
  }

  void CountRefusal(int status) {
    switch (status) {
      case 413:
        body_too_large_.fetch_add(1);
        break;
      case 415:
      case 501:
        encoding_refused_.fetch_add(1);
        break;
      case 431:
        header_too_large_.fetch_add(1);
        break;
      case 408:
        timeouts_.fetch_add(1);
        break;
      default:
        bad_requests_.fetch_add(1);
        break;
    }
  }

  HttpServerOptions options_;
  struct Route {
    HttpHandler handler;
    HandlerRuns runs = HandlerRuns::kPool;
  };
  std::map<std::pair<std::string, std::string>, Route> routes_;
  std::map<std::string, std::set<std::string>> methods_;
  std::atomic<uint64_t> handshake_failures_{0}, identity_refused_{0}, requests_{0}, header_too_large_{0},
      body_too_large_{0}, encoding_refused_{0}, timeouts_{0}, bad_requests_{0};
  std::optional<asio::ssl::context> ssl_;

 private:
  void Run() {
    for (;;) {
      try {
        ioc_.run();
        return;
      } catch (const std::exception& e) {
        common::Log(common::LogLevel::kError, options_.name + ": I/O thread: " + e.what());
      }
    }
  }

  void Accept();

  std::mutex stop_mu_;
  bool stopped_ = false;
  int port_ = 0;
  std::vector<std::thread> threads_;

 public:
  ConnectionTable connections_;  // before ioc_: the sessions it destroys remove themselves from it

 private:
  // Last: destroyed first, with the sessions its queue still holds (they read the members above).
  asio::io_context ioc_;
  tcp::acceptor acceptor_;

 public:
  asio::thread_pool handlers_;  // runs Dispatch; declared after ioc_ so it is joined before ioc_ goes
};

namespace {

// One connection. Stream is beast::tcp_stream or beast::ssl_stream<beast::tcp_stream>. Each step re-arms the
// stream's deadline; an expired deadline closes the socket and the pending operation fails (the session ends).
template <class Stream>
class Session : public std::enable_shared_from_this<Session<Stream>> {
 public:
  static constexpr bool kTls = !std::is_same_v<Stream, beast::tcp_stream>;

  // `id`: the connection's entry in the server's ConnectionTable (admitted already); `address`: "ip:port".
  template <class... Args>
  Session(HttpServer::Impl& server, uint64_t id, std::string address, tcp::socket&& socket, Args&&... args)
      : server_(server),
        limits_(server.options_.limits),
        id_(id),
        stream_(std::move(socket), std::forward<Args>(args)...),
        buffer_(limits_.max_header_bytes + 64 * 1024) {
    peer_.address = std::move(address);
    peer_.tls = kTls;
  }
  ~Session() { server_.connections_.Remove(id_); }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  void Run() {
    // Closed on its own strand when the server picks it to make room for a new connection.
    server_.connections_.Attach(id_, [weak = this->weak_from_this()] {
      if (auto self = weak.lock()) {
        asio::post(self->stream_.get_executor(), [self] { self->Close(); });
      }
    });
    asio::dispatch(stream_.get_executor(), beast::bind_front_handler(&Session::Begin, this->shared_from_this()));
  }

 private:
  void Begin() {
    if constexpr (kTls) {
      // The handshake counts as reading the head: evictable only from the peer holding most (ConnectionTable).
      if (!server_.connections_.MarkReadingHead(id_)) {
        return Close();
      }
      beast::get_lowest_layer(stream_).expires_after(limits_.header_timeout);
      stream_.async_handshake(asio::ssl::stream_base::server,
                              beast::bind_front_handler(&Session::OnHandshake, this->shared_from_this()));
    } else {
      // Idle until its first byte, within header_timeout; the head then has what is left of it.
      beast::get_lowest_layer(stream_).expires_after(limits_.header_timeout);
      AwaitFirstBytes(false);
    }
  }

  void OnHandshake(beast::error_code ec) {
    if constexpr (kTls) {
      if (ec) {
        server_.handshake_failures_.fetch_add(1);
        return Close();
      }
      if (X509* cert = SSL_get1_peer_certificate(stream_.native_handle()); cert != nullptr) {
        peer_.client_certificate = SSL_get_verify_result(stream_.native_handle()) == X509_V_OK;
        peer_.names = CertificateNames(cert, peer_.common_name);
        X509_free(cert);
      }
      if (!server_.options_.tls.client_ca_file.empty()) {
        if (!peer_.client_certificate) {
          server_.handshake_failures_.fetch_add(1);
          return Close();
        }
        if (!server_.AllowedIdentity(peer_.names)) {
          server_.identity_refused_.fetch_add(1);
          forbidden_ = true;
        }
      }
    }
    ReadHeader();
  }

  // Waits for the first bytes of the next request (idle timeout) when nothing is buffered, then reads the head.
  void WaitForRequest() {
    if (buffer_.size() > 0) {
      if (!server_.connections_.MarkReadingHead(id_)) {
        return Close();
      }
      return ReadHeader();
    }
    beast::get_lowest_layer(stream_).expires_after(limits_.idle_timeout);
    AwaitFirstBytes(true);
  }

  // Idle (the first to be closed at the connection limit) until a byte arrives, under the deadline set; then reads
  // the head, with a fresh header_timeout after a keep-alive wait (`rearm`), else within the deadline left.
  void AwaitFirstBytes(bool rearm) {
    if (!server_.connections_.MarkIdle(id_)) {
      return Close();
    }
    stream_.async_read_some(buffer_.prepare(4096),
                            [self = this->shared_from_this(), rearm](beast::error_code ec, size_t n) {
                              if (ec) {
                                if (ec == beast::error::timeout) {
                                  self->server_.timeouts_.fetch_add(1);
                                }
                                return self->Close();
                              }
                              self->buffer_.commit(n);
                              if (!self->server_.connections_.MarkReadingHead(self->id_)) {
                                return self->Close();  // closed to make room as its request arrived
                              }
                              self->ReadHeader(rearm);
                            });
  }

  void ReadHeader(bool rearm = true) {
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(std::min<size_t>(limits_.max_header_bytes, UINT32_MAX)));
    parser_->body_limit(limits_.max_body_bytes);
    if (rearm) {
      beast::get_lowest_layer(stream_).expires_after(limits_.header_timeout);
    }
    http::async_read_header(stream_, buffer_, *parser_,
                            beast::bind_front_handler(&Session::OnHeader, this->shared_from_this()));
  }

  void OnHeader(beast::error_code ec, size_t) {
    if (ec) {
      if (ec == beast::error::timeout) {
        server_.timeouts_.fetch_add(1);
        return Close();
      }
      if (ec == http::error::end_of_stream || ec == asio::error::eof || ec == asio::ssl::error::stream_truncated ||
          ec == asio::error::connection_reset || ec == asio::error::operation_aborted) {
        return Close();
      }
      return Refuse(FromParseError(ec, limits_));
    }
    if (!server_.connections_.MarkBusy(id_)) {
      return Close();
    }
    if (forbidden_) {
      std::string names;
      for (const auto& n : peer_.names) {
        names += (names.empty() ? "" : ", ") + n;
      }
      return Refuse({403, "client certificate (" + (names.empty() ? std::string("no names") : names) +
                              ") is not allowed to call " + server_.options_.name});
    }
    if (Refusal r = CheckHeader(parser_->get().base(), limits_); r.status != 0) {
      return Refuse(r);
    }
    const auto expect = parser_->get()[http::field::expect];
    if (!expect.empty() && IEquals(std::string_view(expect.data(), expect.size()), "100-continue") &&
        !parser_->is_done()) {
      auto cont = std::make_shared<http::response<http::empty_body>>(http::status::continue_, parser_->get().version());
      beast::get_lowest_layer(stream_).expires_after(limits_.write_timeout);
      http::async_write(stream_, *cont, [self = this->shared_from_this(), cont](beast::error_code wec, size_t) {
        if (wec) {
          return self->Close();
        }
        self->ReadBody();
      });
      return;
    }
    ReadBody();
  }

  void ReadBody() {
    if (parser_->is_done()) {
      return OnBody({}, 0);
    }
    if (!parser_->chunked() && parser_->content_length().has_value()) {
      // A declared length (at most max_body_bytes: the parser refused more): read it straight into the body, in
      // pieces as large as the socket offers, instead of through the parser's 64 KiB steps. The body grows with
      // the bytes that arrived (reserve does not touch the pages), so a client that declares a large body and
      // sends little costs little.
      body_.clear();
      body_.reserve(DeclaredLength() + kBodySlack);
      const size_t have = std::min(buffer_.size(), DeclaredLength());
      body_.resize(have);
      asio::buffer_copy(asio::buffer(body_.data(), have), buffer_.data());
      buffer_.consume(have);
      beast::get_lowest_layer(stream_).expires_after(limits_.body_timeout);
      return ReadBodyPiece();
    }
    beast::get_lowest_layer(stream_).expires_after(limits_.body_timeout);
    http::async_read(stream_, buffer_, *parser_, beast::bind_front_handler(&Session::OnBody, this->shared_from_this()));
  }

  // Content-Length of the request being read (its parser lives until Dispatch).
  size_t DeclaredLength() const { return static_cast<size_t>(*parser_->content_length()); }

  void ReadBodyPiece() {
    const size_t got = body_.size();
    if (got == DeclaredLength()) {
      return Dispatch(std::move(body_));
    }
    // Room for what the socket holds now (at least 64 KiB when it holds nothing yet): resize zero-fills, so a
    // fixed large piece would clear megabytes per read of a few hundred KiB.
    beast::error_code ignored;
    const size_t ready = beast::get_lowest_layer(stream_).socket().available(ignored);
    const size_t piece = std::min(DeclaredLength() - got, std::max<size_t>(ready, 64 * 1024));
    body_.resize(got + piece);
    stream_.async_read_some(asio::buffer(body_.data() + got, piece),
                            [self = this->shared_from_this(), got](beast::error_code ec, size_t n) {
                              self->body_.resize(got + n);
                              if (ec) {
                                if (ec == beast::error::timeout) {
                                  self->server_.timeouts_.fetch_add(1);
                                } else {
                                  self->server_.bad_requests_.fetch_add(1);  // truncated: the client went away mid-body
                                }
                                return self->Close();
                              }
                              self->ReadBodyPiece();
                            });
  }

  void OnBody(beast::error_code ec, size_t) {
    if (ec) {
      if (ec == beast::error::timeout) {
        server_.timeouts_.fetch_add(1);
        return Close();
      }
      if (ec == http::error::body_limit || ec == http::error::bad_chunk || ec == http::error::bad_chunk_extension ||
          ec == http::error::bad_content_length) {
        return Refuse(FromParseError(ec, limits_));
      }
      server_.bad_requests_.fetch_add(1);
      return Close();
    }
    Dispatch(std::nullopt);
  }

  // Hands the request to a handler thread; the response comes back to this connection's strand.
  void Dispatch(std::optional<std::string> body) {
    const bool keep_alive = parser_->get().keep_alive();
    const unsigned version = parser_->get().version();
    auto req = std::make_shared<HttpRequest>();
    ConvertRequest(*parser_, *req);
    if (body.has_value()) {
      req->body = std::move(*body);
    }
    if (req->body.capacity() < req->body.size() + kBodySlack) {
      req->body.reserve(req->body.size() + kBodySlack);  // a small or chunked body: one copy
    }
    parser_.reset();
    req->peer = peer_;
    if (server_.RunsInline(*req)) {  // CPU only and short: two thread hand-offs would cost more than the work
      return Write(server_.Dispatch(*req), version, keep_alive);
    }
    asio::post(server_.handlers_, [self = this->shared_from_this(), req, version, keep_alive] {
      auto res = std::make_shared<HttpResponse>(self->server_.Dispatch(*req));
      asio::post(self->stream_.get_executor(),
                 [self, res, version, keep_alive] { self->Write(std::move(*res), version, keep_alive); });
    });
  }

  void Refuse(const Refusal& r) {
    server_.CountRefusal(r.status);
    Write(HttpResponse{.status = r.status, .body = server_.options_.name + ": " + r.reason + "\n"}, 11, false);
  }

  void Write(HttpResponse res, unsigned version, bool keep_alive) {
    auto msg = std::make_shared<http::response<http::string_body>>(static_cast<http::status>(res.status), version);
    msg->set(http::field::content_type, res.content_type);
    for (auto& [k, v] : res.headers) {
      msg->set(k, v);
    }
    msg->body() = std::move(res.body);
    msg->keep_alive(keep_alive);
    msg->prepare_payload();
    keep_alive_ = keep_alive;
    beast::get_lowest_layer(stream_).expires_after(limits_.write_timeout);
    http::async_write(stream_, *msg, [self = this->shared_from_this(), msg](beast::error_code ec, size_t) {
      if (ec) {
        if (ec == beast::error::timeout) {
          self->server_.timeouts_.fetch_add(1);
        }
        return self->Close();
      }
      if (!self->keep_alive_) {
        return self->LingerClose();
      }
      self->WaitForRequest();
    });
  }

  // After a response with Connection: close (a refusal, typically while the client is still sending its body):
  // stop sending, then read and discard what the client still sends for a bounded time and size before closing.
  // Closing at once would make the kernel answer the unread bytes with a reset, and the client would lose the
  // response it has not read yet. The bound keeps this from becoming a way to make the server read a huge body.
  void LingerClose() {
    auto& lowest = beast::get_lowest_layer(stream_);
    boost::system::error_code ignored;
    lowest.socket().shutdown(tcp::socket::shutdown_send, ignored);
    lowest.expires_after(std::chrono::milliseconds(1000));
    Drain();
  }

  void Drain() {
    if (drained_ >= kMaxLingerBytes) {
      return Close();
    }
    auto& lowest = beast::get_lowest_layer(stream_);
    lowest.async_read_some(asio::buffer(scratch_), [self = this->shared_from_this()](beast::error_code ec, size_t n) {
      if (ec) {
        return self->Close();
      }
      self->drained_ += n;
      self->Drain();
    });
  }

  void Close() {
    auto& socket = beast::get_lowest_layer(stream_).socket();
    boost::system::error_code ignored;
    socket.shutdown(tcp::socket::shutdown_both, ignored);
    socket.close(ignored);
  }

  HttpServer::Impl& server_;
  const HttpLimits& limits_;
  const uint64_t id_;
  Stream stream_;
  beast::flat_buffer buffer_;
  std::optional<Parser> parser_;
  Peer peer_;
  bool forbidden_ = false;
  bool keep_alive_ = false;
  std::string body_;  // a body of declared length, being read
  static constexpr size_t kMaxLingerBytes = 1 << 20;
  // Capacity past the end of every request body: parsers that read a little past the end (simdjson's padding, 64
  // bytes) then use the body where it lies instead of copying it. A body of declared length is read with it.
  static constexpr size_t kBodySlack = 64;
  std::array<char, 16 * 1024> scratch_{};
  size_t drained_ = 0;
};

}  // namespace

void HttpServer::Impl::Accept() {
  acceptor_.async_accept(asio::make_strand(ioc_), [this](beast::error_code ec, tcp::socket socket) {
    if (ec) {
      if (ec == asio::error::operation_aborted || !acceptor_.is_open()) {
        return;
      }
      return Accept();
    }
    // The peer is the remote IP address; a socket whose address cannot be read (reset already) is dropped.
    boost::system::error_code ignored;
    const auto remote = socket.remote_endpoint(ec);
    if (ec) {
      socket.close(ignored);
      return Accept();
    }
    std::string ip = remote.address().to_string();
    ConnectionTable::Admission admission = connections_.Admit(ip);
    if (admission.close_victim) {
      admission.close_victim();
    }
    if (admission.verdict != ConnectionTable::Verdict::kServed) {
      socket.close(ignored);
      return Accept();
    }
    std::string address = std::move(ip) + ":" + std::to_string(remote.port());
    socket.set_option(tcp::no_delay(true), ignored);
    if (ssl_) {
      std::make_shared<Session<beast::ssl_stream<beast::tcp_stream>>>(*this, admission.id, std::move(address),
                                                                      std::move(socket), *ssl_)
          ->Run();
    } else {
      std::make_shared<Session<beast::tcp_stream>>(*this, admission.id, std::move(address), std::move(socket))->Run();
    }
    Accept();
  });
}

common::Result<std::unique_ptr<HttpServer>> HttpServer::Create(HttpServerOptions options) {
  auto impl = std::make_unique<Impl>(std::move(options));
  if (auto s = impl->Init(); !s.ok()) {
    return s;
  }
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HttpServer::~HttpServer() { Stop(); }
void HttpServer::Handle(std::string method, std::string path, HttpHandler handler, HandlerRuns runs) {
  impl_->Handle(std::move(method), std::move(path), std::move(handler), runs);
}
common::Status HttpServer::Start() { return impl_->Start(); }
int HttpServer::port() const { return impl_->port(); }
void HttpServer::Stop() {
  if (impl_) {
    impl_->Stop();
  }
}
HttpServerStats HttpServer::stats() const { return impl_->Stats(); }
const HttpServerOptions& HttpServer::options() const { return impl_->options(); }

}  // namespace gpusched::net
