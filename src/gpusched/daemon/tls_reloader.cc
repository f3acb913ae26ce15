#include "gpusched/daemon/tls_reloader.h"

#include <fstream>
#include <iterator>
#include <utility>

#include "gpusched/common/log.h"

namespace gpusched::daemon {
namespace {

std::optional<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return std::nullopt;
  }
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) {
    return std::nullopt;
  }
  return text;
}

std::string Interval(std::chrono::milliseconds ms) {
  return ms.count() % 1000 == 0 ? std::to_string(ms.count() / 1000) + " s" : std::to_string(ms.count()) + " ms";
}

}  // namespace

TlsReloader::TlsReloader(TlsReloaderOptions options, Reload reload)
    : options_(std::move(options)), reload_(std::move(reload)) {}

TlsReloader::~TlsReloader() { Stop(); }

void TlsReloader::Prime() {
  std::lock_guard lock(mu_);
  cert_ = ReadFile(options_.cert_file);
  key_ = ReadFile(options_.key_file);
}

common::Status TlsReloader::Start() {
  if (options_.interval.count() <= 0) {
    return common::InvalidArgument(options_.name + ": the TLS reload interval must be positive");
  }
  if (!worker_.Start([this] {
        while (!worker_.WaitFor(options_.interval)) {
          (void)CheckNow();
        }
      })) {
    return common::FailedPrecondition(options_.name + ": the TLS reloader is running");
  }
  return common::Status::Ok();
}

void TlsReloader::Stop() { worker_.Stop(); }

bool TlsReloader::CheckNow() {
  std::lock_guard lock(mu_);
  std::optional<std::string> cert = ReadFile(options_.cert_file);
  std::optional<std::string> key = ReadFile(options_.key_file);
  if (!cert.has_value() || !key.has_value() || (cert == cert_ && key == key_)) {
    pending_cert_.reset();
    pending_key_.reset();
    return false;
  }
  // A pair seen for the first time may be half written (a copy in progress): load it once the next check reads the
  // same bytes, so that one renewal is one reload (each reload closes the connections open at the time).
  if (cert != pending_cert_ || key != pending_key_) {
    pending_cert_ = cert;
    pending_key_ = key;
    return false;
  }
  if (const common::Status s = reload_(); !s.ok()) {
    ++failures_;
    common::Log(common::LogLevel::kWarn, options_.name + ": the renewed TLS certificate in " + options_.cert_file +
                                             " is not served yet (tried again in " + Interval(options_.interval) +
                                             "): " + s.message());
    return false;
  }
  cert_ = std::move(cert);
  key_ = std::move(key);
  ++reloads_;
  common::Log(common::LogLevel::kInfo,
              options_.name + ": serving with the renewed TLS certificate from " + options_.cert_file);
  return true;
}

uint64_t TlsReloader::reloads() const {
  std::lock_guard lock(mu_);
  return reloads_;
}

uint64_t TlsReloader::failures() const {
  std::lock_guard lock(mu_);
  return failures_;
}

}  // namespace gpusched::daemon
