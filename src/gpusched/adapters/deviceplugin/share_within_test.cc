#include "gpusched/adapters/deviceplugin/share_within.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gpusched/kube/annotations.h"

namespace gpusched::adapters::deviceplugin {
namespace {

using ::testing::HasSubstr;

core::GpuShare Share(const std::string& uuid, int64_t milli, bool exclusive = false) {
  return core::GpuShare{.uuid = common::GpuUuid(uuid),
                        .milli = common::MilliGpu{milli},
                        .memory = common::MiB{1000},
                        .exclusive = exclusive};
}

PodView Pod(const std::string& ns, const std::string& name, const std::string& queue, std::vector<core::GpuShare> gpus,
            const std::string& phase = "Running") {
  PodView v;
  v.meta.namespace_ = ns;
  v.meta.name = name;
  v.meta.uid = common::PodUid("u-" + ns + "-" + name);
  v.meta.node_name = "n1";
  v.meta.phase = phase;
  if (!queue.empty()) {
    v.meta.labels["gpusched.io/queue"] = queue;
  }
  if (!gpus.empty()) {
    core::Allocation a{.pod = v.meta.uid,
                       .node = common::NodeName("n1"),
                       .containers = {{.container = "main", .gpus = std::move(gpus)}},
                       .id = 1};
    v.meta.annotations["gpusched.io/allocation"] = kube::EncodeAllocation(a);
  }
  return v;
}

TEST(ShareWithinTest, Parse) {
  EXPECT_EQ(*ParseShareWithin("any"), ShareWithin::kAny);
  EXPECT_EQ(*ParseShareWithin("namespace"), ShareWithin::kNamespace);
  EXPECT_EQ(*ParseShareWithin("queue"), ShareWithin::kQueue);
  EXPECT_THAT(ParseShareWithin("tenant").status().message(), HasSubstr("want any, namespace or queue"));
  EXPECT_STREQ(ShareWithinName(ShareWithin::kQueue), "queue");
}

TEST(ShareWithinTest, Table) {
  const std::vector<PodView> node = {
      Pod("team-a", "holder", "q1", {Share("GPU-0", 300)}),
      Pod("team-b", "whole", "q2", {Share("GPU-1", 1000, true)}),
      Pod("team-c", "gone", "q3", {Share("GPU-2", 300)}, "Succeeded"),
  };
  const struct {
    const char* name;
    ShareWithin mode;
    PodView pod;
    std::vector<core::GpuShare> shares;
    const char* error;  // "" = allowed
  } cases[] = {
      {"any: other namespaces share", ShareWithin::kAny, Pod("team-b", "p", "q2", {}), {Share("GPU-0", 300)}, ""},
      {"namespace: same namespace shares",
       ShareWithin::kNamespace,
       Pod("team-a", "p", "q9", {}),
       {Share("GPU-0", 300)},
       ""},
      {"namespace: another namespace is refused, naming the holder",
       ShareWithin::kNamespace,
       Pod("team-b", "p", "q1", {}),
       {Share("GPU-0", 300)},
       "pod team-b/p (namespace \"team-b\") would share GPU GPU-0 with pod team-a/holder (namespace \"team-a\")"},
      {"queue: same queue across namespaces shares",
       ShareWithin::kQueue,
       Pod("team-b", "p", "q1", {}),
       {Share("GPU-0", 300)},
       ""},
      {"queue: another queue is refused",
       ShareWithin::kQueue,
       Pod("team-a", "p", "q2", {}),
       {Share("GPU-0", 300)},
       "(queue \"q2\") would share GPU GPU-0 with pod team-a/holder (queue \"q1\")"},
      {"queue: no queue label is a group of its own",
       ShareWithin::kQueue,
       Pod("team-a", "p", "", {}),
       {Share("GPU-0", 300)},
       "(queue (none))"},
      {"an exclusive holder is no sharer (the conflict check refuses that)",
       ShareWithin::kNamespace,
       Pod("team-a", "p", "q1", {}),
       {Share("GPU-1", 300)},
       ""},
      {"an exclusive request shares nothing",
       ShareWithin::kNamespace,
       Pod("team-b", "p", "q2", {}),
       {Share("GPU-0", 1000, true)},
       ""},
      {"a terminal pod holds nothing",
       ShareWithin::kNamespace,
       Pod("team-a", "p", "q1", {}),
       {Share("GPU-2", 300)},
       ""},
      {"another GPU is not shared", ShareWithin::kNamespace, Pod("team-b", "p", "q2", {}), {Share("GPU-3", 300)}, ""},
  };
  // Every pod of the node holds devices: the ledger has handed it its GPUs.
  HandoffLedger ledger;
  for (const PodView& p : node) {
    ledger.Record(HandoffLedger::Entry{.uid = p.meta.uid, .pod_key = p.meta.Key(), .container = "main"});
  }
  for (const auto& c : cases) {
    const common::Status s = CheckShareWithin(c.mode, c.pod.meta, c.shares, node, {}, ledger);
    if (std::string(c.error).empty()) {
      EXPECT_TRUE(s.ok()) << c.name << ": " << s.message();
    } else {
      EXPECT_EQ(s.code(), common::StatusCode::kFailedPrecondition) << c.name;
      EXPECT_THAT(s.message(), HasSubstr(c.error)) << c.name;
    }
  }
  // The pod itself (already listed, with its own allocation) is not its own neighbour.
  const PodView self = Pod("team-b", "self", "q2", {Share("GPU-5", 300)});
  std::vector<PodView> with_self = node;
  with_self.push_back(self);
  EXPECT_TRUE(CheckShareWithin(ShareWithin::kNamespace, self.meta, std::vector<core::GpuShare>{Share("GPU-5", 300)},
                               with_self, {}, ledger)
                  .ok());
  // A pod merely bound, holding nothing yet, is the newcomer: the pod allocated first keeps the GPU.
  const PodView bound = Pod("team-z", "bound", "", {Share("GPU-6", 300)});
  const std::vector<PodView> with_bound = {bound};
  const std::vector<core::GpuShare> six = {Share("GPU-6", 300)};
  EXPECT_TRUE(
      CheckShareWithin(ShareWithin::kNamespace, Pod("team-a", "p", "", {}).meta, six, with_bound, {}, ledger).ok());
  // Once the kubelet lists devices for it, it holds the GPU.
  const std::vector<KubeletPod> kubelet = {
      KubeletPod{.namespace_ = "team-z",
                 .name = "bound",
                 .containers = {{.name = "main", .devices = {{"gpusched.io/gpu", {"x"}}}}}}};
  EXPECT_THAT(
      CheckShareWithin(ShareWithin::kNamespace, Pod("team-a", "p", "", {}).meta, six, with_bound, kubelet, ledger)
          .message(),
      HasSubstr("with pod team-z/bound"));
}

}  // namespace
}  // namespace gpusched::adapters::deviceplugin
