#pragma once

// Pod and Node objects as the API server's JSON, for tests that feed watches, mirrors and decoders:
//   OnPod(kAdded, PodJson("p").Priority(5).Limits({{"nvidia.com/gpu", "1"}}));
//   OnNode(kAdded, GpuNodeJson("a").Gpus(4));
// Each builder starts from the smallest object these tests use and writes a field only when asked, so a test
// states every field it depends on. Keys come out sorted (nlohmann::json), as the tests' own objects did.

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace gpusched::testing {

// A Pod: metadata {name, namespace "default", uid "uid-<name>"}, spec.containers [{name "main"}].
class PodJson {
 public:
  explicit PodJson(const std::string& name);

  PodJson& Namespace(const std::string& ns);
  PodJson& Uid(const std::string& uid);
  // No metadata.uid: as the object is sent before the API server assigns one.
  PodJson& NoUid();
  PodJson& Created(const std::string& timestamp);  // metadata.creationTimestamp
  PodJson& Deleted(const std::string& timestamp);  // metadata.deletionTimestamp
  PodJson& Label(const std::string& key, const std::string& value);
  PodJson& Annotation(const std::string& key, const std::string& value);

  PodJson& SchedulerName(const std::string& name);
  PodJson& Priority(int32_t priority);
  PodJson& NodeName(const std::string& node);
  PodJson& PodSecurityContext(const nlohmann::json& context);  // spec.securityContext
  PodJson& Phase(const std::string& phase);                    // status.phase

  // Container "main" (added again if Containers or NoContainers removed it).
  PodJson& Limits(const nlohmann::json& limits);
  PodJson& Requests(const nlohmann::json& requests);
  PodJson& SecurityContext(const nlohmann::json& context);

  // Appends a container {name, resources.limits} to spec.containers or spec.initContainers; null limits: no
  // resources field.
  PodJson& Container(const std::string& name, const nlohmann::json& limits = nullptr);
  PodJson& InitContainer(const std::string& name, const nlohmann::json& limits = nullptr);
  // Replaces spec.containers or spec.initContainers (json::array() for an empty list).
  PodJson& Containers(nlohmann::json containers);
  PodJson& InitContainers(nlohmann::json containers);
  // No spec.containers at all.
  PodJson& NoContainers();

  [[nodiscard]] nlohmann::json Build() const { return pod_; }
  operator nlohmann::json() const { return pod_; }  // NOLINT(google-explicit-constructor): call sites read better

 private:
  nlohmann::json& Main();
  nlohmann::json pod_;
};

// A Node with GPUs: metadata.name, the gpusched.io/gpus annotation listing its GPUs (an empty list until Gpus or
// Gpu adds some) and status.allocatable {cpu "32", memory "128Gi"}.
class GpuNodeJson {
 public:
  explicit GpuNodeJson(const std::string& name);

  // Appends n GPUs, uuid "GPU-<node>-<index>"; index counts every GPU added so far.
  GpuNodeJson& Gpus(int32_t n, const std::string& model = "A100-SXM4-80GB", int64_t memory_mib = 81920);
  // Appends one GPU with the given uuid at the next index.
  GpuNodeJson& Gpu(const std::string& uuid, const std::string& model = "A100-SXM4-80GB", int64_t memory_mib = 81920);
  GpuNodeJson& Label(const std::string& key, const std::string& value);
  // Replaces metadata.labels; written even when empty.
  GpuNodeJson& Labels(nlohmann::json labels);
  // spec: {} even without taints, as a Node read from the API server has it.
  GpuNodeJson& EmptySpec();
  GpuNodeJson& Taints(nlohmann::json taints);  // spec.taints
  // status.allocatable quantities.
  GpuNodeJson& Cpu(const std::string& quantity);
  GpuNodeJson& Memory(const std::string& quantity);
  GpuNodeJson& Pods(const std::string& count);

  [[nodiscard]] nlohmann::json Build() const;
  operator nlohmann::json() const { return Build(); }  // NOLINT(google-explicit-constructor)

 private:
  std::string name_;
  nlohmann::json node_;
  nlohmann::json gpus_ = nlohmann::json::array();
};

// Container limits for a share of one GPU: gpusched.io/gpu 1, gpu-core `core` (percent), gpu-memory `memory_mib`.
nlohmann::json ShareLimits(int64_t core, int64_t memory_mib);

}  // namespace gpusched::testing
