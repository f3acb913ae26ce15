#include "gpusched/agent/dra_slices.h"

#include <utility>

#include "gpusched/agent/inventory.h"

namespace gpusched::agent {
namespace {

adapters::k8s::ResourceSlicePublisherOptions PublisherOptions(const DraSlicesOptions& options) {
  adapters::k8s::ResourceSlicePublisherOptions p = options.publisher;
  p.node = options.node;
  p.driver = std::string(kube::kGpuDriverName);
  return p;
}

}  // namespace

std::vector<kube::PoolGpu> PoolGpusOf(const std::vector<ports::GpuSample>& samples) {
  const std::vector<core::Gpu> gpus = InventoryOf(samples);
  std::vector<kube::PoolGpu> out;
  out.reserve(gpus.size());
  for (size_t i = 0; i < gpus.size(); ++i) {
    out.push_back(kube::PoolGpu{.gpu = gpus[i], .product_name = samples[i].name, .last_xid = samples[i].last_xid});
  }
  return out;
}

DraSlices::DraSlices(adapters::k8s::ApiClient& client, DraSlicesOptions options)
    : options_(std::move(options)), publisher_(client, PublisherOptions(options_)) {}

void DraSlices::OnSamples(const std::vector<ports::GpuSample>& samples) {
  const std::vector<kube::PoolGpu> gpus = PoolGpusOf(samples);
  publisher_.Update(kube::GpuDevicePool(common::NodeName(options_.node), gpus, options_.pool).devices);
}

std::string DraSlices::Problem() const {
  if (publisher_.synced()) {
    return "";
  }
  const common::Status s = publisher_.last_error();
  return s.ok() ? "ResourceSlices not published yet" : "ResourceSlices not current: " + s.message();
}

}  // namespace gpusched::agent
