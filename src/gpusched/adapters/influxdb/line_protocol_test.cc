#include "gpusched/adapters/influxdb/line_protocol.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace gpusched::adapters::influxdb {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

struct EscapeCase {
  std::string name, in, measurement, tag, field_string;
};

TEST(LineProtocolTest, EscapingTable) {
  const std::vector<EscapeCase> cases = {
      {.name = "plain", .in = "gpu", .measurement = "gpu", .tag = "gpu", .field_string = R"("gpu")"},
      // measurement escapes comma and space only; tags also escape '='
      {.name = "space",
       .in = "A100 SXM",
       .measurement = R"(A100\ SXM)",
       .tag = R"(A100\ SXM)",
       .field_string = R"("A100 SXM")"},
      {.name = "comma", .in = "a,b", .measurement = R"(a\,b)", .tag = R"(a\,b)", .field_string = R"("a,b")"},
      {.name = "equals", .in = "k=v", .measurement = "k=v", .tag = R"(k\=v)", .field_string = R"("k=v")"},
      // string fields escape only the quote and the backslash
      {.name = "quote and backslash",
       .in = R"(say "hi"\)",
       .measurement = R"(say\ "hi"\)",
       .tag = R"(say\ "hi"\)",
       .field_string = R"("say \"hi\"\\")"},
      // no newline may appear anywhere: it becomes a (escaped where needed) space
      {.name = "newline", .in = "a\nb", .measurement = R"(a\ b)", .tag = R"(a\ b)", .field_string = R"("a b")"},
      {.name = "empty", .in = "", .measurement = "", .tag = "", .field_string = R"("")"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(EscapeMeasurement(c.in), c.measurement);
    EXPECT_EQ(EscapeTag(c.in), c.tag);
    EXPECT_EQ(QuoteFieldString(c.in), c.field_string);
  }
}

ports::GpuSample Sample() {
  ports::GpuSample s;
  s.index = 3;
  s.uuid = common::GpuUuid("GPU-abc");
  s.name = "NVIDIA A100-SXM4-80GB";
  s.model = "A100 SXM4,80GB";
  s.memory_total = common::MiB(81920);
  s.memory_used = common::MiB(20480);
  s.memory_free = common::MiB(61440);
  s.gpu_utilization = 87;
  s.memory_utilization = 52.5;
  s.temperature_c = 61;
  s.power_w = 312.25;
  s.sm_clock_mhz = 1410;
  s.memory_clock_mhz = 1593;
  s.processes = {{.pid = 1}, {.pid = 2}};
  return s;
}

TEST(LineProtocolTest, OnePointPerGpu) {
  const std::vector<ports::GpuSample> samples = {Sample()};
  const std::string got = GpuSampleLines(samples, {.hostname = "node 1"}, 1700000000123);
  EXPECT_EQ(got,
            "gpu,host=node\\ 1,gpu=3,uuid=GPU-abc,model=A100\\ SXM4\\,80GB "
            "gpu_util=87,mem_copy_util=52.5,temperature_c=61,power_w=312.25,fb_used_mib=20480i,fb_free_mib=61440i,"
            "fb_total_mib=81920i,sm_clock_mhz=1410i,mem_clock_mhz=1593i,last_xid=0i,healthy=true,processes=2i "
            "1700000000123\n");
}

TEST(LineProtocolTest, UnknownValuesAndEmptyTagsAreLeftOut) {
  ports::GpuSample s;  // everything unknown
  s.index = 0;
  s.healthy = false;
  const std::vector<ports::GpuSample> samples = {s, s};
  const std::string got = GpuSampleLines(samples, {.measurement = "gpu metrics"}, 5);
  // Still one field per point (healthy), the process count 0 is known; no host, uuid or model tags.
  EXPECT_EQ(got,
            "gpu\\ metrics,gpu=0 last_xid=0i,healthy=false,processes=0i 5\n"
            "gpu\\ metrics,gpu=0 last_xid=0i,healthy=false,processes=0i 5\n");
  EXPECT_THAT(got, Not(HasSubstr("gpu_util")));
}

}  // namespace
}  // namespace gpusched::adapters::influxdb
