#include "gpusched/sim/queue_why.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace gpusched::sim {
namespace {

using ::testing::HasSubstr;

core::GpuAmount Whole(int64_t n) { return core::GpuAmount{n, 1000 * n, 0}; }

QueuedPodView Pod(std::string ns, std::string name, int32_t priority, std::string created, int64_t gpus,
                  bool placed = false, std::string scheduler = "gpusched") {
  return QueuedPodView{.uid = "uid-" + name,
                       .key = ns + "/" + name,
                       .namespace_ = ns,
                       .scheduler_name = std::move(scheduler),
                       .priority = priority,
                       .created = std::move(created),
                       .placed = placed,
                       .demand = Whole(gpus)};
}

// team-a serves namespace a: guaranteed 2 GPUs, limit 4; it holds 3. Three pods of a wait for gpusched: the
// high-priority one first, then the older of the two others. A pod of another scheduler, and a pod of namespace b
// (the default queue), do not count.
TEST(QueueWhyTest, PositionShareAndQuotaByHand) {
  const std::vector<core::QueueSpec> specs = {
      core::QueueSpec{.name = "team-a", .namespaces = {"a"}, .guaranteed = Whole(2), .limit = Whole(4), .weight = 1}};
  const QueuedPodView me = Pod("a", "me", 0, "2026-11-27T10:00:05Z", 2);
  const std::vector<QueuedPodView> pods = {
      Pod("a", "running", 0, "2026-11-27T09:00:00Z", 3, /*placed=*/true),
      me,
      Pod("a", "old", 0, "2026-11-27T10:00:00Z", 1),
      Pod("a", "urgent", 100, "2026-11-27T10:00:09Z", 1),
      Pod("a", "elsewhere", 1000, "2026-11-27T08:00:00Z", 1, false, "default-scheduler"),
      Pod("b", "other-queue", 1000, "2026-11-27T08:00:00Z", 1),
  };
  const QueueWhy why = ExplainQueue(specs, Whole(8), pods, me);
  EXPECT_EQ(why.queue, "team-a");
  EXPECT_EQ(why.position, 3);
  EXPECT_EQ(why.pending, 3);
  EXPECT_EQ(why.ahead, (std::vector<std::string>{"a/old (priority 0)", "a/urgent (priority 100)"}));
  EXPECT_EQ(why.status.allocated, Whole(3));
  EXPECT_EQ(why.status.running_pods, 1U);
  EXPECT_FALSE(why.admission.admitted);  // 3 held + 2 > limit 4
  const std::string text = FormatQueueWhy(why);
  EXPECT_THAT(text, HasSubstr("GPU queue team-a: 3rd of 3 pending pod(s)"));
  EXPECT_THAT(text, HasSubstr("ahead of it: a/old (priority 0), a/urgent (priority 100)\n"));
  EXPECT_THAT(text, HasSubstr("the queue holds gpus=3 milli=3000"));
  EXPECT_THAT(text, HasSubstr("quota: not admitted now: " + why.admission.reason));
  EXPECT_THAT(why.admission.reason, HasSubstr("team-a"));

  // Room under the limit: admitted, and within the guarantee once the running pod is gone.
  std::vector<QueuedPodView> fewer = pods;
  fewer.erase(fewer.begin());
  const QueueWhy now = ExplainQueue(specs, Whole(8), fewer, me);
  EXPECT_TRUE(now.admission.admitted);
  EXPECT_TRUE(now.admission.within_guarantee);
  EXPECT_THAT(FormatQueueWhy(now), HasSubstr("quota: admitted (within the queue's guarantee"));
}

TEST(QueueWhyTest, WithoutQueuesEveryPodIsInTheDefaultQueue) {
  const QueuedPodView me = Pod("x", "me", 0, "2026-11-27T10:00:00Z", 1);
  const QueueWhy why = ExplainQueue({}, Whole(2), {me, Pod("y", "first", 5, "2026-11-27T11:00:00Z", 1)}, me);
  EXPECT_EQ(why.queue, "default");
  EXPECT_EQ(why.position, 2);
  EXPECT_TRUE(why.admission.admitted);
  EXPECT_THAT(FormatQueueWhy(why), HasSubstr("GPU queue default: 2nd of 2 pending pod(s)"));
}

}  // namespace
}  // namespace gpusched::sim
