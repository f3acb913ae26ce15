#pragma once

// WorkerThread: the one background thread a component starts and stops (a refresher, a sampler, a reloader), the
// loop each of them used to write for itself. Start runs `body` on a new thread; between rounds the body waits
// with WaitFor or WaitUntil, which return true as soon as Stop is asked (at once if it already was), so the body
// ends without sleeping out its interval. Stop asks, wakes the body and joins it; it is idempotent, and a stopped
// worker may be started again. Stop must not be called from the body itself.
//
// Thread-safety: every method may be called from any thread (one mutex); the destructor stops.

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

namespace gpusched::common {

class WorkerThread {
 public:
  WorkerThread() = default;
  WorkerThread(const WorkerThread&) = delete;
  WorkerThread& operator=(const WorkerThread&) = delete;
  ~WorkerThread() { Stop(); }

  // False (nothing started) when a body is running already.
  bool Start(std::function<void()> body) {
    std::lock_guard start(start_mu_);
    if (thread_.joinable()) {
      return false;
    }
    {
      std::lock_guard lock(mu_);
      stop_ = false;
    }
    thread_ = std::thread(std::move(body));
    return true;
  }

  void Stop() {
    std::lock_guard start(start_mu_);
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) {
      thread_.join();
    }
  }

  [[nodiscard]] bool Running() const {
    std::lock_guard start(start_mu_);
    return thread_.joinable();
  }

  // For the body: waits `d` at most; true when Stop was asked.
  template <typename Rep, typename Period>
  bool WaitFor(std::chrono::duration<Rep, Period> d) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, d, [this] { return stop_; });
  }
  // For the body: waits until `t` at most; true when Stop was asked.
  bool WaitUntil(std::chrono::steady_clock::time_point t) {
    std::unique_lock lock(mu_);
    return cv_.wait_until(lock, t, [this] { return stop_; });
  }
  [[nodiscard]] bool Stopping() const {
    std::lock_guard lock(mu_);
    return stop_;
  }

 private:
  mutable std::mutex start_mu_;  // serialises Start and Stop (and the thread_ handle)
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace gpusched::common
