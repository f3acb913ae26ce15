#pragma once

// TlsReloader: serving certificates are renewed on disk (cert-manager, a Secret volume update) while the daemon runs;
// this notices and hands the new pair to whoever serves with it. Every `interval` it reads the certificate and key
// files; when both read, either differs from the pair last loaded, and the previous check read the same new pair
// (a copy still being written is not loaded half done), it calls `reload`, which builds a server
// with the new files and swaps it in (a server that cannot be built, e.g. a key that does not match a
// half-written certificate, returns the error and keeps the old one). On success the new contents become the pair
// last loaded; on failure the next check tries again, logging the reason each time. Unreadable files (a Secret
// volume mid-update) are skipped until they read.
//
// It knows nothing of HTTP: the extender's server uses it (ExtenderServer), and any daemon that serves TLS from
// files can: the webhook uses it too.
//
// Thread-safety: Start and Stop from one thread; `reload` runs on the reloader's own thread, never concurrently
// with itself. CheckNow may be called from any thread (tests); it is serialised with the background checks.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "gpusched/common/status.h"
#include "gpusched/common/worker_thread.h"

namespace gpusched::daemon {

struct TlsReloaderOptions {
  std::string cert_file;
  std::string key_file;
  std::chrono::milliseconds interval{30000};
  std::string name = "tls";  // in log lines ("extender: serving with the renewed TLS certificate")
};

class TlsReloader {
 public:
  using Reload = std::function<common::Status()>;
  TlsReloader(TlsReloaderOptions options, Reload reload);
  ~TlsReloader();  // Stop()s
  TlsReloader(const TlsReloader&) = delete;
  TlsReloader& operator=(const TlsReloader&) = delete;

  // Reads the pair the server is about to load (call it before building that server, so that a renewal between the
  // two is not missed). The files need not be readable yet.
  void Prime();
  // Starts the checks (after Prime). Fails when running or when the interval is not positive.
  [[nodiscard]] common::Status Start();
  void Stop();
  // One check on the calling thread: true when the pair changed and `reload` succeeded.
  bool CheckNow();

  [[nodiscard]] uint64_t reloads() const;
  [[nodiscard]] uint64_t failures() const;  // reload attempts that returned an error

 private:
  const TlsReloaderOptions options_;
  const Reload reload_;
  mutable std::mutex mu_;            // guards everything below; held across `reload` (checks are serialised)
  std::optional<std::string> cert_;  // the contents last loaded (nullopt: unreadable then)
  std::optional<std::string> key_;
  std::optional<std::string> pending_cert_;  // a changed pair seen once: loaded when the next check reads it again
  std::optional<std::string> pending_key_;
  uint64_t reloads_ = 0;
  uint64_t failures_ = 0;
  common::WorkerThread worker_;  // last: stopped before the rest goes
};

}  // namespace gpusched::daemon
