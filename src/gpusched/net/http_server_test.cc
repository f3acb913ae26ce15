// net::HttpServer on loopback: routing, and every limit an attacker would probe (oversized, chunked, compressed,
// header floods, slow and truncated requests, connection floods), plain and over TLS with client certificates.
// Raw sockets send exactly the bytes of each attack; libcurl is the well-behaved (TLS) client.

#include "gpusched/net/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <curl/curl.h>
#include <gtest/gtest.h>

#include "gpusched/testing/test_pki.h"

namespace gpusched::net {
namespace {

using namespace std::chrono_literals;

// A loopback socket connected to 127.0.0.1:port from `from` (a 127.0.0.0/8 address: another peer as the server
// sees it; Linux accepts any of them as a source); -1 on failure.
int ConnectFrom(int port, const char* from) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) {
    return -1;
  }
  sockaddr_in local{};
  local.sin_family = AF_INET;
  local.sin_port = 0;
  if (inet_pton(AF_INET, from, &local.sin_addr) != 1 ||
      bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof local) != 0) {
    close(fd);
    return -1;
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

int Connect(int port) { return ConnectFrom(port, "127.0.0.1"); }

// Polls `done` every 5 ms, up to 10 s; whether it came true (the server's accept loop runs on its own threads).
bool Eventually(const std::function<bool()>& done) {
  for (int i = 0; i < 2000; ++i) {
    if (done()) {
      return true;
    }
    std::this_thread::sleep_for(5ms);
  }
  return done();
}

// Raises the soft open-file limit to hold `fds` descriptors; false when the hard limit is lower.
bool RaiseFdLimit(rlim_t fds) {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0) {
    return false;
  }
  if (lim.rlim_cur >= fds) {
    return true;
  }
  if (lim.rlim_max != RLIM_INFINITY && lim.rlim_max < fds) {
    return false;
  }
  lim.rlim_cur = fds;
  return setrlimit(RLIMIT_NOFILE, &lim) == 0;
}

// Reads one response of Content-Length framing (the server's own) from a keep-alive connection; "" on close.
std::string ReadOneResponse(int fd, std::chrono::milliseconds wait = 3000ms) {
  std::string out;
  char buf[4096];
  for (;;) {
    const size_t end = out.find("\r\n\r\n");
    if (end != std::string::npos) {
      const size_t cl = out.find("Content-Length: ");
      const size_t len = cl == std::string::npos ? 0 : std::stoul(out.substr(cl + 16));
      if (out.size() >= end + 4 + len) {
        return out;
      }
    }
    pollfd p{.fd = fd, .events = POLLIN, .revents = 0};
    if (poll(&p, 1, static_cast<int>(wait.count())) <= 0) {
      return "";
    }
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) {
      return "";
    }
    out.append(buf, static_cast<size_t>(n));
  }
}

bool SendAll(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n <= 0) {
      return false;
    }
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// Reads until the peer closes or `wait` passes without data.
std::string ReadUntilClose(int fd, std::chrono::milliseconds wait = 3000ms) {
  std::string out;
  char buf[4096];
  for (;;) {
    pollfd p{.fd = fd, .events = POLLIN, .revents = 0};
    if (poll(&p, 1, static_cast<int>(wait.count())) <= 0) {
      break;
    }
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) {
      break;
    }
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

// Whether the server closed the connection within `wait` (recv returns 0 or an error).
bool ClosedWithin(int fd, std::chrono::milliseconds wait) {
  const auto deadline = std::chrono::steady_clock::now() + wait;
  char buf[4096];
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{.fd = fd, .events = POLLIN, .revents = 0};
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (poll(&p, 1, static_cast<int>(std::max<int64_t>(1, left.count()))) <= 0) {
      continue;
    }
    if (recv(fd, buf, sizeof buf, 0) <= 0) {
      return true;
    }
  }
  return false;
}

std::string Exchange(int port, std::string_view request) {
  const int fd = Connect(port);
  if (fd < 0) {
    return "connect failed";
  }
  SendAll(fd, request);
  std::string out = ReadUntilClose(fd);
  close(fd);
  return out;
}

int StatusOf(const std::string& response) {
  if (response.rfind("HTTP/1.1 ", 0) != 0 || response.size() < 12) {
    return 0;
  }
  return std::stoi(response.substr(9, 3));
}

class HttpServerTest : public ::testing::Test {
 protected:
  void StartServer(HttpServerOptions options) {
    auto made = HttpServer::Create(std::move(options));
    ASSERT_TRUE(made.ok()) << made.status().message();
    server_ = std::move(made).value();
    server_->Handle("POST", "/echo", [this](HttpRequest& req) {
      calls_.fetch_add(1);
      return HttpResponse{.body = req.body};
    });
    server_->Handle("GET", "/who", [this](HttpRequest& req) {
      calls_.fetch_add(1);
      std::string names;
      for (const auto& n : req.peer.names) {
        names += n + ";";
      }
      return HttpResponse{.body = (req.peer.client_certificate ? "cert:" : "nocert:") + names};
    });
    server_->Handle("GET", "/throw", [](HttpRequest&) -> HttpResponse { throw std::runtime_error("boom"); });
    ASSERT_TRUE(server_->Start().ok());
  }

  static HttpServerOptions Small() {
    HttpServerOptions o;
    o.name = "test";
    o.threads = 2;
    o.limits.max_body_bytes = 1024;
    o.limits.max_header_bytes = 2048;
    o.limits.max_header_fields = 20;
    o.limits.header_timeout = 300ms;
    o.limits.body_timeout = 300ms;
    o.limits.idle_timeout = 300ms;
    o.limits.max_connections = 8;
    return o;
  }

  // Serves GET /block with a handler that holds its pool thread until release_ is set.
  void HandleBlock() {
    server_->Handle("GET", "/block", [this](HttpRequest&) {
      entered_ = true;
      while (!release_.load()) {
        std::this_thread::sleep_for(5ms);
      }
      return HttpResponse{.body = "released"};
    });
  }
  // Sends GET /block on a new connection and waits until its handler holds a pool thread; the connection, or -1.
  int StartBlocked() {
    const int fd = Connect(server_->port());
    if (fd < 0 || !SendAll(fd, "GET /block HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")) {
      return -1;
    }
    for (int i = 0; i < 400 && !entered_.load(); ++i) {
      std::this_thread::sleep_for(5ms);
    }
    return entered_.load() ? fd : -1;
  }

  // A failed test must not leave /block holding the thread the server's destructor joins.
  void TearDown() override { release_ = true; }

  // Before server_: its handlers use them until it is destroyed.
  std::atomic<bool> release_{false};
  std::atomic<bool> entered_{false};
  std::atomic<int> calls_{0};
  std::unique_ptr<HttpServer> server_;
};

TEST_F(HttpServerTest, RoutesAndMethods) {
  StartServer(Small());
  const int port = server_->port();
  EXPECT_EQ(
      StatusOf(Exchange(port, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello")),
      200);
  const std::string r =
      Exchange(port, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello");
  EXPECT_NE(r.find("\r\n\r\nhello"), std::string::npos) << r;
  EXPECT_EQ(StatusOf(Exchange(port, "GET /nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")), 404);
  const std::string m = Exchange(port, "GET /echo HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(StatusOf(m), 405);
  EXPECT_NE(m.find("Allow: POST"), std::string::npos) << m;
  EXPECT_EQ(StatusOf(Exchange(port, "GET /throw HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")), 500);
  EXPECT_EQ(StatusOf(Exchange(port, "GARBAGE\r\n\r\n")), 400);
  // Every server answers GET /version with the release; other methods on it are unknown.
  const std::string v = Exchange(port, "GET /version HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(StatusOf(v), 200) << v;
  EXPECT_NE(v.find(R"({"version":")" GPUSCHED_TEST_VERSION R"(","component":")"), std::string::npos) << v;
  EXPECT_EQ(StatusOf(Exchange(port,
                              "POST /version HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: "
                              "close\r\n\r\n")),
            404);
}

// Stop() while connections keep arriving: the accept loop and the acceptor's close never run at once (ThreadSanitizer
// reported such a race when the close ran on another I/O thread than the accept loop).
TEST_F(HttpServerTest, StopWhileConnectionsArriveIsClean) {
  // Before the fix this found the race about once in 150 rounds under ThreadSanitizer.
  for (int round = 0; round < 150; ++round) {
    HttpServerOptions o = Small();
    o.threads = 4;
    o.limits.max_connections = 1000;
    auto made = HttpServer::Create(o);
    ASSERT_TRUE(made.ok()) << made.status();
    std::unique_ptr<HttpServer> server = std::move(made).value();
    ASSERT_TRUE(server->Start().ok());
    const int port = server->port();
    std::atomic<bool> stop{false};
    std::vector<std::thread> clients;
    for (int c = 0; c < 3; ++c) {
      clients.emplace_back([&stop, port] {
        while (!stop.load()) {
          const int fd = Connect(port);
          if (fd >= 0) {
            ::close(fd);
          }
        }
      });
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5 + round % 7));
    server->Stop();
    stop = true;
    for (auto& t : clients) {
      t.join();
    }
  }
}

TEST_F(HttpServerTest, KeepAliveServesSeveralRequestsOnOneConnection) {
  StartServer(Small());
  const int fd = Connect(server_->port());
  ASSERT_GE(fd, 0);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(SendAll(fd, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nok"));
    char buf[1024];
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    ASSERT_GT(n, 0);
    EXPECT_EQ(StatusOf(std::string(buf, static_cast<size_t>(n))), 200);
  }
  close(fd);
  EXPECT_EQ(calls_.load(), 3);
}

// A body of declared length is read straight into the request, in pieces as the socket delivers them: a body that
// arrives in several sends (one piece already in the buffer with the head) comes out whole, with the documented
// slack capacity past its end; a request pipelined right behind it is served next, in order.
TEST_F(HttpServerTest, BodiesArriveInPiecesAndPipelinedRequestsFollow) {
  HttpServerOptions o = Small();
  o.limits.max_body_bytes = 1 << 20;
  auto made = HttpServer::Create(std::move(o));
  ASSERT_TRUE(made.ok()) << made.status().message();
  server_ = std::move(made).value();
  std::atomic<bool> padded{true};
  server_->Handle("POST", "/len", [&](HttpRequest& req) {
    calls_.fetch_add(1);
    if (req.body.capacity() < req.body.size() + 64) {
      padded = false;
    }
    size_t sum = 0;  // a checksum of the bytes, so a piece in the wrong place shows
    for (size_t i = 0; i < req.body.size(); ++i) {
      sum += static_cast<unsigned char>(req.body[i]) * (i % 7 + 1);
    }
    return HttpResponse{.body = std::to_string(req.body.size()) + ":" + std::to_string(sum)};
  });
  ASSERT_TRUE(server_->Start().ok());

  std::string body(300 * 1024, '\0');
  size_t want_sum = 0;
  for (size_t i = 0; i < body.size(); ++i) {
    body[i] = static_cast<char>('a' + (i * 31 + i / 1000) % 26);
    want_sum += static_cast<unsigned char>(body[i]) * (i % 7 + 1);
  }
  const std::string want = std::to_string(body.size()) + ":" + std::to_string(want_sum);
  const std::string head =
      "POST /len HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n";
  const int fd = Connect(server_->port());
  ASSERT_GE(fd, 0);
  // The head with the first 100 bytes, then the rest in uneven pieces with pauses (each a separate read).
  ASSERT_TRUE(SendAll(fd, head + body.substr(0, 100)));
  size_t at = 100;
  for (size_t piece : {size_t{7}, size_t{70000}, size_t{1}, size_t{150000}}) {
    std::this_thread::sleep_for(20ms);
    ASSERT_TRUE(SendAll(fd, std::string_view(body).substr(at, piece)));
    at += piece;
  }
  // The rest of the body, then two more requests, all in one send.
  const std::string small = "POST /len HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc";
  ASSERT_TRUE(SendAll(
      fd, body.substr(at) + small + "POST /len HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"));
  const std::string out = ReadUntilClose(fd);
  close(fd);
  // "abc": 97*1 + 98*2 + 99*3 = 590
  const size_t first = out.find("\r\n\r\n" + want);
  const size_t second = out.find("\r\n\r\n3:590", first == std::string::npos ? 0 : first);
  const size_t third = out.find("\r\n\r\n0:0", second == std::string::npos ? 0 : second);
  EXPECT_NE(first, std::string::npos) << out.substr(0, 400);
  EXPECT_NE(second, std::string::npos) << out;
  EXPECT_NE(third, std::string::npos) << out;
  EXPECT_EQ(calls_.load(), 3);
  EXPECT_TRUE(padded.load());
}

// Handlers run on their own pool: one that blocks (a bind waiting on the API server) holds neither the I/O threads
// nor the other connections.
TEST_F(HttpServerTest, ABlockedHandlerDoesNotHoldUpOtherConnections) {
  auto made = HttpServer::Create(Small());
  ASSERT_TRUE(made.ok()) << made.status().message();
  server_ = std::move(made).value();
  HandleBlock();
  server_->Handle("GET", "/ping", [](HttpRequest&) { return HttpResponse{.body = "pong"}; });
  ASSERT_TRUE(server_->Start().ok());

  const int blocked = StartBlocked();
  ASSERT_GE(blocked, 0) << "GET /block never reached its handler";
  // Served while /block still holds its handler thread.
  const std::string pong = Exchange(server_->port(), "GET /ping HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(StatusOf(pong), 200) << pong;
  EXPECT_NE(pong.find("pong"), std::string::npos);
  release_ = true;
  const std::string released = ReadUntilClose(blocked);
  close(blocked);
  EXPECT_NE(released.find("released"), std::string::npos) << released;
}

// kInlineIfSmall: a small body is answered on the I/O thread even while every pool thread is blocked; a body over
// kInlineBodyBytes for the same route waits for the pool.
TEST_F(HttpServerTest, InlineHandlersServeSmallBodiesWithoutThePool) {
  HttpServerOptions o = Small();
  o.threads = 1;  // one I/O thread, one pool thread
  o.limits.max_body_bytes = 2 * kInlineBodyBytes;
  auto made = HttpServer::Create(o);
  ASSERT_TRUE(made.ok()) << made.status().message();
  server_ = std::move(made).value();
  HandleBlock();
  server_->Handle(
      "POST", "/size", [](HttpRequest& req) { return HttpResponse{.body = std::to_string(req.body.size())}; },
      HandlerRuns::kInlineIfSmall);
  server_->Handle(
      "GET", "/throw", [](HttpRequest&) -> HttpResponse { throw std::runtime_error("boom"); },
      HandlerRuns::kInlineIfSmall);
  ASSERT_TRUE(server_->Start().ok());

  const int blocked = StartBlocked();
  ASSERT_GE(blocked, 0) << "GET /block never reached its handler";
  // The pool's only thread is held: a small body is still answered, inline; an inline handler that throws is a 500
  // and the server goes on.
  const std::string small = Exchange(
      server_->port(), "POST /size HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello");
  EXPECT_EQ(StatusOf(small), 200) << small;
  EXPECT_TRUE(small.ends_with("\r\n\r\n5")) << small;
  EXPECT_EQ(StatusOf(Exchange(server_->port(), "GET /throw HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")), 500);

  // A large body goes to the pool: no answer while the pool is blocked, the answer once it is released.
  const size_t big = kInlineBodyBytes + 1;
  const int large = Connect(server_->port());
  ASSERT_GE(large, 0);
  ASSERT_TRUE(SendAll(large, "POST /size HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(big) +
                                 "\r\nConnection: close\r\n\r\n" + std::string(big, 'x')));
  std::this_thread::sleep_for(200ms);
  char byte = 0;
  EXPECT_EQ(recv(large, &byte, 1, MSG_DONTWAIT), -1) << "answered while the pool was blocked";
  release_ = true;
  const std::string answer = ReadUntilClose(large);
  close(large);
  EXPECT_TRUE(answer.ends_with("\r\n\r\n" + std::to_string(big))) << answer.substr(0, 200);
  EXPECT_NE(ReadUntilClose(blocked).find("released"), std::string::npos);
  close(blocked);
}

// Each attack is refused with its status and never reaches a handler.
TEST_F(HttpServerTest, RefusesOversizedCompressedAndMalformedRequests) {
  StartServer(Small());
  const int port = server_->port();
  struct Case {
    std::string name;
    std::string request;
    int want;
  };
  const std::string big(4096, 'x');
  std::string many_fields;
  for (int i = 0; i < 30; ++i) {
    many_fields += "X-" + std::to_string(i) + ": 1\r\n";  // 30 fields of ~8 bytes: under the byte limit
  }
  const std::vector<Case> cases = {
      // Content-Length over the limit: refused before any body byte is read.
      {"declared body too large", "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\n", 413},
      // Chunked: counted as it arrives (two chunks of 1 KiB -> 2048 > 1024).
      {"chunked body too large",
       "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n400\r\n" + std::string(1024, 'a') +
           "\r\n400\r\n" + std::string(1024, 'b') + "\r\n0\r\n\r\n",
       413},
      {"gzip body", "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Encoding: gzip\r\nContent-Length: 4\r\n\r\nabcd", 415},
      {"br in a list",
       "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Encoding: identity, br\r\nContent-Length: 4\r\n\r\nabcd", 415},
      {"transfer-encoding gzip",
       "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n4\r\nabcd\r\n0\r\n\r\n", 501},
      {"header too large", "GET /who HTTP/1.1\r\nHost: x\r\nX-Big: " + big + "\r\n\r\n", 431},
      {"too many header fields", "GET /who HTTP/1.1\r\nHost: x\r\n" + many_fields + "\r\n", 431},
      {"bad chunk size", "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabcd\r\n0\r\n\r\n",
       400},
      {"two content lengths", "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nContent-Length: 5\r\n\r\nabcd",
       400},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string r = Exchange(port, c.request);
    EXPECT_EQ(StatusOf(r), c.want) << r;
    // And the same verdict from the parser the fuzz target drives.
    const ParseOutcome p = ParseRequestBytes(c.request, server_->options().limits);
    EXPECT_FALSE(p.complete);
    EXPECT_EQ(p.status, c.want) << p.reason;
  }
  EXPECT_EQ(calls_.load(), 0);
  const HttpServerStats s = server_->stats();
  EXPECT_EQ(s.requests, 0U);
  EXPECT_EQ(s.body_too_large, 2U);
  EXPECT_EQ(s.encoding_refused, 3U);
  EXPECT_EQ(s.header_too_large, 2U);
}

TEST_F(HttpServerTest, ChunkedBodyWithinTheLimitIsServed) {
  StartServer(Small());
  const std::string r =
      Exchange(server_->port(),
               "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
               "3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n");
  EXPECT_EQ(StatusOf(r), 200) << r;
  EXPECT_NE(r.find("\r\n\r\nabcde"), std::string::npos) << r;
}

// Slowloris: a head sent a byte at a time never completes within header_timeout; the server closes the connection.
TEST_F(HttpServerTest, SlowHeaderIsCutOff) {
  StartServer(Small());
  const int fd = Connect(server_->port());
  ASSERT_GE(fd, 0);
  const std::string head = "GET /who HTTP/1.1\r\nHost: x\r\nX-Slow: ";
  const auto start = std::chrono::steady_clock::now();
  bool closed = false;
  for (size_t i = 0; i < 100 && !closed; ++i) {
    if (!SendAll(fd, std::string(1, i < head.size() ? head[i] : 'a'))) {
      closed = true;
      break;
    }
    closed = ClosedWithin(fd, 50ms);
  }
  const auto took = std::chrono::steady_clock::now() - start;
  close(fd);
  EXPECT_TRUE(closed) << "still open after trickling 100 bytes";
  EXPECT_LT(took, 3s);
  EXPECT_EQ(calls_.load(), 0);
  // Beast closes the socket when the deadline passes and completes the read (which counts the timeout) just after,
  // so the client may see the close first.
  for (int i = 0; i < 200 && server_->stats().timeouts == 0; ++i) {
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_GE(server_->stats().timeouts, 1U);
}

// A body that stops half way (client gone or stalled) is never handed to a handler.
TEST_F(HttpServerTest, TruncatedAndStalledBodiesNeverReachAHandler) {
  StartServer(Small());
  // Stalled: 10 of 100 bytes, then silence -> closed after body_timeout.
  int fd = Connect(server_->port());
  ASSERT_TRUE(SendAll(fd, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123456789"));
  EXPECT_TRUE(ClosedWithin(fd, 3s));
  close(fd);
  // Truncated: the client half-closes after 10 bytes.
  fd = Connect(server_->port());
  ASSERT_TRUE(SendAll(fd, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123456789"));
  shutdown(fd, SHUT_WR);
  EXPECT_TRUE(ClosedWithin(fd, 3s));
  close(fd);
  EXPECT_EQ(calls_.load(), 0);
}

TEST_F(HttpServerTest, IdleKeepAliveConnectionIsClosed) {
  StartServer(Small());
  const int fd = Connect(server_->port());
  ASSERT_TRUE(SendAll(fd, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nok"));
  char buf[1024];
  ASSERT_GT(recv(fd, buf, sizeof buf, 0), 0);
  EXPECT_TRUE(ClosedWithin(fd, 3s));
  close(fd);
}

// At max_connections with nothing that may give way (every peer holds one connection, reading its head), a new
// connection is closed at once; the server keeps serving once they go.
TEST_F(HttpServerTest, ConnectionLimit) {
  HttpServerOptions o = Small();
  o.limits.header_timeout = 30s;  // the held connections must outlive the test's checks
  StartServer(o);
  std::vector<int> held;
  for (size_t i = 0; i < o.limits.max_connections; ++i) {
    const std::string from = "127.0.1." + std::to_string(i + 1);
    held.push_back(ConnectFrom(server_->port(), from.c_str()));
    ASSERT_GE(held.back(), 0);
    ASSERT_TRUE(SendAll(held.back(), "GET /who HTTP/1.1\r\n"));  // a head that never ends
  }
  // Wait until the server has accepted all of them and read their first bytes.
  ASSERT_TRUE(Eventually([&] {
    const HttpServerStats st = server_->stats();
    return st.open_connections == o.limits.max_connections && st.idle_connections == 0;
  }));
  const int extra = ConnectFrom(server_->port(), "127.0.2.1");
  ASSERT_GE(extra, 0);  // the kernel accepts; the server closes it
  EXPECT_TRUE(ClosedWithin(extra, 2s));
  close(extra);
  EXPECT_GE(server_->stats().connections_refused, 1U);
  EXPECT_EQ(server_->stats().connections_evicted_head, 0U);
  for (int fd : held) {
    close(fd);
  }
  ASSERT_TRUE(Eventually([&] { return server_->stats().open_connections == 0; }));
  EXPECT_EQ(StatusOf(Exchange(server_->port(), "GET /who HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")), 200);
}

constexpr std::string_view kKeepAliveGet = "GET /who HTTP/1.1\r\nHost: x\r\n\r\n";
constexpr std::string_view kProbe = "GET /who HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";

// The per-peer cap: one peer's excess is closed at once while its connections are busy (slow heads here), they
// keep working, and another peer is served. Once the peer's own connections are idle, the one idle longest gives
// way to its new one instead.
TEST_F(HttpServerTest, PerPeerCapRefusesTheExcessFromOnePeerOnly) {
  HttpServerOptions o = Small();
  o.limits.max_connections = 32;
  o.limits.max_connections_per_peer = 4;
  o.limits.header_timeout = 30s;
  o.limits.idle_timeout = 30s;
  StartServer(o);
  std::vector<int> tenant;
  for (int i = 0; i < 4; ++i) {
    tenant.push_back(ConnectFrom(server_->port(), "127.0.0.2"));
    ASSERT_GE(tenant.back(), 0);
    ASSERT_TRUE(SendAll(tenant.back(), "GET /who HTTP/1.1\r\n"));  // the head follows later
  }
  ASSERT_TRUE(Eventually([&] {
    const HttpServerStats st = server_->stats();
    return st.open_connections == 4 && st.idle_connections == 0;
  }));
  std::vector<int> excess;
  for (int i = 0; i < 6; ++i) {
    excess.push_back(ConnectFrom(server_->port(), "127.0.0.2"));
    ASSERT_GE(excess.back(), 0);
  }
  ASSERT_TRUE(Eventually([&] { return server_->stats().connections_refused_per_peer == 6; }));
  for (int fd : excess) {
    EXPECT_TRUE(ClosedWithin(fd, 2s));
    close(fd);
  }
  EXPECT_EQ(server_->stats().connections_accepted, 4U);
  EXPECT_EQ(server_->stats().connections_refused, 0U);
  // Another peer is served while the tenant holds its four.
  EXPECT_EQ(StatusOf(Exchange(server_->port(), kProbe)), 200);
  // The tenant's four finish their heads and are answered; then idle, the one idle longest makes room for a fifth.
  // One after the other, each idle before the next is answered: the workers could otherwise finish them in any
  // order, and tenant[0] would not be the one idle longest.
  for (size_t i = 0; i < tenant.size(); ++i) {
    ASSERT_TRUE(SendAll(tenant[i], "Host: x\r\n\r\n"));
    ASSERT_EQ(StatusOf(ReadOneResponse(tenant[i])), 200);
    ASSERT_TRUE(Eventually([&] { return server_->stats().idle_connections == i + 1; }));
  }
  const int fifth = ConnectFrom(server_->port(), "127.0.0.2");
  ASSERT_TRUE(SendAll(fifth, kProbe));
  EXPECT_EQ(StatusOf(ReadUntilClose(fifth)), 200);
  close(fifth);
  EXPECT_TRUE(ClosedWithin(tenant[0], 2s));
  EXPECT_EQ(server_->stats().connections_evicted_idle, 1U);
  EXPECT_EQ(server_->stats().connections_refused_per_peer, 6U);
  for (int fd : tenant) {
    close(fd);
  }
}

// At the global cap an idle keep-alive connection gives way: the new connection is served and the one idle longest
// is closed; the other idle ones keep working.
TEST_F(HttpServerTest, AtTheCapTheNewConnectionIsServedAndTheIdleLongestClosed) {
  HttpServerOptions o = Small();
  o.limits.max_connections = 4;
  o.limits.max_connections_per_peer = 4;
  o.limits.header_timeout = 30s;
  o.limits.idle_timeout = 30s;
  StartServer(o);
  std::vector<int> fds;
  for (int i = 0; i < 4; ++i) {
    fds.push_back(ConnectFrom(server_->port(), "127.0.0.2"));
    ASSERT_GE(fds.back(), 0);
  }
  ASSERT_TRUE(Eventually([&] { return server_->stats().idle_connections == 4; }));
  // Each serves a request, in the order 0, 1, 2, 3, then 0 again: 1 is now idle longest.
  for (int i : {0, 1, 2, 3, 0}) {
    ASSERT_TRUE(SendAll(fds[static_cast<size_t>(i)], kKeepAliveGet));
    ASSERT_EQ(StatusOf(ReadOneResponse(fds[static_cast<size_t>(i)])), 200);
    ASSERT_TRUE(Eventually([&] { return server_->stats().idle_connections == 4; }));
  }
  EXPECT_EQ(StatusOf(Exchange(server_->port(), kProbe)), 200);  // from 127.0.0.1
  EXPECT_TRUE(ClosedWithin(fds[1], 2s));
  for (int i : {0, 2, 3}) {
    ASSERT_TRUE(SendAll(fds[static_cast<size_t>(i)], kKeepAliveGet));
    EXPECT_EQ(StatusOf(ReadOneResponse(fds[static_cast<size_t>(i)])), 200) << "connection " << i;
  }
  const HttpServerStats st = server_->stats();
  EXPECT_EQ(st.connections_evicted_idle, 1U);
  EXPECT_EQ(st.connections_refused, 0U);
  for (int fd : fds) {
    close(fd);
  }
  const std::string text = RenderStats(st, "t");
  EXPECT_NE(text.find("t_http_evictions_total{state=\"idle\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("t_http_connections_total{result=\"refused_per_peer\"} 0\n"), std::string::npos) << text;
}

// The attack: one peer opens `n` keep-alive connections, sends one request on each and leaves them open; 40 fresh
// probes from another peer (the kubelet: the node's address) are all answered.
class ProbeStarvationTest : public HttpServerTest, public ::testing::WithParamInterface<int> {};

TEST_P(ProbeStarvationTest, ProbesFromAnotherPeerAreAllAnswered) {
  const int n = GetParam();
  if (!RaiseFdLimit(static_cast<rlim_t>(n) + 512)) {
    GTEST_SKIP() << "the open-file hard limit is below " << n + 512 << ": cannot hold " << n << " connections";
  }
  HttpServerOptions o = Small();
  o.limits.max_connections = 64;  // the agent's
  o.limits.max_connections_per_peer = 16;
  o.limits.header_timeout = 30s;
  o.limits.idle_timeout = 30s;
  StartServer(o);
  std::vector<int> tenant;
  for (int i = 0; i < n; ++i) {
    const int fd = ConnectFrom(server_->port(), "127.0.0.2");
    ASSERT_GE(fd, 0) << "connection " << i;
    SendAll(fd, kKeepAliveGet);  // fails on those already closed
    tenant.push_back(fd);
  }
  // Every connection was served or refused; of those served, 16 are left (the peer's own idle ones made room for
  // its newer ones at its cap), idle after their request.
  ASSERT_TRUE(Eventually([&] {
    const HttpServerStats st = server_->stats();
    return st.connections_accepted + st.connections_refused_per_peer == static_cast<uint64_t>(n) &&
           st.open_connections == 16 && st.idle_connections == 16;
  }));
  EXPECT_EQ(server_->stats().connections_accepted, 16 + server_->stats().connections_evicted_idle);
  int ok = 0;
  for (int i = 0; i < 40; ++i) {
    ok += StatusOf(Exchange(server_->port(), kProbe)) == 200 ? 1 : 0;
  }
  EXPECT_EQ(ok, 40);
  const HttpServerStats st = server_->stats();
  EXPECT_EQ(st.connections_refused_per_peer + st.connections_evicted_idle, static_cast<uint64_t>(n - 16));
  EXPECT_EQ(st.connections_refused, 0U);
  for (int fd : tenant) {
    close(fd);
  }
}

INSTANTIATE_TEST_SUITE_P(IdleConnections, ProbeStarvationTest, ::testing::Values(64, 256, 1024));

// Several peers together fill the server with idle connections: probes evict idle ones, none is refused.
TEST_F(HttpServerTest, ProbesAreAnsweredWhenIdleConnectionsOfManyPeersFillTheServer) {
  HttpServerOptions o = Small();
  o.limits.max_connections = 64;
  o.limits.max_connections_per_peer = 16;
  o.limits.header_timeout = 30s;
  o.limits.idle_timeout = 30s;
  StartServer(o);
  std::vector<int> tenants;
  for (int peer = 0; peer < 4; ++peer) {
    const std::string from = "127.0.0." + std::to_string(peer + 2);
    for (int i = 0; i < 16; ++i) {
      tenants.push_back(ConnectFrom(server_->port(), from.c_str()));
      ASSERT_GE(tenants.back(), 0);
      ASSERT_TRUE(SendAll(tenants.back(), kKeepAliveGet));
    }
  }
  ASSERT_TRUE(Eventually([&] { return server_->stats().idle_connections == 64; }));
  int ok = 0;
  for (int i = 0; i < 40; ++i) {
    ok += StatusOf(Exchange(server_->port(), kProbe)) == 200 ? 1 : 0;
  }
  EXPECT_EQ(ok, 40);
  EXPECT_GE(server_->stats().connections_evicted_idle, 1U);
  EXPECT_EQ(server_->stats().connections_refused, 0U);
  for (int fd : tenants) {
    close(fd);
  }
}

// Active slow heads: one peer's flood is held to its cap; several peers filling the server give way to a probe,
// the peer holding most first.
TEST_F(HttpServerTest, SlowHeadsAreBoundedPerPeerAndTheLargestHolderGivesWay) {
  HttpServerOptions o = Small();
  o.limits.max_connections = 64;
  o.limits.max_connections_per_peer = 16;
  o.limits.header_timeout = 30s;
  StartServer(o);
  std::vector<int> slow;
  auto open_slow = [&](const char* from, int count) {
    for (int i = 0; i < count; ++i) {
      const int fd = ConnectFrom(server_->port(), from);
      ASSERT_GE(fd, 0);
      SendAll(fd, "GET /who HTTP/1.1\r\nHost: x\r\nX-Slow: ");  // never finished
      slow.push_back(fd);
    }
  };
  open_slow("127.0.0.2", 200);
  ASSERT_TRUE(Eventually([&] {
    const HttpServerStats st = server_->stats();
    return st.connections_accepted + st.connections_refused_per_peer == 200 && st.idle_connections == 0;
  }));
  EXPECT_EQ(server_->stats().open_connections, 16U);
  EXPECT_EQ(StatusOf(Exchange(server_->port(), kProbe)), 200);
  ASSERT_TRUE(Eventually([&] { return server_->stats().open_connections == 16; }));  // the probe's is gone
  // Three more peers at their cap: 4 x 16 fill the server with slow heads.
  open_slow("127.0.0.3", 16);
  open_slow("127.0.0.4", 16);
  open_slow("127.0.0.5", 16);
  ASSERT_TRUE(Eventually([&] {
    const HttpServerStats st = server_->stats();
    return st.open_connections == 64 && st.idle_connections == 0;
  }));
  int ok = 0;
  for (int i = 0; i < 40; ++i) {
    ok += StatusOf(Exchange(server_->port(), kProbe)) == 200 ? 1 : 0;
  }
  EXPECT_EQ(ok, 40);
  EXPECT_GE(server_->stats().connections_evicted_head, 1U);
  EXPECT_EQ(server_->stats().connections_refused, 0U);
  for (int fd : slow) {
    close(fd);
  }
}

TEST(HttpServerOptionsTest, BadOptionsAreErrors) {
  HttpServerOptions o;
  o.tls.cert_file = "/nonexistent/cert.pem";
  o.tls.key_file = "/nonexistent/key.pem";
  auto r = HttpServer::Create(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("/nonexistent/cert.pem"), std::string::npos) << r.status().message();
  HttpServerOptions names;
  names.tls.allowed_client_names = {"kube-scheduler"};
  EXPECT_FALSE(HttpServer::Create(names).ok());
  HttpServerOptions ca;
  ca.tls.client_ca_file = "/x";
  EXPECT_FALSE(HttpServer::Create(ca).ok());
  HttpServerOptions per_peer;
  per_peer.limits.max_connections_per_peer = 0;
  auto p = HttpServer::Create(per_peer);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("max_connections_per_peer"), std::string::npos) << p.status().message();
  HttpServerOptions host;
  host.host = "not-an-ip";
  auto h = HttpServer::Create(host);
  ASSERT_TRUE(h.ok());
  EXPECT_FALSE((*h)->Start().ok());
}

TEST(IsLoopbackHostTest, Table) {
  EXPECT_TRUE(IsLoopbackHost("127.0.0.1"));
  EXPECT_TRUE(IsLoopbackHost("127.1.2.3"));
  EXPECT_TRUE(IsLoopbackHost("::1"));
  EXPECT_TRUE(IsLoopbackHost("[::1]"));
  EXPECT_TRUE(IsLoopbackHost("localhost"));
  EXPECT_FALSE(IsLoopbackHost("0.0.0.0"));
  EXPECT_FALSE(IsLoopbackHost("::"));
  EXPECT_FALSE(IsLoopbackHost("10.0.0.1"));
  EXPECT_FALSE(IsLoopbackHost("example.com"));
}

// --- TLS with client certificates -------------------------------------------------------------------------------

size_t Collect(char* data, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

struct CurlResult {
  CURLcode code = CURLE_OK;
  long status = 0;
  std::string body;
};

CurlResult TlsGet(int port, const testing::TestPki& pki, const std::string& cert, const std::string& key) {
  CurlResult r;
  CURL* c = curl_easy_init();
  const std::string url = "https://127.0.0.1:" + std::to_string(port) + "/who";
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_CAINFO, pki.ca_file.c_str());
  if (!cert.empty()) {
    curl_easy_setopt(c, CURLOPT_SSLCERT, cert.c_str());
    curl_easy_setopt(c, CURLOPT_SSLKEY, key.c_str());
  }
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, Collect);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &r.body);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 5000L);
  r.code = curl_easy_perform(c);
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
  curl_easy_cleanup(c);
  return r;
}

class HttpServerTlsTest : public HttpServerTest {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir("gpusched-net-tls");
    ASSERT_FALSE(dir_.empty());
    auto pki = testing::MakeTestPki(dir_);
    ASSERT_TRUE(pki.ok()) << pki.status().message();
    pki_ = *pki;
  }
  void TearDown() override {
    server_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  HttpServerOptions Tls(std::vector<std::string> allowed) const {
    HttpServerOptions o = Small();
    o.tls = TlsOptions{.cert_file = pki_.server_cert_file,
                       .key_file = pki_.server_key_file,
                       .client_ca_file = pki_.ca_file,
                       .allowed_client_names = std::move(allowed)};
    return o;
  }
  std::string dir_;
  testing::TestPki pki_;
};

TEST_F(HttpServerTlsTest, OnlyAllowedClientCertificatesReachHandlers) {
  StartServer(Tls({"gpusched"}));
  const int port = server_->port();
  // The allowed identity: its names reach the handler.
  CurlResult ok = TlsGet(port, pki_, pki_.client_cert_file, pki_.client_key_file);
  ASSERT_EQ(ok.code, CURLE_OK) << curl_easy_strerror(ok.code);
  EXPECT_EQ(ok.status, 200);
  EXPECT_EQ(ok.body, "cert:gpusched;");
  // No client certificate: the handshake fails.
  CurlResult none = TlsGet(port, pki_, "", "");
  EXPECT_TRUE(none.code != CURLE_OK || none.status != 200) << none.body;
  // The same subject from another CA: the handshake fails.
  CurlResult other = TlsGet(port, pki_, pki_.other_client_cert_file, pki_.other_client_key_file);
  EXPECT_TRUE(other.code != CURLE_OK || other.status != 200) << other.body;
  // Plain HTTP to the TLS port: no response.
  EXPECT_EQ(StatusOf(Exchange(port, "GET /who HTTP/1.1\r\nHost: x\r\n\r\n")), 0);
  EXPECT_EQ(calls_.load(), 1);
  EXPECT_GE(server_->stats().tls_handshake_failures, 2U);
}

TEST_F(HttpServerTlsTest, ValidCertificateWithANameNotAllowedGets403) {
  StartServer(Tls({"kube-scheduler"}));
  CurlResult r = TlsGet(server_->port(), pki_, pki_.client_cert_file, pki_.client_key_file);
  ASSERT_EQ(r.code, CURLE_OK) << curl_easy_strerror(r.code);
  EXPECT_EQ(r.status, 403);
  EXPECT_NE(r.body.find("gpusched"), std::string::npos) << r.body;
  EXPECT_EQ(calls_.load(), 0);
  EXPECT_EQ(server_->stats().client_identity_refused, 1U);
}

// TLS connections that never start their handshake count as reading a head: with the server full of them, the
// address holding most gives way to a probe from another.
TEST_F(HttpServerTlsTest, HandshakesThatNeverStartGiveWayToAProbe) {
  HttpServerOptions o = Small();
  o.tls = TlsOptions{.cert_file = pki_.server_cert_file, .key_file = pki_.server_key_file};
  o.limits.max_connections = 8;
  o.limits.max_connections_per_peer = 4;
  o.limits.header_timeout = 30s;
  StartServer(o);
  std::vector<int> silent;
  for (const char* from : {"127.0.0.2", "127.0.0.3"}) {
    for (int i = 0; i < 4; ++i) {
      silent.push_back(ConnectFrom(server_->port(), from));
      ASSERT_GE(silent.back(), 0);
    }
  }
  ASSERT_TRUE(Eventually([&] {
    const HttpServerStats st = server_->stats();
    return st.open_connections == 8 && st.idle_connections == 0;
  }));
  for (int i = 0; i < 3; ++i) {
    CurlResult r = TlsGet(server_->port(), pki_, "", "");
    ASSERT_EQ(r.code, CURLE_OK) << curl_easy_strerror(r.code);
    EXPECT_EQ(r.status, 200);
  }
  EXPECT_GE(server_->stats().connections_evicted_head, 1U);
  EXPECT_EQ(server_->stats().connections_refused, 0U);
  for (int fd : silent) {
    close(fd);
  }
}

TEST_F(HttpServerTlsTest, KeyThatDoesNotMatchIsAnError) {
  HttpServerOptions o = Tls({});
  o.tls.key_file = pki_.client_key_file;
  auto r = HttpServer::Create(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("key"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find(pki_.client_key_file), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace gpusched::net
