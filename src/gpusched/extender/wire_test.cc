#include "gpusched/extender/wire.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace gpusched::extender {
namespace {

using nlohmann::json;

const std::string kFixtures = std::string(GPUSCHED_SHARED_DIR) + "/fixtures/kube-scheduler-extender/";

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool HaveFixtures() { return std::filesystem::exists(kFixtures); }

// Every filter/prioritize body kube-scheduler 1.20 and 1.32 sent, in both cache modes, decodes; names and raw
// node objects match what a DOM parse sees.
TEST(WireTest, DecodesEveryRealExtenderArgsBody) {
  if (!HaveFixtures()) {
    GTEST_SKIP() << "../shared/fixtures not found next to the repository";
  }
  int files = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(kFixtures)) {
    const std::string name = entry.path().filename().string();
    if (name.find("filter") == std::string::npos && name.find("prioritize") == std::string::npos) {
      continue;
    }
    ++files;
    const std::string body = Read(entry.path().string());
    const json dom = json::parse(body);
    auto args = DecodeExtenderArgs(body);
    ASSERT_TRUE(args.ok()) << entry.path() << ": " << args.status();
    EXPECT_EQ(json::parse(args->pod), dom["Pod"]) << entry.path();
    const bool full = !dom["Nodes"].is_null();
    EXPECT_EQ(args->full_nodes, full) << entry.path();
    std::vector<std::string> names;
    if (full) {
      for (const auto& n : dom["Nodes"]["items"]) {
        names.push_back(n["metadata"]["name"]);
      }
    } else {
      names = dom["NodeNames"].get<std::vector<std::string>>();
    }
    ASSERT_EQ(args->nodes.size(), names.size()) << entry.path();
    for (size_t i = 0; i < names.size(); ++i) {
      EXPECT_EQ(args->nodes[i].name, names[i]);
      if (full) {
        EXPECT_EQ(json::parse(args->nodes[i].raw), dom["Nodes"]["items"][i]);
      }
    }
  }
  EXPECT_EQ(files, 24);  // 6 filter and prioritize bodies in each of the 4 directories
}

TEST(WireTest, KeysMatchInAnyCase) {
  auto args = DecodeExtenderArgs(R"({"pod":{"metadata":{"name":"p"}},"nodes":null,"nodenames":["a","b"]})");
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_FALSE(args->full_nodes);
  ASSERT_EQ(args->nodes.size(), 2u);
  EXPECT_EQ(args->nodes[1].name, "b");
  auto bind = DecodeBindingArgs(R"({"podname":"p","PODNAMESPACE":"ns","PodUid":"u","node":"n"})");
  ASSERT_TRUE(bind.ok()) << bind.status();
  EXPECT_EQ(bind->pod_name, "p");
  EXPECT_EQ(bind->pod_namespace, "ns");
  EXPECT_EQ(bind->pod_uid, "u");
  EXPECT_EQ(bind->node, "n");
}

TEST(WireTest, FullModeEchoesNodeObjectsByteForByte) {
  const std::string node_a = R"({"metadata":{"name":"a","labels":{"x":"y"}},"spec":{}})";
  const std::string node_b = R"({"spec":{},"metadata":{"uid":"1","name":"b\u0062"}})";  // the slow path
  auto args = DecodeExtenderArgs(R"({"Pod":{"metadata":{"name":"p"}},"Nodes":{"metadata":{},"items":[)" + node_a + "," +
                                 node_b + R"(]},"NodeNames":null})");
  ASSERT_TRUE(args.ok()) << args.status();
  ASSERT_EQ(args->nodes.size(), 2u);
  EXPECT_EQ(args->nodes[1].name, "bb");
  FilterResult r{.full_nodes = true};
  r.passed = {&args->nodes[0], &args->nodes[1]};
  r.failed = {{"c", "container main: needs 300 milli"}};
  const std::string out = EncodeFilterResult(r);
  EXPECT_EQ(out, R"({"Nodes":{"metadata":{},"items":[)" + node_a + "," + node_b +
                     R"(]},"NodeNames":null,"FailedNodes":{"c":"container main: needs 300 milli"},)"
                     R"("FailedAndUnresolvableNodes":{},"Error":""})");
  EXPECT_FALSE(json::parse(out, nullptr, false).is_discarded());
}

TEST(WireTest, EncodesTheUpstreamExamples) {
  NodeRef n1{.name = "node1"};
  FilterResult r;
  r.passed = {&n1};
  r.failed = {{"foo", "bar"}};
  r.failed_unresolvable = {{"baz", "qux"}};
  r.error = "myerror";
  EXPECT_EQ(EncodeFilterResult(r), R"({"Nodes":null,"NodeNames":["node1"],"FailedNodes":{"foo":"bar"},)"
                                   R"("FailedAndUnresolvableNodes":{"baz":"qux"},"Error":"myerror"})");
  EXPECT_EQ(EncodeHostPriorityList({{"myhost", 1}, {"b", 10}}),
            R"([{"Host":"myhost","Score":1},{"Host":"b","Score":10}])");
  EXPECT_EQ(EncodeHostPriorityList({}), "[]");
  EXPECT_EQ(EncodeBindingResult("myerror"), R"({"Error":"myerror"})");
  EXPECT_EQ(EncodePreemptionResult({{"foo", NodeVictims{.pod_uids = {"myuid"}, .num_pdb_violations = 1}}}),
            R"({"NodeNameToMetaVictims":{"foo":{"Pods":[{"UID":"myuid"}],"NumPDBViolations":1}}})");
  EXPECT_EQ(JsonString("a\"b\\c\n\x01"), R"("a\"b\\c\n\u0001")");
}

TEST(WireTest, DecodesRealBindAndPreemptBodies) {
  if (!HaveFixtures()) {
    GTEST_SKIP() << "../shared/fixtures not found next to the repository";
  }
  auto bind = DecodeBindingArgs(Read(kFixtures + "1.32/cache-true/003-bind.json"));
  ASSERT_TRUE(bind.ok()) << bind.status();
  EXPECT_EQ(bind->pod_name, "gpu-share");
  EXPECT_EQ(bind->pod_namespace, "default");
  EXPECT_FALSE(bind->pod_uid.empty());
  EXPECT_TRUE(bind->node.starts_with("gpu-node-"));
  for (const char* mode : {"cache-true", "cache-false"}) {
    const std::string body = Read(kFixtures + "1.32/" + mode + "/033-preempt.json");
    const json dom = json::parse(body);
    auto args = DecodePreemptionArgs(body);
    ASSERT_TRUE(args.ok()) << mode << ": " << args.status();
    ASSERT_EQ(args->nodes.size(), 3u) << mode;
    const json& victims = dom[std::string(mode) == "cache-true" ? "NodeNameToMetaVictims" : "NodeNameToVictims"];
    for (const auto& [node, v] : args->nodes) {
      ASSERT_EQ(v.pod_uids.size(), 1u);
      const json& pod = victims[node]["Pods"][0];
      EXPECT_EQ(v.pod_uids[0], pod.contains("UID") ? pod["UID"] : pod["metadata"]["uid"]) << mode;
      EXPECT_EQ(v.num_pdb_violations, 0);
    }
  }
}

TEST(WireTest, MalformedBodiesAreErrorsThatNameTheProblem) {
  const std::pair<const char*, const char*> cases[] = {
      {"", "not JSON"},
      {"{", "extender request"},
      {R"({"Pod":{"metadata":{}},"NodeNames":["a"])", "extender request"},  // truncated
      {"[]", "not a JSON object"},
      {R"({"NodeNames":["a"]})", "missing Pod"},
      {R"({"Pod":null,"NodeNames":["a"]})", "Pod is null"},
      {R"({"Pod":[],"NodeNames":["a"]})", "Pod is not a JSON object"},
      {R"({"Pod":{},"Nodes":null,"NodeNames":null})", "neither Nodes nor NodeNames"},
      {R"({"Pod":{},"NodeNames":[1]})", "non-string"},
      {R"({"Pod":{},"NodeNames":"a"})", "not a list"},
      {R"({"Pod":{},"Nodes":{"items":[{"spec":{}}]}})", "no metadata"},
      {R"({"Pod":{},"Nodes":{"items":[7]}})", "not a JSON object"},
      {R"({"Pod":{},"NodeNames":["a"]} trailing)", "extender request"},
      {R"({"Pod":{},"NodeNames":["a"]} {})", "extender request"},
  };
  for (const auto& [body, expect] : cases) {
    auto args = DecodeExtenderArgs(body);
    ASSERT_FALSE(args.ok()) << body;
    EXPECT_EQ(args.status().code(), common::StatusCode::kInvalidArgument);
    EXPECT_NE(args.status().message().find(expect), std::string::npos) << body << " -> " << args.status();
  }
  EXPECT_FALSE(DecodeBindingArgs(R"({"PodName":"p"})").ok());
  EXPECT_FALSE(DecodeBindingArgs(R"({"PodName":"p","Node":7})").ok());
  EXPECT_FALSE(DecodeBindingArgs("null").ok());
  EXPECT_FALSE(DecodePreemptionArgs(R"({"Pod":{}})").ok());
  EXPECT_FALSE(DecodePreemptionArgs(R"({"Pod":{},"NodeNameToMetaVictims":{"n":{"Pods":[{}]}}})").ok());
  EXPECT_FALSE(DecodePreemptionArgs(R"({"Pod":{},"NodeNameToMetaVictims":{"n":{"NumPDBViolations":"x"}}})").ok());
}

}  // namespace
}  // namespace gpusched::extender
