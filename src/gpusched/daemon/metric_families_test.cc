// daemon::ScrapeFamilies: families added at scrape time are written after the registry's, in order, with their
// samples' labels; the GPU queue families leave unlimited amounts out.

#include "gpusched/daemon/metric_families.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpusched::daemon {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(ScrapeFamiliesTest, WritesEachFamilyWithItsSamplesAndTheQueuesWithoutUnlimitedAmounts) {
  ScrapeFamilies out;
  auto& binds = out.Family("x_binds_total", "Binds by result", prometheus::MetricType::Counter);
  ScrapeFamilies::Sample(binds, 3, {{"result", "ok"}});
  ScrapeFamilies::Sample(binds, 1, {{"result", "failed"}});
  ScrapeFamilies::Sample(out.Family("x_oldest_seconds", "Oldest", prometheus::MetricType::Gauge), 2.5);
  core::QueueStatus prod{.name = "prod",
                         .guaranteed = {.gpus = 2, .milli = 2000, .memory_mib = core::GpuAmount::kUnlimited},
                         .limit = core::GpuAmount::Unlimited(),
                         .allocated = {.gpus = 1, .milli = 1500, .memory_mib = 4096},
                         .pending_pods = 4,
                         .reclaimed_pods = 7};
  out.GpuQueues({prod});
  const std::string text = out.Serialize();
  EXPECT_THAT(text, HasSubstr("# TYPE x_binds_total counter\nx_binds_total{result=\"ok\"} 3\n"
                              "x_binds_total{result=\"failed\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("x_oldest_seconds 2.5\n"));
  EXPECT_LT(text.find("x_binds_total"), text.find("x_oldest_seconds")) << "in the order added";
  EXPECT_THAT(text, HasSubstr("gpusched_queue_allocated{queue=\"prod\",resource=\"memory_mib\"} 4096\n"));
  EXPECT_THAT(text, HasSubstr("gpusched_queue_guaranteed{queue=\"prod\",resource=\"milli\"} 2000\n"));
  EXPECT_THAT(text, Not(HasSubstr("gpusched_queue_guaranteed{queue=\"prod\",resource=\"memory_mib\"}")));
  EXPECT_THAT(text, Not(HasSubstr("gpusched_queue_limit{")));
  EXPECT_THAT(text, HasSubstr("gpusched_queue_pending_pods{queue=\"prod\"} 4\n"));
  EXPECT_THAT(text, HasSubstr("gpusched_queue_reclaimed_pods_total{queue=\"prod\"} 7\n"));
}

}  // namespace
}  // namespace gpusched::daemon
