#include "gpusched/daemon/tls_reloader.h"

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace gpusched::daemon {
namespace {

class TlsReloaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("gpusched-tls-reloader-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    Write("cert", "A-cert");
    Write("key", "A-key");
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void Write(const std::string& name, const std::string& text) { std::ofstream(dir_ / name) << text; }
  TlsReloaderOptions Options() const {
    return {.cert_file = (dir_ / "cert").string(), .key_file = (dir_ / "key").string(), .name = "test"};
  }
  std::filesystem::path dir_;
};

TEST_F(TlsReloaderTest, ReloadsOnlyWhenTheFilesChangedAndKeepsTryingUntilThePairLoads) {
  int calls = 0;
  common::Status answer = common::Status::Ok();
  TlsReloader r(Options(), [&] {
    ++calls;
    return answer;
  });
  r.Prime();
  EXPECT_FALSE(r.CheckNow());  // what the server loaded: nothing to do
  EXPECT_EQ(calls, 0);

  // A renewal half written: the certificate is new, the key still the old one; the server refuses the pair.
  Write("cert", "B-cert");
  answer = common::InvalidArgument("key does not match the certificate");
  EXPECT_FALSE(r.CheckNow());  // seen once: it may still be being written
  EXPECT_EQ(calls, 0);
  EXPECT_FALSE(r.CheckNow());
  EXPECT_FALSE(r.CheckNow());  // tried again at every check until it loads
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(r.failures(), 2U);
  EXPECT_EQ(r.reloads(), 0U);

  Write("key", "B-key");
  answer = common::Status::Ok();
  EXPECT_FALSE(r.CheckNow());  // the new pair, seen once
  EXPECT_TRUE(r.CheckNow());   // the same bytes again: loaded
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(r.reloads(), 1U);
  EXPECT_FALSE(r.CheckNow());  // B is what is served now
  EXPECT_EQ(calls, 3);

  // Files that cannot be read (a Secret volume between two symlink swaps) are not a renewal.
  std::filesystem::remove(dir_ / "key");
  EXPECT_FALSE(r.CheckNow());
  EXPECT_EQ(calls, 3);
  Write("key", "B-key");
  EXPECT_FALSE(r.CheckNow());  // back as it was: still nothing to do
  EXPECT_EQ(calls, 3);
}

TEST_F(TlsReloaderTest, StartNeedsAPositiveIntervalAndStopIsIdempotent) {
  TlsReloaderOptions o = Options();
  o.interval = std::chrono::milliseconds(0);
  TlsReloader zero(o, [] { return common::Status::Ok(); });
  EXPECT_EQ(zero.Start().code(), common::StatusCode::kInvalidArgument);
  TlsReloader r(Options(), [] { return common::Status::Ok(); });
  r.Prime();
  ASSERT_TRUE(r.Start().ok());
  EXPECT_EQ(r.Start().code(), common::StatusCode::kFailedPrecondition);
  r.Stop();
  r.Stop();
  EXPECT_EQ(r.reloads(), 0U);
}

}  // namespace
}  // namespace gpusched::daemon
