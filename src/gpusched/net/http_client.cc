#include "gpusched/net/http_client.h"

#include <curl/curl.h>

#include <exception>
#include <mutex>
#include <utility>

namespace gpusched::net {
namespace {

struct EasyDeleter {
  void operator()(CURL* h) const { curl_easy_cleanup(h); }
};
using Easy = std::unique_ptr<CURL, EasyDeleter>;

struct SlistDeleter {
  void operator()(curl_slist* list) const { curl_slist_free_all(list); }
};
using Slist = std::unique_ptr<curl_slist, SlistDeleter>;

struct MultiDeleter {
  void operator()(CURLM* m) const { curl_multi_cleanup(m); }
};
using Multi = std::unique_ptr<CURLM, MultiDeleter>;

constexpr const char* kUserAgent = "gpusched/" GPUSCHED_VERSION;

common::Status GlobalInit() {
  static std::once_flag once;
  static CURLcode rc = CURLE_OK;
  std::call_once(once, [] { rc = curl_global_init(CURL_GLOBAL_DEFAULT); });
  if (rc != CURLE_OK) {
    return common::Internal(std::string("curl_global_init: ") + curl_easy_strerror(rc));
  }
  return common::Status::Ok();
}

size_t AppendToString(char* data, size_t size, size_t n, void* user) {
  static_cast<std::string*>(user)->append(data, size * n);
  return size * n;
}

common::Status TransportError(CURLcode rc, const char* error) {
  std::string detail = curl_easy_strerror(rc);
  if (error[0] != '\0') {
    detail += ": ";
    detail += error;
  }
  if (rc == CURLE_OPERATION_TIMEDOUT) {
    return common::DeadlineExceeded(std::move(detail));
  }
  return common::Unavailable(std::move(detail));
}

// State of one stream, shared with its write callback (both on the calling thread).
struct StreamState {
  CURL* handle = nullptr;
  const HttpClient::DataHandler* on_data = nullptr;
  long status = 0;
  bool aborted = false;
  // An exception from on_data, held while curl's C frames unwind and rethrown by Stream: never thrown through them.
  std::exception_ptr thrown;
};

size_t StreamWrite(char* data, size_t size, size_t n, void* user) {
  auto* s = static_cast<StreamState*>(user);
  if (s->status == 0) {
    curl_easy_getinfo(s->handle, CURLINFO_RESPONSE_CODE, &s->status);
  }
  bool more = false;
  try {
    more = (*s->on_data)(s->status, std::string_view(data, size * n));
  } catch (...) {
    s->thrown = std::current_exception();
  }
  if (!more) {
    s->aborted = true;
    return 0;  // curl ends the transfer with CURLE_WRITE_ERROR
  }
  return size * n;
}

}  // namespace

std::string UrlEncode(std::string_view value) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(value.size());
  for (const char c : value) {
    const auto u = static_cast<unsigned char>(c);
    if ((u >= 'A' && u <= 'Z') || (u >= 'a' && u <= 'z') || (u >= '0' && u <= '9') || u == '-' || u == '_' ||
        u == '.' || u == '~') {
      out.push_back(c);
    } else {
      out.push_back('%');
      out.push_back(kHex[u >> 4U]);
      out.push_back(kHex[u & 0xFU]);
    }
  }
  return out;
}

std::string ShortenBody(std::string body, size_t max) {
  while (!body.empty() && (body.back() == '\n' || body.back() == '\r')) {
    body.pop_back();
  }
  if (body.size() > max) {
    body.resize(max);
    body += "...";
  }
  return body;
}

struct HttpClient::Impl {
  explicit Impl(HttpClientOptions o) : options(std::move(o)) {}
  ~Impl() {
    for (CURL* h : pool) {
      curl_easy_cleanup(h);
    }
  }

  HttpClientOptions options;
  std::mutex mu;
  std::vector<CURL*> pool;  // GUARDED_BY(mu): idle handles, each with its connection cache

  Easy Acquire() {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!pool.empty()) {
        CURL* h = pool.back();
        pool.pop_back();
        curl_easy_reset(h);  // options back to defaults; connections and TLS sessions stay
        return Easy(h);
      }
    }
    return Easy(curl_easy_init());
  }

  void Release(Easy h) {
    std::lock_guard<std::mutex> lock(mu);
    if (pool.size() < options.max_idle_handles) {
      pool.push_back(h.release());
    }
  }

  // Everything but the writer: URL, method, body, headers, TLS, timeouts. `headers` must outlive the transfer.
  void Prepare(CURL* h, const ClientRequest& request, const std::string& url, const curl_slist* headers) const {
    curl_easy_setopt(h, CURLOPT_URL, url.c_str());
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_USERAGENT, kUserAgent);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(options.connect_timeout.count()));
    const std::chrono::milliseconds timeout = request.timeout.value_or(options.timeout);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout.count()));  // 0: none
    if (options.tcp_keepalive) {
      curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
    }
    if (options.receive_buffer_bytes > 0) {
      curl_easy_setopt(h, CURLOPT_BUFFERSIZE, static_cast<long>(options.receive_buffer_bytes));
    }
    if (options.accept_gzip) {
      curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "gzip");
    }
    if (!options.basic_username.empty()) {
      curl_easy_setopt(h, CURLOPT_HTTPAUTH, CURLAUTH_BASIC);
      curl_easy_setopt(h, CURLOPT_USERNAME, options.basic_username.c_str());
      curl_easy_setopt(h, CURLOPT_PASSWORD, options.basic_password.c_str());
    }
    const ClientTls& tls = options.tls;
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, tls.insecure_skip_verify ? 0L : 1L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, tls.insecure_skip_verify ? 0L : 2L);
    if (!tls.ca_pem.empty()) {
      curl_blob blob{.data = const_cast<char*>(tls.ca_pem.data()), .len = tls.ca_pem.size(), .flags = CURL_BLOB_COPY};
      curl_easy_setopt(h, CURLOPT_CAINFO_BLOB, &blob);
    }
    if (!tls.client_cert_pem.empty()) {
      curl_blob cert{.data = const_cast<char*>(tls.client_cert_pem.data()),
                     .len = tls.client_cert_pem.size(),
                     .flags = CURL_BLOB_COPY};
      curl_easy_setopt(h, CURLOPT_SSLCERT_BLOB, &cert);
      curl_easy_setopt(h, CURLOPT_SSLCERTTYPE, "PEM");
      curl_blob key{.data = const_cast<char*>(tls.client_key_pem.data()),
                    .len = tls.client_key_pem.size(),
                    .flags = CURL_BLOB_COPY};
      curl_easy_setopt(h, CURLOPT_SSLKEY_BLOB, &key);
      curl_easy_setopt(h, CURLOPT_SSLKEYTYPE, "PEM");
    }
    if (request.method == "GET") {
      curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
    } else if (request.method == "POST") {
      curl_easy_setopt(h, CURLOPT_POST, 1L);
    } else {
      curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, request.method.c_str());
    }
    if (!request.body.empty() || request.method == "POST") {
      curl_easy_setopt(h, CURLOPT_POSTFIELDS, request.body.data());
      curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request.body.size()));
    }
  }

  static Slist Headers(const ClientRequest& request) {
    curl_slist* list = curl_slist_append(nullptr, "Expect:");  // no 100-continue round trip for large bodies
    for (const std::string& line : request.headers) {
      list = curl_slist_append(list, line.c_str());
    }
    return Slist(list);
  }
};

HttpClient::HttpClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HttpClient::~HttpClient() = default;

common::Result<std::unique_ptr<HttpClient>> HttpClient::Create(HttpClientOptions options) {
  GPUSCHED_RETURN_IF_ERROR(GlobalInit());
  if (!options.base_url.starts_with("http://") && !options.base_url.starts_with("https://")) {
    return common::InvalidArgument("URL \"" + options.base_url + "\" must start with http:// or https://");
  }
  while (options.base_url.back() == '/') {
    options.base_url.pop_back();
  }
  if (options.tls.client_cert_pem.empty() != options.tls.client_key_pem.empty()) {
    return common::InvalidArgument("a client certificate needs both the certificate and the key");
  }
  if (options.timeout.count() <= 0 || options.connect_timeout.count() <= 0) {
    return common::InvalidArgument("HTTP client timeouts must be positive");
  }
  return std::unique_ptr<HttpClient>(new HttpClient(std::make_unique<Impl>(std::move(options))));
}

const HttpClientOptions& HttpClient::options() const { return impl_->options; }

common::Result<ClientResponse> HttpClient::Send(const ClientRequest& request) {
  Easy h = impl_->Acquire();
  if (h == nullptr) {
    return common::Internal("curl_easy_init failed");
  }
  const std::string url = impl_->options.base_url + request.target;
  const Slist headers = Impl::Headers(request);
  impl_->Prepare(h.get(), request, url, headers.get());
  ClientResponse response;
  response.body.reserve(request.reserve);
  curl_easy_setopt(h.get(), CURLOPT_WRITEFUNCTION, &AppendToString);
  curl_easy_setopt(h.get(), CURLOPT_WRITEDATA, &response.body);
  char error[CURL_ERROR_SIZE] = {};
  curl_easy_setopt(h.get(), CURLOPT_ERRORBUFFER, error);
  const CURLcode rc = curl_easy_perform(h.get());
  curl_easy_setopt(h.get(), CURLOPT_ERRORBUFFER, nullptr);
  if (rc != CURLE_OK) {
    return TransportError(rc, error);  // the handle is dropped with its connection
  }
  curl_easy_getinfo(h.get(), CURLINFO_RESPONSE_CODE, &response.status);
  impl_->Release(std::move(h));
  return response;
}

common::Result<StreamEnd> HttpClient::Stream(const ClientRequest& request, const DataHandler& on_data,
                                             const std::atomic<bool>& stop, std::chrono::milliseconds poll) {
  Easy h(curl_easy_init());
  if (h == nullptr) {
    return common::Internal("curl_easy_init failed");
  }
  const std::string url = impl_->options.base_url + request.target;
  const Slist headers = Impl::Headers(request);
  impl_->Prepare(h.get(), request, url, headers.get());
  StreamState state{.handle = h.get(), .on_data = &on_data};
  curl_easy_setopt(h.get(), CURLOPT_WRITEFUNCTION, &StreamWrite);
  curl_easy_setopt(h.get(), CURLOPT_WRITEDATA, &state);
  char error[CURL_ERROR_SIZE] = {};
  curl_easy_setopt(h.get(), CURLOPT_ERRORBUFFER, error);

  // The multi interface lets the loop look at `stop` while the stream is idle.
  Multi multi(curl_multi_init());
  if (multi == nullptr) {
    return common::Internal("curl_multi_init failed");
  }
  curl_multi_add_handle(multi.get(), h.get());
  StreamEnd end;
  common::Status multi_error;
  for (;;) {
    int running = 0;
    const CURLMcode mc = curl_multi_perform(multi.get(), &running);
    if (mc != CURLM_OK) {
      multi_error = common::Internal(std::string("curl_multi_perform: ") + curl_multi_strerror(mc));
      break;
    }
    if (running == 0) {
      break;
    }
    if (stop.load()) {
      end.stopped = true;
      break;
    }
    curl_multi_poll(multi.get(), nullptr, 0, static_cast<int>(poll.count()), nullptr);
    if (stop.load()) {
      end.stopped = true;
      break;
    }
  }
  CURLcode rc = CURLE_OK;
  int left = 0;
  while (CURLMsg* msg = curl_multi_info_read(multi.get(), &left)) {
    if (msg->msg == CURLMSG_DONE) {
      rc = msg->data.result;
    }
  }
  curl_multi_remove_handle(multi.get(), h.get());
  if (state.thrown) {
    std::rethrow_exception(state.thrown);  // the handler's, to its caller, now that curl is out of the way
  }
  if (!multi_error.ok()) {
    return multi_error;
  }
  if (state.status == 0) {
    curl_easy_getinfo(h.get(), CURLINFO_RESPONSE_CODE, &state.status);
  }
  end.status = state.status;
  end.aborted = state.aborted;
  if (end.stopped || end.aborted) {
    return end;
  }
  if (rc == CURLE_OPERATION_TIMEDOUT && end.status != 0) {
    end.timed_out = true;
    end.detail = TransportError(rc, error).message();
    return end;
  }
  if (rc != CURLE_OK) {
    return TransportError(rc, error);
  }
  return end;
}

}  // namespace gpusched::net
