#include "gpusched/common/worker_thread.h"

#include <atomic>
#include <chrono>
#include <thread>

#include <gtest/gtest.h>

namespace gpusched::common {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

// A body that waits an hour between rounds still ends at once when stopped; a running worker refuses a second
// body; a stopped one starts again.
TEST(WorkerThreadTest, StopWakesTheBodyAtOnceAndTheWorkerStartsAgain) {
  WorkerThread worker;
  std::atomic<int> rounds{0};
  auto body = [&] {
    do {
      ++rounds;
    } while (!worker.WaitFor(std::chrono::hours(1)));
  };
  ASSERT_TRUE(worker.Start(body));
  EXPECT_FALSE(worker.Start(body)) << "one body at a time";
  EXPECT_TRUE(worker.Running());
  while (rounds.load() == 0) {
    std::this_thread::yield();
  }
  worker.Stop();  // were the body not woken, this would wait out the hour (and the test's timeout fail it)
  EXPECT_FALSE(worker.Running());
  EXPECT_TRUE(worker.Stopping());
  EXPECT_EQ(rounds.load(), 1);
  worker.Stop();  // idempotent
  ASSERT_TRUE(worker.Start(body));
  EXPECT_FALSE(worker.Stopping());
  worker.Stop();
  EXPECT_EQ(rounds.load(), 2);
}

TEST(WorkerThreadTest, WaitsReturnFalseWhenTheirTimeIsUpAndTrueOnceStopped) {
  WorkerThread worker;
  EXPECT_FALSE(worker.WaitFor(milliseconds(1)));
  EXPECT_FALSE(worker.WaitUntil(steady_clock::now() + milliseconds(1)));
  worker.Stop();
  EXPECT_TRUE(worker.WaitFor(std::chrono::hours(1)));
  EXPECT_TRUE(worker.WaitUntil(steady_clock::now() + std::chrono::hours(1)));
}

}  // namespace
}  // namespace gpusched::common
