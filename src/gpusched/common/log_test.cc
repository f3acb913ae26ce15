#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gpusched/common/log.h"
#include "gpusched/common/log_fields.h"

namespace gpusched::common {
namespace {

TEST(LogFieldsTest, TextFormQuotesWhatWouldBeAmbiguous) {
  const std::vector<LogField> fields = {{"pod", "ml/train-0"}, {"gpus", "GPUs 0,1"},
                                        {"reason", "a=b"},     {"msg", "say \"hi\"\nbye"},
                                        {"empty", ""},         {"ctl", std::string("a\x01")}};
  EXPECT_EQ(FormatLogFields("bound", fields),
            "bound pod=ml/train-0 gpus=\"GPUs 0,1\" reason=\"a=b\" msg=\"say \\\"hi\\\"\\nbye\" empty=\"\" "
            "ctl=\"a\\x01\"");
}

TEST(LogFieldsTest, EmptyFieldsAreLeftOutAndTheStructuredSinkGetsTheRest) {
  std::string message;
  std::vector<std::pair<std::string, std::string>> got;
  SetStructuredLogSink([&](LogLevel, std::string_view m, std::span<const LogField> fields) {
    message = m;
    for (const LogField& f : fields) {
      got.emplace_back(f.key, f.value);
    }
  });
  Log(LogLevel::kWarn, "refused", {{"pod", "a/b"}, {"node", ""}, {"reason", "no_fit"}});
  SetStructuredLogSink(nullptr);
  EXPECT_EQ(message, "refused");
  EXPECT_EQ(got, (std::vector<std::pair<std::string, std::string>>{{"pod", "a/b"}, {"reason", "no_fit"}}));
}

TEST(LogFieldsTest, WithoutAStructuredSinkThePlainSinkGetsTheTextForm) {
  std::string line;
  SetLogSink([&](LogLevel, std::string_view m) { line = m; });
  Log(LogLevel::kError, "bind failed", {{"pod", "a/b"}, {"gpus", "GPU 2 (30%)"}});
  Log(LogLevel::kDebug, "below the level", {{"pod", "x"}});  // filtered before any sink
  SetLogSink([](LogLevel, std::string_view) {});
  EXPECT_EQ(line, "bind failed pod=a/b gpus=\"GPU 2 (30%)\"");
}

}  // namespace
}  // namespace gpusched::common
