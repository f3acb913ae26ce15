#include "gpusched/testing/builders.h"

#include <algorithm>
#include <memory>
#include <utility>

namespace gpusched::testing {

using common::MiB;
using common::MilliCpu;
using common::MilliGpu;

NodeBuilder::NodeBuilder(std::string name) {
  node_.name = common::NodeName(std::move(name));
  node_.cpu = MilliCpu{64000};
  node_.memory = MiB{262144};
}

NodeBuilder& NodeBuilder::Gpus(int32_t n, std::string model, int64_t memory_mib) {
  for (int32_t i = 0; i < n; ++i) {
    const auto index = static_cast<int32_t>(node_.gpus.size());
    node_.gpus.push_back(core::Gpu{.index = index,
                                   .uuid = common::GpuUuid("GPU-" + node_.name.str() + "-" + std::to_string(index)),
                                   .model = model,
                                   .memory = MiB{memory_mib}});
  }
  return *this;
}

NodeBuilder& NodeBuilder::Cpu(int64_t milli) {
  node_.cpu = MilliCpu{milli};
  return *this;
}

NodeBuilder& NodeBuilder::Memory(int64_t mib) {
  node_.memory = MiB{mib};
  return *this;
}

ViewBuilder& ViewBuilder::Gpus(int32_t n, std::string model, int64_t memory_mib) {
  node_.Gpus(n, std::move(model), memory_mib);
  return *this;
}
ViewBuilder& ViewBuilder::Cpu(int64_t milli) {
  node_.Cpu(milli);
  return *this;
}
ViewBuilder& ViewBuilder::Memory(int64_t mib) {
  node_.Memory(mib);
  return *this;
}
ViewBuilder& ViewBuilder::Free(std::initializer_list<int64_t> free_milli) {
  free_.assign(free_milli);
  return *this;
}
ViewBuilder& ViewBuilder::CpuFree(int64_t milli) {
  cpu_free_ = milli;
  return *this;
}
ViewBuilder& ViewBuilder::MemoryFree(int64_t mib) {
  memory_free_ = mib;
  return *this;
}
ViewBuilder& ViewBuilder::Shape(int32_t tag, int32_t count) {
  shapes_.emplace_back(tag, count);
  std::sort(shapes_.begin(), shapes_.end());
  return *this;
}

core::NodeView ViewBuilder::Build() const {
  core::NodeView v = core::NodeView::Empty(std::make_shared<const core::Node>(node_.Build()));
  for (size_t i = 0; i < free_.size() && i < v.gpus.size(); ++i) {
    v.gpus[i].free = MilliGpu{free_[i]};
    if (free_[i] < 1000) {
      v.gpus[i].holders = 1;
      v.pods += 1;
    }
  }
  if (cpu_free_ >= 0) {
    v.cpu_free = MilliCpu{cpu_free_};
  }
  if (memory_free_ >= 0) {
    v.memory_free = MiB{memory_free_};
  }
  v.shape_counts = shapes_;
  return v;
}

PodBuilder::PodBuilder(std::string name) {
  pod_.uid = common::PodUid(name);
  pod_.name = std::move(name);
  pod_.cpu = MilliCpu{1000};
  pod_.memory = MiB{1024};
}

PodBuilder& PodBuilder::Cpu(int64_t milli) {
  pod_.cpu = MilliCpu{milli};
  return *this;
}
PodBuilder& PodBuilder::Memory(int64_t mib) {
  pod_.memory = MiB{mib};
  return *this;
}
PodBuilder& PodBuilder::Gpus(int32_t count) {
  pod_.containers.push_back(
      core::GpuRequest{.container = "main", .count = count, .milli_per_gpu = common::kGpuMilli, .exclusive = true});
  return *this;
}
PodBuilder& PodBuilder::Share(int64_t milli, int64_t memory_mib) {
  pod_.containers.push_back(core::GpuRequest{
      .container = "main", .count = 1, .milli_per_gpu = MilliGpu{milli}, .memory_per_gpu = MiB{memory_mib}});
  return *this;
}
PodBuilder& PodBuilder::Container(core::GpuRequest request) {
  pod_.containers.push_back(std::move(request));
  return *this;
}
PodBuilder& PodBuilder::Models(std::vector<std::string> models) {
  for (auto& c : pod_.containers) {
    c.models = models;
  }
  return *this;
}
PodBuilder& PodBuilder::Priority(int32_t priority) {
  pod_.priority = priority;
  return *this;
}

}  // namespace gpusched::testing
