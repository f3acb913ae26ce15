// net::HttpClient against net::HttpServer on loopback: methods, headers and bodies, connection reuse, transport
// failures as Status, TLS with and without client certificates (and the wrong CA), and streams that are stopped,
// aborted by their reader, or stall after the response began (a raw socket server that stops sending).

#include "gpusched/net/http_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "gpusched/net/http_server.h"
#include "gpusched/testing/test_pki.h"

namespace gpusched::net {
namespace {

using namespace std::chrono_literals;

std::unique_ptr<HttpServer> StartServer(HttpServerOptions o) {
  auto server = HttpServer::Create(std::move(o));
  EXPECT_TRUE(server.ok()) << server.status().message();
  if (!server.ok()) {
    return nullptr;
  }
  std::unique_ptr<HttpServer> s = std::move(*server);
  // Echo of what arrived: method, one header, the body, and the peer's address (which connection it came on).
  for (const char* method : {"GET", "POST", "PUT", "PATCH", "DELETE"}) {
    s->Handle(method, "/echo", [](HttpRequest& r) {
      return HttpResponse{.body = r.method + "|" + std::string(r.Header("X-Test")) + "|" + r.body + "|" +
                                  r.peer.address + "|" + std::string(r.Header("Expect"))};
    });
  }
  s->Handle("GET", "/slow", [](HttpRequest&) {
    std::this_thread::sleep_for(800ms);
    return HttpResponse{.body = "late"};
  });
  s->Handle("GET", "/big", [](HttpRequest&) { return HttpResponse{.body = std::string(256 * 1024, 'x')}; });
  s->Handle("GET", "/missing", [](HttpRequest&) { return HttpResponse{.status = 404, .body = "no such thing"}; });
  return s;
}

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string part;
  while (std::getline(in, part, '|')) {
    out.push_back(part);
  }
  return out;
}

std::unique_ptr<HttpClient> MakeClient(const std::string& url, HttpClientOptions o = {}) {
  o.base_url = url;
  auto c = HttpClient::Create(std::move(o));
  EXPECT_TRUE(c.ok()) << c.status().message();
  return c.ok() ? std::move(*c) : nullptr;
}

class HttpClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = StartServer(HttpServerOptions{.threads = 4, .name = "client-test"});
    ASSERT_NE(server_, nullptr);
    ASSERT_TRUE(server_->Start().ok());
    url_ = "http://127.0.0.1:" + std::to_string(server_->port()) + "/";  // the trailing slash is dropped
  }
  std::unique_ptr<HttpServer> server_;
  std::string url_;
};

TEST_F(HttpClientTest, MethodsHeadersAndBodiesArriveAsSent) {
  auto client = MakeClient(url_);
  ASSERT_NE(client, nullptr);
  for (const char* method : {"GET", "POST", "PUT", "PATCH", "DELETE"}) {
    const std::string body = std::string(method) == "GET" ? "" : std::string("body of ") + method;
    auto r = client->Send(ClientRequest{.method = method, .target = "/echo", .body = body, .headers = {"X-Test: 42"}});
    ASSERT_TRUE(r.ok()) << method << ": " << r.status().message();
    EXPECT_EQ(r->status, 200);
    const auto parts = Split(r->body);
    ASSERT_GE(parts.size(), 3U) << r->body;
    EXPECT_EQ(parts[0], method);
    EXPECT_EQ(parts[1], "42");
    EXPECT_EQ(parts[2], body);
    EXPECT_EQ(parts.size() > 4 ? parts[4] : "", "") << "no Expect: 100-continue";
  }
  // A large body goes in one request, without a 100-continue round trip.
  const std::string large(3 << 20 >> 2, 'a');  // 768 KiB: curl would ask for 100-continue past 1 KiB or 1 MiB
  auto r = client->Send(ClientRequest{.method = "POST", .target = "/echo", .body = large});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(Split(r->body).at(2).size(), large.size());
  // Every HTTP status is a response, not an error.
  auto missing = client->Send(ClientRequest{.target = "/missing"});
  ASSERT_TRUE(missing.ok());
  EXPECT_EQ(missing->status, 404);
  EXPECT_EQ(missing->body, "no such thing");
}

TEST_F(HttpClientTest, ConnectionsAreReusedBetweenCalls) {
  auto client = MakeClient(url_);
  ASSERT_NE(client, nullptr);
  std::string first_peer;
  for (int i = 0; i < 5; ++i) {
    auto r = client->Send(ClientRequest{.target = "/echo"});
    ASSERT_TRUE(r.ok()) << r.status().message();
    const std::string peer = Split(r->body).at(3);
    if (i == 0) {
      first_peer = peer;
    }
    EXPECT_EQ(peer, first_peer) << "call " << i << " came on a new connection";
  }
}

TEST_F(HttpClientTest, ManyThreadsAtOnce) {
  auto client = MakeClient(url_, HttpClientOptions{.max_idle_handles = 2});
  ASSERT_NE(client, nullptr);
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) {
        const std::string body = std::to_string(t) + "-" + std::to_string(i);
        auto r = client->Send(ClientRequest{.method = "POST", .target = "/echo", .body = body});
        if (r.ok() && r->status == 200 && Split(r->body).at(2) == body) {
          ++ok;
        }
      }
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  EXPECT_EQ(ok.load(), 160);
}

TEST_F(HttpClientTest, TransportFailuresAreStatuses) {
  auto client = MakeClient(url_, HttpClientOptions{.timeout = 200ms});
  ASSERT_NE(client, nullptr);
  auto slow = client->Send(ClientRequest{.target = "/slow"});
  ASSERT_FALSE(slow.ok());
  EXPECT_EQ(slow.status().code(), common::StatusCode::kDeadlineExceeded) << slow.status().message();
  // The request's own bound wins over the client's.
  auto patient = client->Send(ClientRequest{.target = "/slow", .timeout = 5000ms});
  ASSERT_TRUE(patient.ok()) << patient.status().message();
  EXPECT_EQ(patient->body, "late");

  const int port = server_->port();
  server_.reset();  // nothing listens there any more
  auto refused = MakeClient("http://127.0.0.1:" + std::to_string(port))->Send(ClientRequest{.target = "/echo"});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), common::StatusCode::kUnavailable) << refused.status().message();
  EXPECT_NE(refused.status().message().find(std::to_string(port)), std::string::npos) << refused.status().message();
}

TEST(HttpClientOptionsTest, BadOptionsAreErrors) {
  EXPECT_EQ(HttpClient::Create(HttpClientOptions{.base_url = "ftp://x"}).status().code(),
            common::StatusCode::kInvalidArgument);
  EXPECT_EQ(HttpClient::Create(HttpClientOptions{.base_url = "127.0.0.1:80"}).status().code(),
            common::StatusCode::kInvalidArgument);
  EXPECT_EQ(HttpClient::Create(HttpClientOptions{.base_url = "http://x", .timeout = 0ms}).status().code(),
            common::StatusCode::kInvalidArgument);
  EXPECT_EQ(HttpClient::Create(HttpClientOptions{.base_url = "https://x", .tls = ClientTls{.client_cert_pem = "c"}})
                .status()
                .code(),
            common::StatusCode::kInvalidArgument);
}

TEST(UrlEncodeTest, Table) {
  EXPECT_EQ(UrlEncode("spec.nodeName=,status.phase!=Failed"), "spec.nodeName%3D%2Cstatus.phase%21%3DFailed");
  EXPECT_EQ(UrlEncode("a-b_c.d~e"), "a-b_c.d~e");
  EXPECT_EQ(UrlEncode("max by (UUID) (x{a=\"b\"})"), "max%20by%20%28UUID%29%20%28x%7Ba%3D%22b%22%7D%29");
  EXPECT_EQ(UrlEncode(std::string("\0\xff", 2)), "%00%FF");
  EXPECT_EQ(UrlEncode(""), "");
}

TEST(ShortenBodyTest, TrailingNewlinesGoAndLongBodiesAreCut) {
  EXPECT_EQ(ShortenBody("{\"error\":\"x\"}\r\n\n"), "{\"error\":\"x\"}");
  EXPECT_EQ(ShortenBody(std::string(400, 'a')), std::string(300, 'a') + "...");
  EXPECT_EQ(ShortenBody("abcdef", 3), "abc...");
  EXPECT_EQ(ShortenBody(""), "");
}

// --- streams ---

TEST_F(HttpClientTest, StreamHandsOverTheBodyAndCanBeAbortedByItsReader) {
  auto client = MakeClient(url_);
  ASSERT_NE(client, nullptr);
  const std::atomic<bool> never{false};
  size_t got = 0;
  long seen_status = 0;
  auto whole = client->Stream(
      ClientRequest{.target = "/big"},
      [&](long status, std::string_view data) {
        seen_status = status;
        got += data.size();
        return true;
      },
      never);
  ASSERT_TRUE(whole.ok()) << whole.status().message();
  EXPECT_EQ(whole->status, 200);
  EXPECT_EQ(seen_status, 200);
  EXPECT_EQ(got, 256U * 1024);
  EXPECT_FALSE(whole->aborted || whole->stopped || whole->timed_out);

  int calls = 0;
  auto cut = client->Stream(
      ClientRequest{.target = "/big"},
      [&](long, std::string_view) {
        ++calls;
        return false;
      },
      never);
  ASSERT_TRUE(cut.ok()) << cut.status().message();
  EXPECT_TRUE(cut->aborted);
  EXPECT_EQ(calls, 1);

  // An error status arrives like any other body, with its code.
  std::string error_body;
  auto missing = client->Stream(
      ClientRequest{.target = "/missing"},
      [&](long status, std::string_view data) {
        EXPECT_EQ(status, 404);
        error_body.append(data);
        return true;
      },
      never);
  ASSERT_TRUE(missing.ok());
  EXPECT_EQ(missing->status, 404);
  EXPECT_EQ(error_body, "no such thing");
}

TEST_F(HttpClientTest, StreamEndsSoonAfterStop) {
  auto client = MakeClient(url_);
  ASSERT_NE(client, nullptr);
  std::atomic<bool> stop{false};
  std::thread stopper([&] {
    std::this_thread::sleep_for(100ms);
    stop = true;
  });
  const auto start = std::chrono::steady_clock::now();
  auto r = client->Stream(
      ClientRequest{.target = "/slow", .timeout = 0ms}, [](long, std::string_view) { return true; }, stop, 20ms);
  const auto took = std::chrono::steady_clock::now() - start;
  stopper.join();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->stopped);
  EXPECT_LT(took, 700ms) << "the stream waited for the server instead of the stop flag";
}

// A server that answers 200 with a declared length, sends only part of it and then goes silent.
class StallingServer {
 public:
  StallingServer() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    listen(fd_, 4);
    socklen_t len = sizeof addr;
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] {
      const int c = accept(fd_, nullptr, nullptr);
      if (c < 0) {
        return;
      }
      char buf[4096];
      (void)recv(c, buf, sizeof buf, 0);
      const std::string head = "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n{\"type\":\"ADDED\"}\n";
      (void)send(c, head.data(), head.size(), MSG_NOSIGNAL);
      while (!done_.load()) {
        std::this_thread::sleep_for(10ms);
      }
      close(c);
    });
  }
  ~StallingServer() {
    done_ = true;
    shutdown(fd_, SHUT_RDWR);
    close(fd_);
    thread_.join();
  }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> done_{false};
  std::thread thread_;
};

TEST(HttpClientStreamTest, AStreamThatStallsAfterItBeganTimesOutWithItsStatus) {
  StallingServer server;
  auto client = MakeClient("http://127.0.0.1:" + std::to_string(server.port()));
  ASSERT_NE(client, nullptr);
  const std::atomic<bool> never{false};
  std::string got;
  auto r = client->Stream(
      ClientRequest{.target = "/watch", .timeout = 300ms},
      [&](long, std::string_view data) {
        got.append(data);
        return true;
      },
      never, 20ms);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->timed_out);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(got, "{\"type\":\"ADDED\"}\n");
  EXPECT_FALSE(r->detail.empty());
}

TEST(HttpClientStreamTest, AStreamThatNeverGetsAnAnswerIsADeadlineError) {
  auto server = StartServer(HttpServerOptions{.threads = 2, .name = "client-test"});
  ASSERT_NE(server, nullptr);
  ASSERT_TRUE(server->Start().ok());
  auto client = MakeClient("http://127.0.0.1:" + std::to_string(server->port()));
  ASSERT_NE(client, nullptr);
  const std::atomic<bool> never{false};
  auto r = client->Stream(
      ClientRequest{.target = "/slow", .timeout = 200ms}, [](long, std::string_view) { return true; }, never, 20ms);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), common::StatusCode::kDeadlineExceeded) << r.status().message();
}

// --- TLS ---

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class HttpClientTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir("gpusched-client-tls");
    ASSERT_FALSE(dir_.empty());
    auto pki = testing::MakeTestPki(dir_);
    ASSERT_TRUE(pki.ok()) << pki.status().message();
    pki_ = *pki;
    server_ = StartServer(HttpServerOptions{.threads = 2,
                                            .tls = TlsOptions{.cert_file = pki_.server_cert_file,
                                                              .key_file = pki_.server_key_file,
                                                              .client_ca_file = pki_.ca_file},
                                            .name = "client-tls-test"});
    ASSERT_NE(server_, nullptr);
    ASSERT_TRUE(server_->Start().ok());
    url_ = "https://127.0.0.1:" + std::to_string(server_->port());
  }
  void TearDown() override {
    server_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  common::Result<ClientResponse> Get(ClientTls tls) {
    auto client = HttpClient::Create(HttpClientOptions{.base_url = url_, .tls = std::move(tls)});
    if (!client.ok()) {
      return client.status();
    }
    return (*client)->Send(ClientRequest{.target = "/echo"});
  }
  std::string dir_;
  testing::TestPki pki_;
  std::unique_ptr<HttpServer> server_;
  std::string url_;
};

TEST_F(HttpClientTlsTest, VerifiesTheServerAndPresentsTheClientCertificate) {
  auto ok = Get(
      ClientTls{.ca_pem = pki_.ca_pem, .client_cert_pem = pki_.client_cert_pem, .client_key_pem = pki_.client_key_pem});
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->status, 200);

  // No client certificate: the server refuses the handshake.
  auto anonymous = Get(ClientTls{.ca_pem = pki_.ca_pem});
  ASSERT_FALSE(anonymous.ok());
  EXPECT_EQ(anonymous.status().code(), common::StatusCode::kUnavailable) << anonymous.status().message();

  // A CA that did not sign the server's certificate: the client refuses the server.
  auto wrong_ca = Get(ClientTls{.ca_pem = ReadFile(pki_.other_ca_file),
                                .client_cert_pem = pki_.client_cert_pem,
                                .client_key_pem = pki_.client_key_pem});
  ASSERT_FALSE(wrong_ca.ok());
  EXPECT_EQ(wrong_ca.status().code(), common::StatusCode::kUnavailable);
  EXPECT_NE(wrong_ca.status().message().find("certificate"), std::string::npos) << wrong_ca.status().message();

  // Unless verification is explicitly off.
  auto insecure = Get(ClientTls{.insecure_skip_verify = true,
                                .ca_pem = ReadFile(pki_.other_ca_file),
                                .client_cert_pem = pki_.client_cert_pem,
                                .client_key_pem = pki_.client_key_pem});
  ASSERT_TRUE(insecure.ok()) << insecure.status().message();
  EXPECT_EQ(insecure->status, 200);
}

}  // namespace
}  // namespace gpusched::net
