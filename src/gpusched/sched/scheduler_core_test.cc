#include "gpusched/sched/scheduler_core.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "gpusched/testing/builders.h"
#include "gpusched/testing/fake_clock.h"
#include "gpusched/testing/fake_cluster.h"

namespace gpusched::sched {
namespace {

// The core over in-memory ports, as the simulator drives it: pods as the watch shows them (core::WatchedPod), a
// Binding that always lands, evictions recorded.
class RecordingPreemptor final : public ports::Preemptor {
 public:
  common::Status Evict(const std::string&, const std::string&, const common::PodUid& uid) override {
    evicted.push_back(uid.str());
    return common::Status::Ok();
  }
  common::Status Nominate(const std::string&, const std::string&, const std::string&) override {
    return common::Status::Ok();
  }
  std::vector<std::string> evicted;
};

class SchedulerCoreTest : public ::testing::Test {
 protected:
  void Make(bool collect_reasons) {
    core_.reset();
    cache_ = std::make_unique<ClusterCache>(
        CacheOptions{.clock = &clock_, .wall_ms = [] { return int64_t{1'700'000'000'000}; }, .id_nonce = 3});
    auto made = SchedulerCore::Create(
        *cache_, binder_, nullptr,
        SchedulerCoreOptions{.clock = &clock_, .preemptor = &preemptor_, .collect_reasons = collect_reasons});
    ASSERT_TRUE(made.ok()) << made.status().message();
    core_ = std::move(made).value();
  }

  static core::WatchedPod Watched(const core::PodRequest& pod, const core::Allocation* bound) {
    core::WatchedPod w;
    w.uid = pod.uid;
    w.namespace_ = pod.namespace_;
    w.name = pod.name;
    w.scheduler_name = "gpusched";
    w.labels = pod.labels;
    w.priority = pod.priority;
    core::PodUpdate u{.uid = pod.uid, .key = w.Key(), .priority = pod.priority};
    if (bound != nullptr) {
      w.node_name = bound->node.str();
      u.node_name = w.node_name;
      u.namespace_ = pod.namespace_;
      u.annotated = true;
      u.allocation = *bound;
    } else {
      w.pending = true;
      w.request = pod;
      w.fingerprint = std::hash<std::string>{}(pod.uid.str());
    }
    w.update = std::move(u);
    return w;
  }

  // The pod arrives, is scheduled, and the watch shows it bound; returns its allocation.
  core::Allocation Run(const core::PodRequest& pod) {
    core_->OnPod(core::EventType::kAdded, Watched(pod, nullptr));
    EXPECT_TRUE(core_->ScheduleOne());
    EXPECT_FALSE(binder_.bound().empty());
    const core::Allocation a = binder_.bound().back();
    core_->OnPod(core::EventType::kModified, Watched(pod, &a));
    return a;
  }

  static core::PodRequest Pod(const std::string& name, int32_t gpus, int32_t priority = 0) {
    core::PodRequest p = testing::Pod(name).Cpu(100).Memory(128).Gpus(gpus).Priority(priority).Build();
    p.uid = common::PodUid("uid-" + name);
    p.namespace_ = "ns";
    return p;
  }

  testing::FakeClock clock_;
  testing::RecordingBinder binder_;
  RecordingPreemptor preemptor_;
  std::unique_ptr<ClusterCache> cache_;
  std::unique_ptr<SchedulerCore> core_;
};

// Room freed on a node wakes the waiting pods that fit there now, not every pod that waits for GPUs (with the
// reasons collected, as `gpusched scheduler` runs, and without, as the simulator runs).
TEST_F(SchedulerCoreTest, FreedRoomWakesOnlyThePodsThatFitWhereItWasFreed) {
  for (const bool reasons : {true, false}) {
    SCOPED_TRACE(reasons ? "reasons collected" : "reasons not collected");
    Make(reasons);
    core_->OnNode(testing::Node("a").Gpus(2).Cpu(8000).Memory(65536).Build());
    core_->OnNode(testing::Node("b").Gpus(1).Cpu(8000).Memory(65536).Build());
    const core::PodRequest x = Pod("x", 2), y = Pod("y", 1);
    const core::Allocation on_a = Run(x), on_b = Run(y);
    ASSERT_EQ(on_a.node.str(), "a");
    ASSERT_EQ(on_b.node.str(), "b");
    const core::PodRequest two = Pod("two", 2), one = Pod("one", 1);
    core_->OnPod(core::EventType::kAdded, Watched(two, nullptr));
    core_->OnPod(core::EventType::kAdded, Watched(one, nullptr));
    while (core_->ScheduleOne()) {
    }
    ASSERT_EQ(core_->queue_counts().unschedulable, 2U);
    core_->OnPod(core::EventType::kDeleted, Watched(y, &on_b));  // one GPU free on b
    EXPECT_EQ(core_->queue_counts().active, 1U) << "only the 1-GPU pod can use b";
    EXPECT_EQ(core_->queue_counts().unschedulable, 1U);
    ASSERT_TRUE(core_->ScheduleOne());
    EXPECT_EQ(binder_.bound().back().pod.str(), "uid-one");
    EXPECT_EQ(binder_.bound().back().node.str(), "b");
    core_->OnPod(core::EventType::kDeleted, Watched(x, &on_a));  // both of a's GPUs
    EXPECT_EQ(core_->queue_counts().active, 1U);
    ASSERT_TRUE(core_->ScheduleOne());
    EXPECT_EQ(binder_.bound().back().pod.str(), "uid-two");
    EXPECT_FALSE(core_->ScheduleOne());
  }
}

// Room freed on a node wakes as many waiting pods as it holds, in the order they would be tried; a woken pod that
// gives the room up (deleted before its attempt) passes it on to the next, and a pod that found no room there is
// not woken for it again until the node changes.
TEST_F(SchedulerCoreTest, FreedRoomWakesAsManyPodsAsItHoldsAndPassesOnWhatIsNotTaken) {
  for (const bool reasons : {true, false}) {
    SCOPED_TRACE(reasons ? "reasons collected" : "reasons not collected");
    Make(reasons);
    core_->OnNode(testing::Node("a").Gpus(2).Cpu(8000).Memory(65536).Build());
    const core::PodRequest x = Pod("x", 2);
    const core::Allocation on_a = Run(x);
    const core::PodRequest p1 = Pod("p1", 1, 30), p2 = Pod("p2", 1, 20), p3 = Pod("p3", 1, 10);
    for (const core::PodRequest* p : {&p1, &p2, &p3}) {
      core_->OnPod(core::EventType::kAdded, Watched(*p, nullptr));
    }
    while (core_->ScheduleOne()) {
    }
    ASSERT_EQ(core_->queue_counts().unschedulable, 3U);
    core_->OnPod(core::EventType::kDeleted, Watched(x, &on_a));  // two GPUs free on a
    EXPECT_EQ(core_->queue_counts().active, 2U) << "two 1-GPU pods fill it";
    EXPECT_EQ(core_->queue_counts().unschedulable, 1U);
    core_->OnPod(core::EventType::kDeleted, Watched(p1, nullptr));  // gone before its attempt
    EXPECT_EQ(core_->queue_counts().active, 2U) << "p1's share of the room goes to p3";
    while (core_->ScheduleOne()) {
    }
    ASSERT_GE(binder_.bound().size(), 3U);
    std::vector<std::string> last = {binder_.bound()[binder_.bound().size() - 2].pod.str(),
                                     binder_.bound().back().pod.str()};
    EXPECT_EQ(last, (std::vector<std::string>{"uid-p2", "uid-p3"}));
    EXPECT_EQ(core_->queue_counts().unschedulable, 0U);
  }
}

// A pod of higher priority preempts with or without the reasons collected (the simulator plans over every node);
// the room held for it wakes it when its victim is gone, though the view shows the room taken.
TEST_F(SchedulerCoreTest, PreemptionPlansWithOrWithoutReasonsAndTheNomineeWakes) {
  for (const bool reasons : {true, false}) {
    SCOPED_TRACE(reasons ? "reasons collected" : "reasons not collected");
    preemptor_.evicted.clear();
    Make(reasons);
    core_->OnNode(testing::Node("a").Gpus(1).Cpu(8000).Memory(65536).Build());
    const core::PodRequest low = Pod("low", 1, 0);
    const core::Allocation held = Run(low);
    const core::PodRequest high = Pod("high", 1, 100);
    core_->OnPod(core::EventType::kAdded, Watched(high, nullptr));
    ASSERT_TRUE(core_->ScheduleOne());
    ASSERT_EQ(preemptor_.evicted, (std::vector<std::string>{"uid-low"}));
    EXPECT_EQ(core_->queue_counts().unschedulable, 1U) << "it waits for the victim to leave";
    core_->OnPod(core::EventType::kDeleted, Watched(low, &held));
    EXPECT_EQ(core_->queue_counts().active, 1U);
    ASSERT_TRUE(core_->ScheduleOne());
    EXPECT_EQ(binder_.bound().back().pod.str(), "uid-high");
  }
}

}  // namespace
}  // namespace gpusched::sched
