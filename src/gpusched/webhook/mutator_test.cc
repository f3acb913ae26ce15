#include "gpusched/webhook/mutator.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gpusched/webhook/review_builders_test_util.h"
#include "gpusched/webhook/validator.h"

namespace gpusched::webhook {
namespace {

using namespace test;  // NOLINT(google-build-using-namespace): builders

json Add(const std::string& path, const json& value) { return {{"op", "add"}, {"path", path}, {"value", value}}; }
const std::string kLimits0 = "/spec/containers/0/resources/limits/gpusched.io~1gpu";
const std::string kRequests0 = "/spec/containers/0/resources/requests/gpusched.io~1gpu";

struct Case {
  std::string name;
  AdmissionRequest request;
  json want_patch;  // null = no patch
  WebhookConfig config = {};
};

WebhookConfig SchedulerFor(const std::string& ns, const std::string& scheduler) {
  WebhookConfig c;
  c.scheduler_names = {{ns, scheduler}};
  return c;
}

// Each row: the patch Mutate returns; then, for every row, the patch applied to the pod gives a pod that Mutate
// leaves alone (idempotent, so reinvocation is safe) and that Validate admits when it admitted the original.
void Check(const std::vector<Case>& cases) {
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const AdmissionResponse r = Mutate(c.request, c.config);
    EXPECT_TRUE(r.allowed) << "the mutating webhook never denies";
    EXPECT_EQ(r.patch, c.want_patch) << r.patch.dump();
    if (r.patch.is_null()) {
      EXPECT_TRUE(r.warnings.empty());
      continue;
    }
    size_t changes = 0;  // a requests entry mirrors its limits entry: one change
    for (const json& op : r.patch) {
      changes += op["path"].get<std::string>().find("/requests/") == std::string::npos ? 1 : 0;
    }
    EXPECT_EQ(r.warnings.size(), changes) << "one warning per change";
    AdmissionRequest again = c.request;
    again.object = c.request.object.patch(r.patch);
    EXPECT_TRUE(Mutate(again, c.config).patch.is_null()) << "not idempotent: " << again.object.dump();
    if (Validate(c.request, c.config).allowed) {
      const AdmissionResponse v = Validate(again, c.config);
      EXPECT_TRUE(v.allowed) << "the patched pod is refused: " << v.message;
    }
  }
}

// Rule 1 of mutator.h: every request form ends up with a countable device resource the agent serves.
TEST(MutatorTest, AddsTheDeviceCountToRequestsWithoutOne) {
  Check({
      {.name = "no GPU: nothing", .request = Create(PodJson().Limits({{"cpu", "1"}})), .want_patch = nullptr},
      {.name = "gpusched.io/gpu-memory alone: 1 GPU, in limits and requests",
       .request = Create(PodJson().Limits({{"gpusched.io/gpu-memory", "20000"}})),
       .want_patch = {Add(kLimits0, "1"), Add(kRequests0, "1")}},
      {.name = "gpusched.io/gpu-core alone",
       .request = Create(PodJson().Limits({{"gpusched.io/gpu-core", "30"}, {"cpu", "1"}})),
       .want_patch = {Add(kLimits0, "1"), Add(kRequests0, "1")}},
      {.name = "aliyun.com/gpu-mem 8 (gpushare): one GPU; no requests map, limits only",
       .request = Create(PodJson().LimitsOnly({{"aliyun.com/gpu-mem", "8"}})),
       .want_patch = {Add(kLimits0, "1")}},
      {.name = "elasticgpu.io/gpu-core 200: two whole GPUs",
       .request = Create(PodJson().Limits({{"elasticgpu.io/gpu-core", "200"}})),
       .want_patch = {Add(kLimits0, "2"), Add(kRequests0, "2")}},
      {.name = "elasticgpu.com memory",
       .request = Create(PodJson().Limits({{"elasticgpu.com/gpu-memory", "2048"}})),
       .want_patch = {Add(kLimits0, "1"), Add(kRequests0, "1")}},
      {.name = "HAMi gpumem and gpucores without nvidia.com/gpu",
       .request = Create(PodJson().Limits({{"nvidia.com/gpumem", "3000"}, {"nvidia.com/gpucores", "30"}})),
       .want_patch = {Add(kLimits0, "1"), Add(kRequests0, "1")}},
      {.name = "HAMi with nvidia.com/gpu: the kubelet already calls a plugin",
       .request = Create(PodJson().Limits({{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "3000"}})),
       .want_patch = nullptr},
      {.name = "gpusched.io/gpu given",
       .request = Create(PodJson().Limits({{"gpusched.io/gpu", "1"}, {"gpusched.io/gpu-core", "30"}})),
       .want_patch = nullptr},
      {.name = "nvidia.com/gpu", .request = Create(PodJson().Limits({{"nvidia.com/gpu", "2"}})), .want_patch = nullptr},
      {.name = "keti.com/mpsgpu",
       .request = Create(PodJson().Limits({{"keti.com/mpsgpu", "1"}})),
       .want_patch = nullptr},
      {.name = "a requests map without limits gets a limits map",
       .request = Create([] {
         json pod = PodJson();
         pod["spec"]["containers"][0]["resources"] = {{"requests", {{"gpusched.io/gpu-memory", "100"}}}};
         return pod;
       }()),
       .want_patch = {Add("/spec/containers/0/resources/limits", {{"gpusched.io/gpu", "1"}}), Add(kRequests0, "1")}},
      {.name = "init containers first, in spec order, then the app containers",
       .request = Create(PodJson()
                             .Limits({{"aliyun.com/gpu-mem", "4"}})
                             .Limits({{"cpu", "1"}}, 1)
                             .Limits({{"gpusched.io/gpu-memory", "100"}}, 2)
                             .Init({{"gpusched.io/gpu-core", "10"}})),
       .want_patch = {Add("/spec/initContainers/0/resources/limits/gpusched.io~1gpu", "1"),
                      Add("/spec/initContainers/0/resources/requests/gpusched.io~1gpu", "1"), Add(kLimits0, "1"),
                      Add(kRequests0, "1"), Add("/spec/containers/2/resources/limits/gpusched.io~1gpu", "1"),
                      Add("/spec/containers/2/resources/requests/gpusched.io~1gpu", "1")}},
      {.name = "a request that does not decode is left to the validating webhook",
       .request =
           Create(PodJson().Limits({{"gpusched.io/gpu-memory", "100"}}).Limits({{"gpusched.io/gpu-core", "150"}}, 1)),
       .want_patch = {Add(kLimits0, "1"), Add(kRequests0, "1")}},
      {.name = "not a CREATE",
       .request =
           Update(PodJson().Limits({{"aliyun.com/gpu-mem", "8"}}), PodJson().Limits({{"aliyun.com/gpu-mem", "8"}})),
       .want_patch = nullptr},
      {.name = "not the pod itself",
       .request = Request(Operation::kCreate, "pods", "binding", Binding("trainer")),
       .want_patch = nullptr},
  });
}

// Rule 3 of mutator.h: a pod that asks for GPUs through Genius's labels alone gets the device count, which the
// decoder then reads with the labels (Check applies the patch and validates the result).
TEST(MutatorTest, GeniusLabelsGetTheirDeviceCount) {
  WebhookConfig per_namespace = SchedulerFor("team-a", "gpusched");
  WebhookConfig labels_off;
  labels_off.resources.genius_labels = false;
  Check({
      {.name = "two GPUs of 8000 MiB each: gpusched.io/gpu 2 in the first container's limits",
       .request = Create(PodJson().Label("genius/gpu-number", "2").Label("genius/gpu-memory-each", "8000")),
       .want_patch = {Add("/spec/containers/0/resources/limits", {{"gpusched.io/gpu", "2"}})}},
      {.name = "memory only: one GPU; an existing limits map gets the entry",
       .request = Create(PodJson().LimitsOnly({{"cpu", "1"}}).Label("genius/gpu-memory-total", "4000")),
       .want_patch = {Add(kLimits0, "1")}},
      {.name = "and the namespace's scheduler, as any GPU pod",
       .request = Create(PodJson().Label("genius/gpu-number", "1")),
       .want_patch = {Add("/spec/containers/0/resources/limits", {{"gpusched.io/gpu", "1"}}),
                      {{"op", "replace"}, {"path", "/spec/schedulerName"}, {"value", "gpusched"}}},
       .config = per_namespace},
      {.name = "a GPU resource wins over the labels",
       .request = Create(PodJson().Limits({{"nvidia.com/gpu", "1"}}).Label("genius/gpu-number", "4")),
       .want_patch = nullptr},
      {.name = "labels off: not a GPU pod",
       .request = Create(PodJson().Label("genius/gpu-number", "2")),
       .want_patch = nullptr,
       .config = labels_off},
      {.name = "labels that do not decode are left to the validating webhook",
       .request = Create(PodJson().Label("genius/gpu-number", "two")),
       .want_patch = nullptr},
  });
}

TEST(MutatorTest, ResourceNamesDecideWhatCounts) {
  WebhookConfig no_aliyun;
  no_aliyun.resources.enabled.erase("aliyun.com/gpu-mem");
  WebhookConfig no_device_name;
  no_device_name.resources.enabled.erase("gpusched.io/gpu");
  Check({
      {.name = "a name gpusched does not honour here is not completed",
       .request = Create(PodJson().Limits({{"aliyun.com/gpu-mem", "8"}})),
       .want_patch = nullptr,
       .config = no_aliyun},
      {.name = "without gpusched.io/gpu enabled nothing is added",
       .request = Create(PodJson().Limits({{"gpusched.io/gpu-memory", "100"}})),
       .want_patch = nullptr,
       .config = no_device_name},
  });
}

// Rule 2 of mutator.h.
TEST(MutatorTest, SetsTheSchedulerOfConfiguredNamespaces) {
  const WebhookConfig team_a = SchedulerFor("team-a", "gpusched");
  const json replace = {{"op", "replace"}, {"path", "/spec/schedulerName"}, {"value", "gpusched"}};
  Check({
      {.name = "default-scheduler is replaced",
       .request = Create(PodJson().Limits({{"nvidia.com/gpu", "1"}})),
       .want_patch = {replace},
       .config = team_a},
      {.name = "an empty one too",
       .request = Create(PodJson().Limits({{"nvidia.com/gpu", "1"}}).SchedulerName("")),
       .want_patch = {replace},
       .config = team_a},
      {.name = "an absent one is added",
       .request = Create(PodJson().Limits({{"nvidia.com/gpu", "1"}}).SchedulerName(nullptr)),
       .want_patch = {Add("/spec/schedulerName", "gpusched")},
       .config = team_a},
      {.name = "with the device count",
       .request = Create(PodJson().Limits({{"gpusched.io/gpu-memory", "100"}})),
       .want_patch = {Add(kLimits0, "1"), Add(kRequests0, "1"), replace},
       .config = team_a},
      {.name = "a scheduler the pod chose is kept",
       .request = Create(PodJson().Limits({{"nvidia.com/gpu", "1"}}).SchedulerName("volcano")),
       .want_patch = nullptr,
       .config = team_a},
      {.name = "pods without GPUs keep the default",
       .request = Create(PodJson().Limits({{"cpu", "1"}})),
       .want_patch = nullptr,
       .config = team_a},
      {.name = "other namespaces keep the default",
       .request = Create(PodJson().Limits({{"nvidia.com/gpu", "1"}})),
       .want_patch = nullptr,
       .config = SchedulerFor("team-b", "gpusched")},
  });
}

TEST(MutatorTest, EscapesJsonPointerTokens) {
  EXPECT_EQ(EscapeJsonPointer("gpusched.io/gpu"), "gpusched.io~1gpu");
  EXPECT_EQ(EscapeJsonPointer("a~b/c"), "a~0b~1c");
  EXPECT_EQ(EscapeJsonPointer(""), "");
}

TEST(MutatorTest, WarningsSayWhatChanged) {
  const AdmissionResponse r =
      Mutate(Create(PodJson().Limits({{"aliyun.com/gpu-mem", "8"}})), SchedulerFor("team-a", "gpusched"));
  ASSERT_EQ(r.warnings.size(), 2u);
  EXPECT_EQ(r.warnings[0],
            "gpusched: container main: added gpusched.io/gpu: 1 so that the kubelet hands it its GPUs through "
            "gpusched's device plugin");
  EXPECT_EQ(r.warnings[1], "gpusched: spec.schedulerName set to gpusched for GPU pods of namespace team-a");
}

}  // namespace
}  // namespace gpusched::webhook
