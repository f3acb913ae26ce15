#include "gpusched/webhook/queue_membership.h"

#include <gtest/gtest.h>

namespace gpusched::webhook {
namespace {

// The same rule and words as the scheduler's (sched::GpuQueues::JoinRefusal).
TEST(QueueMembershipTest, AQueueAdmitsItsNamespacesAndItsParents) {
  const QueueView view({
      {.name = "research", .guaranteed = {.gpus = 4, .milli = 4000}},
      {.name = "r1", .parent = "research", .namespaces = {"lab"}, .guaranteed = {.gpus = 2, .milli = 2000}},
      {.name = "team-b", .namespaces = {"team-b"}},
  });
  EXPECT_EQ(view.size(), 3u);
  EXPECT_EQ(view.JoinRefusal("r1", "lab"), "");
  EXPECT_EQ(view.JoinRefusal("r1", "team-a"),
            "pods of namespace team-a may not join queue r1: it admits namespaces lab only");
  EXPECT_EQ(view.JoinRefusal("team-b", "team-a"),
            "pods of namespace team-a may not join queue team-b: it admits namespaces team-b only");
  EXPECT_EQ(view.JoinRefusal("missing", "team-a"), "");
  // The undeclared default admits the namespaces nobody serves.
  EXPECT_EQ(view.JoinRefusal("default", "team-a"), "");
  EXPECT_EQ(view.JoinRefusal("default", "team-b"),
            "pods of namespace team-b may not join queue default: namespace team-b is served by queue team-b");
}

TEST(QueueMembershipTest, ADeclaredDefaultServesTheRestAndInvalidQueuesDoNotCount) {
  const QueueView view({
      {.name = "default", .namespaces = {"shared"}},
      {.name = "team-b", .namespaces = {"team-b"}},
      // Invalid (a guarantee above its limit): the scheduler leaves it out, and so does the webhook.
      {.name = "broken", .namespaces = {"team-c"}, .guaranteed = {.gpus = 3}, .limit = {.gpus = 2}},
  });
  EXPECT_EQ(view.size(), 2u);
  EXPECT_EQ(view.JoinRefusal("default", "shared"), "");
  EXPECT_EQ(view.JoinRefusal("default", "team-a"), "");
  EXPECT_NE(view.JoinRefusal("default", "team-b"), "");
  EXPECT_EQ(view.JoinRefusal("broken", "team-a"), "");  // not a queue at all
}

TEST(QueueMembershipTest, TheDirectoryHandsOutTheLastSet) {
  QueueDirectory directory;
  EXPECT_EQ(directory.Get()->size(), 0u);
  const auto before = directory.Get();
  directory.Set({{.name = "team-b", .namespaces = {"team-b"}}});
  EXPECT_EQ(directory.Get()->size(), 1u);
  EXPECT_EQ(before->size(), 0u);  // a reader keeps the view it took
  EXPECT_NE(directory.Get()->JoinRefusal("team-b", "team-a"), "");
}

}  // namespace
}  // namespace gpusched::webhook
