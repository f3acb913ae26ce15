#include "gpusched/webhook/validator.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gpusched/webhook/review_builders_test_util.h"

namespace gpusched::webhook {
namespace {

using namespace test;  // NOLINT(google-build-using-namespace): builders

constexpr const char* kAlloc = "gpusched.io/allocation";
const std::string kExtender(kExtenderUser);
const std::string kScheduler(kSchedulerUser);
const json kShare = {{"gpusched.io/gpu", "1"}, {"gpusched.io/gpu-core", "30"}, {"gpusched.io/gpu-memory", "20000"}};
const std::string kAllocation =
    R"({"node":"gpu-node-1","id":1,"containers":[{"name":"main","gpus":[{"index":0,"uuid":"GPU-0","milli":300,"memory_mib":20000,"exclusive":false}]}]})";
const std::string kOtherAllocation =
    R"({"node":"gpu-node-1","id":1,"containers":[{"name":"main","gpus":[{"index":1,"uuid":"GPU-1","milli":300,"memory_mib":20000,"exclusive":false}]}]})";

struct Case {
  std::string name;
  AdmissionRequest request;
  int want_code = 0;  // 0 = allowed
  std::vector<std::string> want_in_message = {};
  WebhookConfig config = {};
};

void Check(const std::vector<Case>& cases, const QueueView* queues = nullptr) {
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const AdmissionResponse r = Validate(c.request, c.config, queues);
    EXPECT_EQ(r.allowed, c.want_code == 0) << r.message;
    EXPECT_EQ(r.code, c.want_code);
    EXPECT_TRUE(r.patch.is_null());
    for (const auto& part : c.want_in_message) {
      EXPECT_NE(r.message.find(part), std::string::npos) << "\"" << part << "\" not in: " << r.message;
    }
  }
}

// Rule 1 of validator.h: only the scheduler's identities write gpusched.io/allocation.
TEST(ValidatorTest, OnlyAllowedUsersWriteTheAllocationAnnotation) {
  const json plain = PodJson().Limits(kShare);
  const json allocated = PodJson().Limits(kShare).Annotation(kAlloc, kAllocation);
  const json reallocated = PodJson().Limits(kShare).Annotation(kAlloc, kOtherAllocation);
  const json relabelled = PodJson().Limits(kShare).Annotation(kAlloc, kAllocation).Label("team", "vision");
  WebhookConfig groups;
  groups.allowed_groups = {"gpusched-admins"};
  AdmissionRequest admin_in_group = Update(plain, allocated, "bob");
  admin_in_group.user.groups.push_back("gpusched-admins");
  Check({
      {.name = "alice creates a pod with a forged allocation",
       .request = Create(allocated),
       .want_code = 403,
       .want_in_message = {"user \"alice\" may not set the annotation gpusched.io/allocation"}},
      {.name = "the extender may set it", .request = Create(allocated, kExtender)},
      {.name = "the standalone scheduler may set it", .request = Create(allocated, kScheduler)},
      {.name = "alice adds it to her pod",
       .request = Update(plain, allocated),
       .want_code = 403,
       .want_in_message = {"\"alice\" may not set", kAlloc}},
      {.name = "alice points it at another GPU",
       .request = Update(allocated, reallocated),
       .want_code = 403,
       .want_in_message = {"\"alice\" may not change", kAlloc}},
      {.name = "alice removes it",
       .request = Update(allocated, plain),
       .want_code = 403,
       .want_in_message = {"\"alice\" may not remove", kAlloc}},
      {.name = "alice changes it through pods/status",
       .request = Update(allocated, reallocated, kAlice, "status"),
       .want_code = 403,
       .want_in_message = {"\"alice\" may not change"}},
      {.name = "alice relabels a bound pod: the annotation is unchanged", .request = Update(allocated, relabelled)},
      {.name = "the kubelet updates a bound pod's status",
       .request = Update(allocated, allocated, "system:node:n1", "status")},
      {.name = "the extender binds with the annotation in the Binding",
       .request = Request(Operation::kCreate, "pods", "binding", Binding("trainer", {{kAlloc, kAllocation}}), nullptr,
                          kExtender)},
      {.name = "alice binds with a forged allocation",
       .request = Request(Operation::kCreate, "pods", "binding", Binding("trainer", {{kAlloc, kAllocation}})),
       .want_code = 403,
       .want_in_message = {"\"alice\" may not bind with the annotation gpusched.io/allocation"}},
      {.name = "through the legacy bindings resource too",
       .request = Request(Operation::kCreate, "bindings", "", Binding("trainer", {{kAlloc, kAllocation}})),
       .want_code = 403,
       .want_in_message = {"may not bind with"}},
      {.name = "kube-scheduler binds without annotations",
       .request = Request(Operation::kCreate, "pods", "binding", Binding("trainer"), nullptr, "system:kube-scheduler")},
      {.name = "a member of an allowed group", .request = admin_in_group, .config = groups},
      {.name = "the same user without the group", .request = Update(plain, allocated, "bob"), .want_code = 403},
      {.name = "alice deletes a bound pod", .request = Request(Operation::kDelete, "pods", "", nullptr, allocated)},
      {.name = "the annotation on a ConfigMap is not gpusched's business",
       .request = Request(Operation::kCreate, "configmaps", "",
                          {{"kind", "ConfigMap"}, {"metadata", {{"name", "c"}, {"annotations", {{kAlloc, "x"}}}}}})},
      {.name = "nor on an object of another group named pods",
       .request =
           [&] {
             AdmissionRequest r = Create(allocated);
             r.resource.group = "metrics.k8s.io";
             return r;
           }()},
  });
}

// Rule 2 of validator.h: requests that can never be scheduled are refused at admission, with the decoder's reason.
TEST(ValidatorTest, RefusesGpuRequestsThatCanNeverBeMet) {
  WebhookConfig only_ours;
  only_ours.resources.enabled = {"gpusched.io/gpu", "gpusched.io/gpu-memory"};
  Check({
      {.name = "a plain GPU-sharing pod", .request = Create(PodJson().Limits(kShare))},
      {.name = "a pod without GPUs", .request = Create(PodJson().Limits({{"cpu", "1"}}))},
      {.name = "gpu-core above 100",
       .request = Create(PodJson().Limits({{"gpusched.io/gpu-core", "150"}})),
       .want_code = 422,
       .want_in_message = {"pod team-a/trainer: container main: gpusched.io/gpu-core 150 is above 100"}},
      {.name = "exclusive nvidia.com/gpu mixed with a shared gpu-core",
       .request = Create(PodJson().Limits({{"nvidia.com/gpu", "1"}, {"gpusched.io/gpu-core", "30"}})),
       .want_code = 422,
       .want_in_message = {"mixes GPU resources of gpusched.io and nvidia.com/gpu"}},
      {.name = "MPS-shared keti.com/mpsgpu mixed with exclusive nvidia.com/gpu",
       .request = Create(PodJson().Limits({{"keti.com/mpsgpu", "1"}, {"nvidia.com/gpu", "1"}})),
       .want_code = 422,
       .want_in_message = {"mixes GPU resources"}},
      {.name = "a fractional GPU count",
       .request = Create(PodJson().Limits({{"gpusched.io/gpu", "500m"}})),
       .want_code = 422,
       .want_in_message = {"must be a whole number"}},
      {.name = "elastic-gpu core above 100 that is not whole GPUs",
       .request = Create(PodJson().Limits({{"elasticgpu.io/gpu-core", "150"}})),
       .want_code = 422,
       .want_in_message = {"multiple of 100"}},
      {.name = "in an init container too",
       .request = Create(PodJson().Limits(kShare).Init({{"gpusched.io/gpu-core", "101"}})),
       .want_code = 422,
       .want_in_message = {"init container init0: gpusched.io/gpu-core 101 is above 100"}},
      {.name = "a pod named by generateName",
       .request = Create(PodJson().GenerateName("trainer-").Limits({{"gpusched.io/gpu-core", "150"}})),
       .want_code = 422,
       .want_in_message = {"pod team-a/trainer-(generated): container main"}},
      {.name = "the device count the mutating webhook adds is accepted",
       .request = Create(PodJson().Limits({{"aliyun.com/gpu-mem", "8"}, {"gpusched.io/gpu", "1"}}))},
      {.name = "a device count that contradicts the request",
       .request = Create(PodJson().Limits({{"aliyun.com/gpu-mem", "8"}, {"gpusched.io/gpu", "2"}})),
       .want_code = 422,
       .want_in_message = {"gpusched.io/gpu 2 does not match the 1 GPU(s) that aliyun.com/gpu-mem asks for"}},
      {.name = "Genius's labels: a request that decodes",
       .request = Create(PodJson().Label("genius/gpu-number", "2").Label("genius/gpu-memory-each", "8000"))},
      {.name = "Genius's labels that do not decode",
       .request = Create(PodJson().Label("genius/gpu-number", "two")),
       .want_code = 422,
       .want_in_message = {"label genius/gpu-number \"two\" is not a whole number"}},
      {.name = "Genius's labels with the device count the mutating webhook adds",
       .request = Create(PodJson().Label("genius/gpu-number", "2").Limits({{"gpusched.io/gpu", "2"}}))},
      {.name = "Genius's labels with a device count that contradicts them",
       .request = Create(PodJson().Label("genius/gpu-number", "2").Limits({{"gpusched.io/gpu", "3"}})),
       .want_code = 422,
       .want_in_message = {"gpusched.io/gpu 3 does not match the 2 GPU(s) that label genius/gpu-number asks for"}},
      {.name = "names gpusched does not honour here are not judged",
       .request = Create(PodJson().Limits({{"nvidia.com/gpucores", "150"}})),
       .config = only_ours},
      {.name = "updates are not re-judged (requests cannot change)",
       .request = Update(PodJson().Limits({{"gpusched.io/gpu-core", "150"}}),
                         PodJson().Limits({{"gpusched.io/gpu-core", "150"}}).Label("a", "b"))},
  });
}

TEST(ValidatorTest, RefusesMalformedModelAnnotations) {
  auto with_models = [](const std::string& models) {
    return Create(PodJson().Limits(kShare).Annotation("gpusched.io/gpu-model", models));
  };
  Check({
      {.name = "two models", .request = with_models("A100-SXM4-80GB | H100")},
      {.name = "NVML's spelling", .request = with_models("NVIDIA A100 80GB PCIe|Tesla V100-SXM2-32GB")},
      {.name = "a comma instead of a bar",
       .request = with_models("A100,H100"),
       .want_code = 422,
       .want_in_message = {"pod team-a/trainer: annotation gpusched.io/gpu-model \"A100,H100\": separate models with "
                           "'|', not ','"}},
      {.name = "two bars in a row",
       .request = with_models("A100||H100"),
       .want_code = 422,
       .want_in_message = {"has an empty model name"}},
      {.name = "a trailing bar",
       .request = with_models("A100|"),
       .want_code = 422,
       .want_in_message = {"empty model name"}},
      {.name = "no model at all",
       .request = with_models(" | "),
       .want_code = 422,
       .want_in_message = {"names no GPU model"}},
      {.name = "empty", .request = with_models(""), .want_code = 422, .want_in_message = {"names no GPU model"}},
      {.name = "a quote and a newline",
       .request = with_models("A100\"\n"),
       .want_code = 422,
       .want_in_message = {"has a character other than", "\\x22\\x0a"}},
      {.name = "a malformed model annotation on a pod without GPUs is not gpusched's business",
       .request = Create(PodJson().Limits({{"cpu", "1"}}).Annotation("gpusched.io/gpu-model", "A100,H100"))},
  });
}

TEST(ValidatorTest, ModelSyntaxLimits) {
  EXPECT_TRUE(CheckGpuModels(std::string(128, 'A')).ok());
  EXPECT_FALSE(CheckGpuModels(std::string(129, 'A')).ok());
  std::string many = "m0";
  for (int i = 1; i < 64; ++i) {
    many += "|m" + std::to_string(i);
  }
  EXPECT_TRUE(CheckGpuModels(many).ok());
  EXPECT_NE(CheckGpuModels(many + "|m64").message().find("more than 64 models"), std::string::npos);
}

// Rule 3: a GpuQueue that breaks a rule of its own is refused on every Kubernetes version.
TEST(ValidatorTest, GpuQueuesThatBreakTheirOwnRulesAreRefused) {
  auto queue = [](const json& spec) {
    return json{
        {"apiVersion", "gpusched.io/v1alpha1"}, {"kind", "GpuQueue"}, {"metadata", {{"name", "qa"}}}, {"spec", spec}};
  };
  auto request = [](Operation op, const json& object, const json& old = nullptr) {
    AdmissionRequest r = Request(op, "gpuqueues", "", object, old);
    r.resource.group = "gpusched.io";
    r.resource.version = "v1alpha1";
    r.namespace_name.clear();
    return r;
  };
  const json good = queue({{"guaranteed", {{"gpus", 2}}}, {"limit", {{"gpus", 4}}}, {"parent", "research"}});
  const json over = queue({{"guaranteed", {{"gpus", 3}}}, {"limit", {{"gpus", 2}}}});
  Check({
      {.name = "a guarantee within its limit, with a parent the webhook does not judge",
       .request = request(Operation::kCreate, good)},
      {.name = "a guarantee above its limit",
       .request = request(Operation::kCreate, over),
       .want_code = 422,
       .want_in_message = {"GpuQueue qa: guaranteed gpus 3 exceeds its limit 2"}},
      {.name = "an update that raises the guarantee above the limit",
       .request = request(Operation::kUpdate, over, good),
       .want_code = 422,
       .want_in_message = {"exceeds its limit"}},
      {.name = "a weight of 0",
       .request = request(Operation::kCreate, queue({{"weight", 0}})),
       .want_code = 422,
       .want_in_message = {"GpuQueue qa: spec.weight: want a number > 0, got 0"}},
      {.name = "an amount that cannot be read",
       .request = request(Operation::kCreate, queue({{"limit", {{"gpus", "four"}}}})),
       .want_code = 422,
       .want_in_message = {"limit.gpus"}},
      {.name = "its status subresource is the scheduler's",
       .request =
           [&] {
             AdmissionRequest r = request(Operation::kUpdate, over, good);
             r.sub_resource = "status";
             return r;
           }()},
      {.name = "a deletion", .request = request(Operation::kDelete, nullptr, over)},
  });
}

// A container `name` of `field` (containers, initContainers, ephemeralContainers) with env var `var`.
json WithEnv(json pod, const std::string& field, const std::string& name, const std::string& var) {
  pod["spec"][field].push_back(
      {{"name", name},
       {"image", "cuda"},
       {"env", json::array({{{"name", "PATH"}, {"value", "/bin"}}, {{"name", var}, {"value", "all"}}})}});
  return pod;
}

json WithMount(json pod, const std::string& field, const std::string& name, const std::string& path) {
  pod["spec"][field].push_back(
      {{"name", name}, {"image", "cuda"}, {"volumeMounts", json::array({{{"name", "v"}, {"mountPath", path}}})}});
  return pod;
}

// Rule 4: the GPU handoff variables are the device plugin's alone, in every kind of container, GPU pod or not.
TEST(ValidatorTest, ContainersMayNotSetTheGpuHandoffVariables) {
  const json plain = PodJson();
  const json gpu = PodJson().Limits(kShare);
  json with_debugger = plain;
  with_debugger["spec"]["ephemeralContainers"] = json::array({{{"name", "debugger"}, {"image", "busybox"}}});
  // kubectl debug on Kubernetes < 1.22: the subresource's object is an EphemeralContainers, not the Pod.
  const json legacy_ephemeral = {
      {"apiVersion", "v1"},
      {"kind", "EphemeralContainers"},
      {"metadata", {{"name", "trainer"}, {"namespace", "team-a"}}},
      {"ephemeralContainers",
       json::array(
           {{{"name", "dbg"}, {"env", json::array({{{"name", "CUDA_MPS_PIPE_DIRECTORY"}, {"value", "/x"}}})}}})}};
  Check({
      {.name = "a container without a GPU that names every GPU",
       .request = Create(WithEnv(plain, "containers", "sneaky", "NVIDIA_VISIBLE_DEVICES")),
       .want_code = 403,
       .want_in_message = {"pod team-a/trainer: container \"sneaky\" sets NVIDIA_VISIBLE_DEVICES in env",
                           "only gpusched's device plugin sets"}},
      {.name = "a GPU pod's container that widens its capabilities",
       .request = Create(WithEnv(gpu, "containers", "main2", "NVIDIA_DRIVER_CAPABILITIES")),
       .want_code = 403,
       .want_in_message = {"container \"main2\" sets NVIDIA_DRIVER_CAPABILITIES"}},
      {.name = "an init container pointing at another pod's MPS daemon",
       .request = Create(WithEnv(plain, "initContainers", "setup", "CUDA_MPS_PIPE_DIRECTORY")),
       .want_code = 403,
       .want_in_message = {"init container \"setup\" sets CUDA_MPS_PIPE_DIRECTORY"}},
      {.name = "an ephemeral container in a pod's creation",
       .request = Create(WithEnv(plain, "ephemeralContainers", "dbg", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE")),
       .want_code = 403,
       .want_in_message = {"ephemeral container \"dbg\" sets CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"}},
      {.name = "kubectl debug adding an ephemeral container that sets it",
       .request = Update(with_debugger, WithEnv(with_debugger, "ephemeralContainers", "dbg2", "NVIDIA_VISIBLE_DEVICES"),
                         kAlice, "ephemeralcontainers"),
       .want_code = 403,
       .want_in_message = {"ephemeral container \"dbg2\" sets NVIDIA_VISIBLE_DEVICES"}},
      {.name = "kubectl debug on Kubernetes < 1.22 (an EphemeralContainers object)",
       .request = Update(json{{"kind", "EphemeralContainers"}, {"ephemeralContainers", json::array()}},
                         legacy_ephemeral, kAlice, "ephemeralcontainers"),
       .want_code = 403,
       .want_in_message = {"ephemeral container \"dbg\" sets CUDA_MPS_PIPE_DIRECTORY"}},
      {.name = "even gpusched's own identities may not (the device plugin sets them at Allocate, not in the spec)",
       .request = Create(WithEnv(plain, "containers", "c", "NVIDIA_VISIBLE_DEVICES"), kScheduler),
       .want_code = 403},
      {.name = "a debugger without them", .request = Update(plain, with_debugger, kAlice, "ephemeralcontainers")},
      {.name = "other variables, and names that only look alike",
       .request = Create(WithEnv(WithEnv(plain, "containers", "a", "CUDA_VISIBLE_DEVICES"), "containers", "b",
                                 "MY_NVIDIA_VISIBLE_DEVICES"))},
      {.name = "envFrom cannot be judged by name and is not denied",
       .request = Create([&] {
         json p = plain;
         p["spec"]["containers"][0]["envFrom"] = json::array({{{"configMapRef", {{"name", "gpu-env"}}}}});
         return p;
       }())},
      {.name = "an emptyDir at the runtime's device-list directory (every GPU under volume-mounts)",
       .request = Create(WithMount(plain, "containers", "sneaky", "/var/run/nvidia-container-devices/all")),
       .want_code = 403,
       .want_in_message = {"container \"sneaky\" mounts a volume at \"/var/run/nvidia-container-devices/all\"",
                           "only gpusched's device plugin mounts"}},
      {.name = "the same through /run, a trailing slash and a dot",
       .request = Create(WithMount(plain, "initContainers", "setup", "/run/./nvidia-container-devices/")),
       .want_code = 403,
       .want_in_message = {"init container \"setup\" mounts a volume at"}},
      {.name = "kubectl debug adding a container with such a mount",
       .request = Update(with_debugger,
                         WithMount(with_debugger, "ephemeralContainers", "dbg3", "/var/run/nvidia-container-devices/x"),
                         kAlice, "ephemeralcontainers"),
       .want_code = 403,
       .want_in_message = {"ephemeral container \"dbg3\" mounts a volume at"}},
      {.name = "mounts elsewhere, and a directory whose name only starts alike",
       .request = Create(WithMount(WithMount(plain, "containers", "a", "/var/run"), "containers", "b",
                                   "/var/run/nvidia-container-devices-cache"))},
      {.name = "a pod status update does not touch env",
       .request = Update(WithEnv(plain, "containers", "c", "NVIDIA_VISIBLE_DEVICES"),
                         WithEnv(plain, "containers", "c", "NVIDIA_VISIBLE_DEVICES"), kAlice, "status")},
  });
  // The event of a denied kubectl debug names the variable, not the request's text.
  const AdmissionResponse r =
      Validate(Update(with_debugger, WithEnv(with_debugger, "ephemeralContainers", "dbg2", "NVIDIA_VISIBLE_DEVICES"),
                      kAlice, "ephemeralcontainers"),
               WebhookConfig{});
  EXPECT_EQ(r.event_message,
            "an ephemeral container that sets NVIDIA_VISIBLE_DEVICES was denied: only gpusched's device plugin sets "
            "the GPU handoff variables");
  // A name no API server would have admitted is not repeated in the Event.
  const AdmissionResponse odd = Validate(
      Update(with_debugger, WithEnv(with_debugger, "ephemeralContainers", "dbg2", "CUDA_MPS_ see evil.example"), kAlice,
             "ephemeralcontainers"),
      WebhookConfig{});
  EXPECT_FALSE(odd.allowed);
  EXPECT_EQ(odd.event_message.find("evil"), std::string::npos) << odd.event_message;
}

// Rule 5: a pod joins by label only a queue that admits its namespace (the scheduler's own rule).
TEST(ValidatorTest, QueueLabelsMustNameAQueueOfThePodsNamespace) {
  const QueueView queues({
      {.name = "team-a", .namespaces = {"team-a"}},
      {.name = "team-b", .namespaces = {"team-b"}},
      {.name = "research"},
      {.name = "lab-1", .parent = "research", .namespaces = {"lab"}},
  });
  const json in_b = PodJson().Label("gpusched.io/queue", "team-b");
  const json in_a = PodJson().Label("gpusched.io/queue", "team-a");
  Check(
      {
          {.name = "another team's queue",
           .request = Create(in_b),
           .want_code = 403,
           .want_in_message = {"pod team-a/trainer: label gpusched.io/queue: pods of namespace team-a may not join "
                               "queue team-b: it admits namespaces team-b only"}},
          {.name = "its own queue", .request = Create(in_a)},
          {.name = "the default queue, while another queue serves the namespace",
           .request = Create(PodJson().Label("gpusched.io/queue", "default")),
           .want_code = 403,
           .want_in_message = {"namespace team-a is served by queue team-a"}},
          {.name = "a queue nobody declared: the scheduler keeps it waiting",
           .request = Create(PodJson().Label("gpusched.io/queue", "nowhere"))},
          {.name = "a queue that admits no namespace",
           .request = Create(PodJson().Label("gpusched.io/queue", "research")),
           .want_code = 403,
           .want_in_message = {"it admits no namespace (list team-a in its spec.namespaces)"}},
          {.name = "relabelled into another team's queue",
           .request = Update(in_a, in_b),
           .want_code = 403,
           .want_in_message = {"may not join queue team-b"}},
          {.name = "an update that leaves the label as it was (judged when set)", .request = Update(in_b, in_b)},
          {.name = "a pod without the label", .request = Create(PodJson())},
      },
      &queues);
  // Without the queues (no --queues) the rule is off.
  EXPECT_TRUE(Validate(Create(in_b), WebhookConfig{}).allowed);
}

}  // namespace
}  // namespace gpusched::webhook
