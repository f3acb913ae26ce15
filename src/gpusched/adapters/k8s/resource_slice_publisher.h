#pragma once

// ResourceSlicePublisher: keeps the ResourceSlices (resource.k8s.io/v1) of one driver on one node equal to the
// devices the agent has, the way the upstream resourceslice controller of k8s.io/dynamic-resource-allocation does
// for kubelet plugins written in Go.
//
// One reconciliation (Sync):
//   1. GET the Node (its uid: every slice has an ownerReference to it, so the garbage collector deletes the slices
//      with the node);
//   2. LIST the driver's slices of the node (fieldSelector spec.nodeName=<node>,spec.driver=<driver>, which
//      kube-apiserver indexes for resourceslices);
//   3. the pool is the node's (pool name = node name); its generation is the highest one listed (0 when none);
//      taints keep the timeAdded the server gave them;
//   4. nothing to do when the listed slices are exactly the wanted ones: names "<node>-<driver>-<i>"
//      (kube::ResourceSliceName), one generation, resourceSliceCount right, the same devices, owned by this Node,
//      and no other slice;
//   5. else the generation goes up by one (consumers ignore slices of older generations, and resourceSliceCount lets
//      them see when a pool is only partly written) and every wanted slice is written with it: PUT with the listed
//      resourceVersion when it exists (a conflict fails the attempt), POST when not; then every other listed slice
//      is deleted with its resourceVersion as precondition (a listed slice that cannot be decoded, of another pool,
//      or beyond the count).
// A restarted agent with the same devices writes nothing.
//
// Start() runs Sync on a background thread whenever Update() hands it different devices, and every `resync` when
// nothing changes (a slice someone deleted comes back). A failed attempt (409 conflict, 5xx, timeout, a Node not
// there yet) is retried after an exponential backoff from `initial_backoff` to `max_backoff`; an Update during the
// backoff does not cut it short, so there is never a hot loop; the next attempt uses the newest devices.
//
// Threading: Update, the counters and last_error may be called from any thread. Sync is for callers that do not
// Start (tests, one-shot tools); it must not run concurrently with the background thread.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "gpusched/adapters/k8s/api_client.h"
#include "gpusched/common/status.h"
#include "gpusched/core/dra.h"

namespace gpusched::adapters::k8s {

struct ResourceSlicePublisherOptions {
  std::string node;
  std::string driver = "gpu.gpusched.io";
  std::chrono::milliseconds initial_backoff{500};
  std::chrono::milliseconds max_backoff{30000};
  std::chrono::milliseconds resync{std::chrono::minutes(5)};
  // Warnings (a failed attempt after a good one, a recovery); null: common::Log.
  std::function<void(const std::string&)> log;
};

class ResourceSlicePublisher {
 public:
  ResourceSlicePublisher(ApiClient& client, ResourceSlicePublisherOptions options);
  ~ResourceSlicePublisher();  // Stop()
  ResourceSlicePublisher(const ResourceSlicePublisher&) = delete;
  ResourceSlicePublisher& operator=(const ResourceSlicePublisher&) = delete;

  // One reconciliation of the node's slices with `devices` (the pool's devices, names fully qualified), now.
  // InvalidArgument when the devices cannot be published (kube::EncodeResourceSliceSpecs says why); the API
  // server's errors as api_errors.h maps them.
  common::Status Sync(const std::vector<core::dra::Device>& devices);

  // The devices to publish from now on (the background thread wakes when they differ from the last ones).
  void Update(std::vector<core::dra::Device> devices);
  void Start();
  void Stop();

  // The pool generation last written or found up to date (0: none yet).
  [[nodiscard]] int64_t generation() const;
  // Creates, updates and deletes sent; reconciliations that failed.
  [[nodiscard]] uint64_t writes() const;
  [[nodiscard]] uint64_t failures() const;
  // The last attempt's result (OK before the first).
  [[nodiscard]] common::Status last_error() const;
  // True once a reconciliation succeeded for the newest devices.
  [[nodiscard]] bool synced() const;

 private:
  common::Status SyncOnce(const std::vector<core::dra::Device>& devices);
  void Run();
  void Warn(const std::string& message) const;

  ApiClient& client_;
  const ResourceSlicePublisherOptions options_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::optional<std::vector<core::dra::Device>> desired_;  // GUARDED_BY(mu_)
  bool dirty_ = false;                                     // GUARDED_BY(mu_) desired_ not yet reconciled
  bool stopping_ = false;                                  // GUARDED_BY(mu_)
  bool synced_ = false;                                    // GUARDED_BY(mu_)
  int64_t generation_ = 0;                                 // GUARDED_BY(mu_)
  uint64_t writes_ = 0;                                    // GUARDED_BY(mu_)
  uint64_t failures_ = 0;                                  // GUARDED_BY(mu_)
  common::Status last_error_ = common::Status::Ok();       // GUARDED_BY(mu_)
  std::thread thread_;
};

}  // namespace gpusched::adapters::k8s
