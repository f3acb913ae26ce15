#pragma once

// `gpusched agent --dra`: the node's GPUs published as ResourceSlices of driver gpu.gpusched.io
// (kube/gpu_pool.h says what a device holds, adapters/k8s/resource_slice_publisher.h how the slices are kept
// current). Every collector sample hands the devices to the publisher; it writes only when they changed (health,
// a GPU lost, a driver upgrade), on its own thread, with backoff on failures, so a sample never waits for the API
// server.

#include <memory>
#include <string>
#include <vector>

#include "gpusched/adapters/k8s/api_client.h"
#include "gpusched/adapters/k8s/resource_slice_publisher.h"
#include "gpusched/kube/gpu_pool.h"
#include "gpusched/ports/device_inventory.h"

namespace gpusched::agent {

// The inventory part of the samples as the DRA pool's GPUs.
[[nodiscard]] std::vector<kube::PoolGpu> PoolGpusOf(const std::vector<ports::GpuSample>& samples);

struct DraSlicesOptions {
  std::string node;
  kube::GpuPoolOptions pool;                               // whole GPUs only, driver and CUDA versions
  adapters::k8s::ResourceSlicePublisherOptions publisher;  // node and driver are set from the above
};

class DraSlices {
 public:
  DraSlices(adapters::k8s::ApiClient& client, DraSlicesOptions options);
  void Start() { publisher_.Start(); }
  void Stop() { publisher_.Stop(); }
  void OnSamples(const std::vector<ports::GpuSample>& samples);
  // Why the slices may not be current ("" when they are): for /readyz and /healthz.
  [[nodiscard]] std::string Problem() const;
  [[nodiscard]] const adapters::k8s::ResourceSlicePublisher& publisher() const { return publisher_; }

 private:
  const DraSlicesOptions options_;
  adapters::k8s::ResourceSlicePublisher publisher_;
};

}  // namespace gpusched::agent
