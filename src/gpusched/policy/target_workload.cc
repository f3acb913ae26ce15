#include "gpusched/policy/target_workload.h"

#include <algorithm>
#include <array>
#include <map>
#include <tuple>
#include <utility>

namespace gpusched::policy {

TargetWorkload TypicalPods(std::span<const core::PodRequest> pods, const TypicalPodsOptions& options) {
  using Key = std::tuple<int64_t, int64_t, int32_t, std::vector<std::string>>;  // cpu, milli, count, models
  std::map<Key, int64_t> groups;
  std::map<Key, int64_t> memory;  // Σ memory of each group's pods, MiB
  for (const auto& pod : pods) {
    const core::PodShape s = core::ShapeOf(pod);
    std::vector<std::string> models = s.models != nullptr ? *s.models : std::vector<std::string>{};
    Key key{s.cpu.value(), s.gpu_milli.value(), s.gpu_count, std::move(models)};
    memory[key] += pod.memory.value();
    groups[std::move(key)] += 1;
  }
  std::vector<std::pair<Key, int64_t>> sorted(groups.begin(), groups.end());
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.second > b.second; });

  TargetWorkload m;
  m.distinct_classes = static_cast<int64_t>(sorted.size());
  m.total_pods = static_cast<int64_t>(pods.size());
  const auto needed = static_cast<double>(m.total_pods) * options.coverage;
  for (const auto& [key, count] : sorted) {
    if (static_cast<double>(m.covered_pods) >= needed) {
      break;
    }
    m.classes.push_back(TaskClass{.cpu = common::MilliCpu{std::get<0>(key)},
                                  .gpu_count = std::get<2>(key),
                                  .gpu_milli = common::MilliGpu{std::get<1>(key)},
                                  .models = std::get<3>(key),
                                  .pods = count,
                                  .memory = common::MiB{memory.at(key) / count}});
    m.covered_pods += count;
  }
  for (auto& c : m.classes) {
    c.weight = static_cast<double>(c.pods) / static_cast<double>(m.covered_pods);
  }
  return m;
}

namespace {

// Model names are short and mostly differ in length or first letter: test those before comparing bytes.
bool SameModel(const std::string& a, const std::string& b) {
  return a.size() == b.size() && (a.empty() || (a.front() == b.front() && a == b));
}

bool Names(const std::vector<std::string>& models, const std::string& model) {
  return std::any_of(models.begin(), models.end(), [&](const std::string& x) { return SameModel(x, model); });
}

// The model of every GPU of the node, or null when the node has none or several models.
const std::string* OneModel(const std::vector<core::Gpu>& gpus) {
  if (gpus.empty()) {
    return nullptr;
  }
  for (size_t i = 1; i < gpus.size(); ++i) {
    if (!SameModel(gpus[i].model, gpus.front().model)) {
      return nullptr;
    }
  }
  return &gpus.front().model;
}

int64_t IdleMilli(const core::NodeView& node, std::span<const int64_t> free_milli) {
  int64_t idle = 0;
  for (size_t i = 0; i < free_milli.size(); ++i) {
    if (node.node->gpus[i].healthy) {
      idle += free_milli[i];
    }
  }
  return idle;
}

// For classes that may use every GPU of the node: how many healthy GPUs have at least a share's milli free (fit)
// and the free milli of the others (small). These depend on the share alone and classes often ask the same one, so
// the first 16 shares asked are remembered.
class ShareFits {
 public:
  ShareFits(const core::NodeView& node, std::span<const int64_t> free_milli) : node_(node), free_(free_milli) {}
  struct Fit {
    int64_t need = 0;
    int32_t fit = 0;
    int64_t small = 0;
  };
  Fit Of(int64_t need) {
    auto seen = std::find_if(memo_.begin(), memo_.begin() + size_, [&](const Fit& x) { return x.need == need; });
    if (seen != memo_.begin() + size_) {
      return *seen;
    }
    Fit here{.need = need};
    for (size_t i = 0; i < free_.size(); ++i) {
      if (!node_.node->gpus[i].healthy) {
        continue;
      }
      if (free_[i] >= need) {
        ++here.fit;
      } else {
        here.small += free_[i];
      }
    }
    if (size_ < memo_.size()) {
      memo_[size_++] = here;
    }
    return here;
  }

 private:
  const core::NodeView& node_;
  std::span<const int64_t> free_;
  std::array<Fit, 16> memo_;
  size_t size_ = 0;
};

}  // namespace

double Fragmentation(const TargetWorkload& m, const core::NodeView& node, common::MilliCpu cpu_free,
                     std::span<const int64_t> free_milli) {
  const auto& gpus = node.node->gpus;
  const int64_t idle = IdleMilli(node, free_milli);
  // Most nodes have one GPU model: then whether a class may use the node's GPUs is one lookup per class, and a
  // class that may not strands the whole idle milli without a look at each GPU.
  const std::string* one_model = OneModel(gpus);
  ShareFits shares(node, free_milli);
  double f = 0;
  for (const TaskClass& c : m.classes) {
    if (c.gpu_count == 0) {
      f += c.weight * static_cast<double>(idle);
      continue;
    }
    if (one_model != nullptr && !c.models.empty() && !Names(c.models, *one_model)) {
      f += c.weight * static_cast<double>(idle);
      continue;
    }
    const int64_t need = c.gpu_milli.value();
    ShareFits::Fit here{.need = need};
    if (c.models.empty() || one_model != nullptr) {  // every GPU usable (a one-model node passed the test above)
      here = shares.Of(need);
    } else {
      for (size_t i = 0; i < free_milli.size(); ++i) {
        if (!gpus[i].healthy) {
          continue;
        }
        if (Names(c.models, gpus[i].model) && free_milli[i] >= need) {
          ++here.fit;
        } else {
          here.small += free_milli[i];
        }
      }
    }
    const bool q3 = here.fit >= c.gpu_count && cpu_free >= c.cpu;
    f += c.weight * static_cast<double>(q3 ? here.small : idle);
  }
  return f;
}

FragmentationIndex::FragmentationIndex(std::shared_ptr<const TargetWorkload> workload) : m(std::move(workload)) {
  for (const TaskClass& c : m->classes) {
    for (const std::string& x : c.models) {
      if (std::none_of(models.begin(), models.end(), [&](const std::string& y) { return SameModel(x, y); })) {
        models.push_back(x);
      }
    }
  }
  usable.resize(models.size() + 1);
  idle_weight.assign(models.size() + 1, 0.0);
  for (size_t k = 0; k <= models.size(); ++k) {
    for (size_t i = 0; i < m->classes.size(); ++i) {
      const TaskClass& c = m->classes[i];
      if (c.gpu_count > 0 && (c.models.empty() || (k < models.size() && Names(c.models, models[k])))) {
        usable[k].push_back(static_cast<uint32_t>(i));
      } else {
        idle_weight[k] += c.weight;
      }
    }
  }
}

double Fragmentation(const FragmentationIndex& index, const core::NodeView& node, common::MilliCpu cpu_free,
                     std::span<const int64_t> free_milli) {
  const std::string* model = OneModel(node.node->gpus);
  if (model == nullptr) {
    return Fragmentation(*index.m, node, cpu_free, free_milli);
  }
  size_t k = 0;
  while (k < index.models.size() && !SameModel(index.models[k], *model)) {
    ++k;
  }
  const int64_t idle = IdleMilli(node, free_milli);
  ShareFits shares(node, free_milli);  // every GPU is usable by the classes visited
  double f = index.idle_weight[k] * static_cast<double>(idle);
  for (uint32_t ci : index.usable[k]) {
    const TaskClass& c = index.m->classes[ci];
    const ShareFits::Fit here = shares.Of(c.gpu_milli.value());
    const bool q3 = here.fit >= c.gpu_count && cpu_free >= c.cpu;
    f += c.weight * static_cast<double>(q3 ? here.small : idle);
  }
  return f;
}

double NodeFragmentation(const TargetWorkload& m, const core::NodeView& node) {
  std::vector<int64_t> free(node.gpus.size());
  for (size_t i = 0; i < free.size(); ++i) {
    free[i] = node.gpus[i].free.value();
  }
  return Fragmentation(m, node, node.cpu_free, free);
}

std::shared_ptr<const TargetWorkload> DefaultTargetWorkload() {
  std::vector<core::PodRequest> pods;
  auto add = [&](int32_t count, int64_t milli, bool exclusive) {
    core::PodRequest p;
    p.cpu = common::MilliCpu{1000};
    p.containers.push_back(core::GpuRequest{
        .container = "main", .count = count, .milli_per_gpu = common::MilliGpu{milli}, .exclusive = exclusive});
    pods.push_back(std::move(p));
  };
  add(1, 250, false);
  add(1, 500, false);
  add(1, 1000, true);
  add(2, 1000, true);
  add(4, 1000, true);
  add(8, 1000, true);
  return std::make_shared<const TargetWorkload>(TypicalPods(pods, TypicalPodsOptions{.coverage = 1.0}));
}

}  // namespace gpusched::policy
