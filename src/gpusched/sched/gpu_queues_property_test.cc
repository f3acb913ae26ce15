// Property test: random queue, gang and pod operations against GpuQueues, driven the way the scheduler drives it
// (admit, then place if the cluster has room; a pod within its guarantee that finds no room reclaims from queues
// that MayReclaim allows; gangs are admitted and placed whole or not at all), with these invariants checked after
// every step:
//   - no queue (nor parent) ever holds more than its limit in any dimension;
//   - every reclaimed pod came from a queue beyond its guarantee at the moment it was chosen;
//   - no gang holds GPUs with fewer than its minimum placed;
//   - the accounting equals the sum over the pods placed, and fair shares never exceed the cluster.
// The seed comes from GPUSCHED_SEED (default fixed) and is printed on failure, so any failure repeats exactly.

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "gpusched/common/rng.h"
#include "gpusched/sched/gpu_queues.h"

namespace gpusched::sched {
namespace {

uint64_t SeedFromEnv() {
  const char* s = std::getenv("GPUSCHED_SEED");
  return s != nullptr ? std::strtoull(s, nullptr, 10) : 20261127ULL;
}

struct Pod {
  std::string queue;
  GpuAmount demand;
  std::string gang;  // empty: none
};

class Model {
 public:
  explicit Model(uint64_t seed) : rng_(seed) {}

  void Run(int steps) {
    NewQueues();
    for (int step = 0; step < steps; ++step) {
      const uint64_t op = rng_.Uniform(100);
      if (op < 3) {
        NewQueues();
      } else if (op < 45) {
        TryPod();
      } else if (op < 55) {
        TryGang();
      } else {
        ReleaseSome();
      }
      Check(step);
      if (::testing::Test::HasFailure()) return;
    }
  }

 private:
  static constexpr int64_t kCapacity = 64;  // whole GPUs

  GpuAmount RandomDemand() {
    if (rng_.Uniform(3) == 0) return {0, static_cast<int64_t>(100 * (1 + rng_.Uniform(9))), 1024};
    const int64_t n = 1 + static_cast<int64_t>(rng_.Uniform(4));
    return {n, n * 1000, 0};
  }

  // New queues; the pods placed under the old ones leave first (a smaller limit does not evict by itself).
  void NewQueues() {
    while (!pods_.empty()) Remove(pods_.begin()->first);
    gangs_.clear();
    specs_.clear();
    const int top = 2 + static_cast<int>(rng_.Uniform(3));
    for (int i = 0; i < top; ++i) {
      QueueSpec s;
      s.name = "q" + std::to_string(i);
      const int64_t g = static_cast<int64_t>(rng_.Uniform(16));
      s.guaranteed = {g, g * 1000, 0};
      const int64_t l = g + static_cast<int64_t>(rng_.Uniform(40));
      s.limit = {l, l * 1000, GpuAmount::kUnlimited};
      s.weight = 1 + static_cast<double>(rng_.Uniform(4));
      specs_.push_back(s);
      if (rng_.Uniform(3) == 0) {  // a parent with two children sharing its guarantee
        for (int k = 0; k < 2; ++k) {
          QueueSpec c;
          c.name = s.name + "c" + std::to_string(k);
          c.parent = s.name;
          const int64_t cg = g / 2;
          c.guaranteed = {cg, cg * 1000, 0};
          c.limit = s.limit;
          specs_.push_back(c);
        }
      }
    }
    // Now and then an invalid one, which must be rejected and change nothing.
    if (rng_.Uniform(4) == 0) {
      QueueSpec bad;
      bad.name = "bad";
      bad.guaranteed = {5, 5000, 0};
      bad.limit = {4, 4000, 0};
      specs_.push_back(bad);
    }
    auto rejected = queues_.SetQueues(specs_);
    if (!rejected.empty()) {
      EXPECT_TRUE(rejected.contains("bad")) << rejected.begin()->second;
    }
    leaves_.clear();
    for (const auto& s : specs_) {
      if (s.name == "bad") continue;
      bool parent = false;
      for (const auto& c : specs_) parent = parent || c.parent == s.name;
      if (!parent) leaves_.push_back(s.name);
    }
    leaves_.push_back(kDefaultQueue);
    queues_.SetCapacity({kCapacity, kCapacity * 1000, 64 * 1024});
  }

  [[nodiscard]] bool ClusterFits(const GpuAmount& d) const { return (used_ + d).FitsIn(Capacity()); }
  static GpuAmount Capacity() { return {kCapacity, kCapacity * 1000, 64 * 1024}; }

  void Place(const std::string& uid, const Pod& pod) {
    pods_[uid] = pod;
    used_ += pod.demand;
    queues_.Charge(uid, pod.queue, pod.demand);
  }
  void Remove(std::string uid) {  // a copy: the key it names is erased
    used_ -= pods_.at(uid).demand;
    pods_.erase(uid);
    queues_.Release(uid);
  }

  void TryPod() {
    Pod pod{leaves_[rng_.Uniform(leaves_.size())], RandomDemand(), {}};
    const std::string uid = "p" + std::to_string(next_++);
    auto a = queues_.Admit(pod.queue, pod.demand);
    if (!a.admitted) return;
    if (!ClusterFits(pod.demand)) {
      if (!a.within_guarantee) return;
      // Reclaim: victims from borrowing queues, least placed first, until the pod fits.
      std::map<std::string, GpuAmount> taken;
      std::vector<std::string> victims;
      GpuAmount freed;
      for (const auto& [vuid, v] : pods_) {
        if ((used_ - freed + pod.demand).FitsIn(Capacity())) break;
        if (v.queue == pod.queue || !v.gang.empty()) continue;
        if (!queues_.MayReclaim(v.queue, v.demand, taken[v.queue], pod.queue)) continue;
        // The invariant: the victim's queue is beyond its guarantee right now, after what is already taken.
        auto s = queues_.Status(v.queue).value_or(*queues_.Status(kDefaultQueue));
        auto after = s.allocated - taken[v.queue];
        EXPECT_FALSE(after.FitsIn(s.guaranteed)) << "reclaimed from queue " << v.queue << " within its guarantee";
        taken[v.queue] += v.demand;
        freed += v.demand;
        victims.push_back(vuid);
      }
      if (!(used_ - freed + pod.demand).FitsIn(Capacity())) return;  // not enough to reclaim: nothing evicted
      for (const auto& v : victims) {
        queues_.CountReclaim(pods_.at(v).queue);
        Remove(v);
      }
      // The victims' leaving does not change the admission of the pod (another queue's pods).
      a = queues_.Admit(pod.queue, pod.demand);
      ASSERT_TRUE(a.admitted);
    }
    Place(uid, pod);
  }

  void TryGang() {
    const std::string queue = leaves_[rng_.Uniform(leaves_.size())];
    const int members = 2 + static_cast<int>(rng_.Uniform(8));
    const std::string gang = "g" + std::to_string(next_++);
    GpuAmount total;
    std::vector<GpuAmount> demands;
    for (int i = 0; i < members; ++i) {
      demands.push_back(RandomDemand());
      total += demands.back();
    }
    // All or nothing: the whole group is admitted and fits, or none of it is placed.
    if (!queues_.Admit(queue, total).admitted || !ClusterFits(total)) return;
    for (int i = 0; i < members; ++i) Place(gang + "-" + std::to_string(i), Pod{queue, demands[i], gang});
    gangs_[gang] = members;
  }

  void ReleaseSome() {
    if (pods_.empty()) return;
    auto it = pods_.begin();
    std::advance(it, static_cast<std::ptrdiff_t>(rng_.Uniform(pods_.size())));
    const std::string gang = it->second.gang;
    if (gang.empty()) {
      Remove(it->first);
      return;
    }
    // A gang leaves whole (its job ended).
    for (int i = 0; i < gangs_[gang]; ++i) Remove(gang + "-" + std::to_string(i));
    gangs_.erase(gang);
  }

  void Check(int step) {
    SCOPED_TRACE("step " + std::to_string(step));
    std::map<std::string, GpuAmount> held;
    std::map<std::string, int> gang_members;
    for (const auto& [uid, p] : pods_) {
      held[queues_.Exists(p.queue) ? p.queue : kDefaultQueue] += p.demand;
      if (!p.gang.empty()) ++gang_members[p.gang];
    }
    for (const auto& [gang, n] : gang_members) EXPECT_EQ(n, gangs_.at(gang)) << "gang " << gang << " is partial";
    GpuAmount fair_top;
    for (const auto& s : queues_.All()) {
      GpuAmount own = held[s.name];
      for (const auto& c : specs_) {
        if (c.parent == s.name && queues_.Exists(c.name)) own += held[c.name];
      }
      EXPECT_EQ(s.allocated, own) << "queue " << s.name;
      EXPECT_TRUE(s.allocated.FitsIn(s.limit))
          << "queue " << s.name << " holds " << ToString(s.allocated) << " beyond its limit " << ToString(s.limit);
      if (s.parent.empty()) fair_top += s.fair_share;
    }
    EXPECT_TRUE(fair_top.FitsIn(Capacity())) << ToString(fair_top);
    EXPECT_TRUE(used_.FitsIn(Capacity()));
  }

  common::Rng rng_;
  GpuQueues queues_;
  std::vector<QueueSpec> specs_;
  std::vector<std::string> leaves_;
  std::map<std::string, Pod> pods_;
  std::map<std::string, int> gangs_;
  GpuAmount used_;
  uint64_t next_ = 0;
};

TEST(GpuQueuesPropertyTest, LimitsGuaranteesAndGangsHoldUnderRandomOperations) {
  const uint64_t seed = SeedFromEnv();
  SCOPED_TRACE("GPUSCHED_SEED=" + std::to_string(seed));
  Model model(seed);
  model.Run(20000);
}

}  // namespace
}  // namespace gpusched::sched
