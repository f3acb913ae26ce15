#include "gpusched/sim/trace_reader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpusched::sim {
namespace {

using ::testing::HasSubstr;

TEST(TraceReaderTest, ReadsElevenColumnPodList) {
  auto pods = ParsePodList(
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
      "p0,12000,16384,1,1000,,LS,Running,0,1,0\n"
      "p1,6000,12288,1,460,V100M16|V100M32,LS,Running,5,9,\n",
      "pods.csv");
  ASSERT_TRUE(pods.ok()) << pods.status();
  ASSERT_EQ(pods->size(), 2U);
  EXPECT_EQ((*pods)[1].gpu_milli, 460);
  EXPECT_EQ((*pods)[1].gpu_spec, (std::vector<std::string>{"V100M16", "V100M32"}));
  EXPECT_EQ((*pods)[1].creation_s, 5);
  EXPECT_EQ((*pods)[1].deletion_s, 9);
  const core::PodRequest r = ToPodRequest((*pods)[1]);
  ASSERT_EQ(r.containers.size(), 1U);
  EXPECT_TRUE(r.containers[0].IsSharing());
  EXPECT_TRUE(ToPodRequest((*pods)[0]).containers[0].exclusive);
}

TEST(TraceReaderTest, ReadsFiveColumnPodListAndCpuOnlyPods) {
  auto pods = ParsePodList("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,4000,100,0,0\np1,8000,200,8,1000\r\n",
                           "multigpu.csv");
  ASSERT_TRUE(pods.ok()) << pods.status();
  EXPECT_FALSE(ToPodRequest((*pods)[0]).RequestsGpu());
  EXPECT_EQ((*pods)[0].creation_s, -1);  // no times in this list
  EXPECT_EQ(ToPodRequest((*pods)[1]).TotalGpuMilli().value(), 8000);
}

TEST(TraceReaderTest, ReadsNodeList) {
  auto nodes = ParseNodeList("sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,2,P100\nn1,32000,1024,0,\n", "n.csv");
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  const core::Node n = ToNode((*nodes)[0]);
  ASSERT_EQ(n.gpus.size(), 2U);
  EXPECT_EQ(n.gpus[1].index, 1);
  EXPECT_EQ(n.gpus[1].model, "P100");
  EXPECT_EQ(n.gpus[1].memory.value(), 16384);
  EXPECT_TRUE(ToNode((*nodes)[1]).gpus.empty());
}

struct BadCase {
  std::string name;
  std::string text;
  std::string want;  // file:line:column and what
};

TEST(TraceReaderTest, MalformedRowsNameFileLineAndColumn) {
  const std::string head = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n";
  const std::vector<BadCase> cases = {
      {"not an integer", head + "p0,12x,1,0,0\n", "pods.csv:2:2: column 'cpu_milli' is not an integer: '12x'"},
      {"negative", head + "p0,1,1,0,0\np1,1,-5,0,0\n", "pods.csv:3:3: column 'memory_mib' is negative"},
      {"short row", head + "p0,1,1\n", "pods.csv:2:4: missing value for column 'num_gpu'"},
      {"empty name", head + ",1,1,0,0\n", "pods.csv:2:1: column 'name' is empty"},
      {"missing column", "name,cpu_milli,memory_mib,gpu_milli\n", "pods.csv:1: missing column 'num_gpu'"},
      {"empty file", "", "pods.csv: empty file"},
      {"unterminated quote", head + "\"p0,1,1,0,0\n", "pods.csv:2: unterminated quoted field"},
      {"implausible GPU count", head + "p0,1,1,999,0\n", "pods.csv:2:4: column 'num_gpu' is implausible"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto r = ParsePodList(c.text, "pods.csv");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), common::StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr(c.want));
  }
  auto n = ParseNodeList("sn,cpu_milli,memory_mib,gpu,model\nn0,1,1,2,\n", "nodes.csv");
  ASSERT_FALSE(n.ok());
  EXPECT_THAT(n.status().message(), HasSubstr("nodes.csv:2:5: a node with GPUs needs a model"));
  EXPECT_EQ(ReadPodList("/nonexistent/pods.csv").status().code(), common::StatusCode::kNotFound);
}

}  // namespace
}  // namespace gpusched::sim
