// extender_load: a load generator for the extender's HTTP verbs against a synthetic cluster (bench/extender-latency.sh
// runs it). The extender runs in this process with its real server, service and mirror; the requests go over
// loopback HTTP/1.1 with keep-alive from separate client threads, as kube-scheduler's would.
//
// Cluster: NODES nodes x 8 GPUs (A100 80 GB); every second node is partly allocated (1..6 shares of 300..700
// milli), charged through the same watch path as real pods. Requests use the gpu-share pod of the fixtures (a new
// uid and name per request, so the pod is decoded every time) and a random subset of CANDIDATES nodes, as
// kube-scheduler sends after its own filters (percentageOfNodesToScore). Full-object requests carry Node objects
// shaped like the real ones in ../shared/fixtures (about 3.3 KB each).
//
// Prints p50/p99 per request kind, then the sustained filter+prioritize rate, then one RESULT line.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "gpusched/extender/server.h"
#include "gpusched/kube/annotations.h"
#include "gpusched/net/http_client.h"
#include "gpusched/net/http_server.h"

namespace ext = gpusched::extender;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

struct NullBinder : gpusched::ports::Binder {
  gpusched::common::Status Bind(const gpusched::core::PodRequest&, const gpusched::core::Allocation&) override {
    return gpusched::common::Status::Ok();
  }
};

using ojson = nlohmann::ordered_json;  // keeps Go's key order (metadata.name first), as kube-scheduler sends

ojson ReadFixture(const std::string& dir, const std::string& file) {
  std::ifstream in(dir + "/" + file);
  if (!in) {
    return nullptr;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return ojson::parse(ss.str());
}

// A Node like the fixtures' (labels, managedFields, conditions, images): the template's bytes with our name and GPUs.
ojson MakeNode(const ojson& tmpl, const std::string& name) {
  ojson n = tmpl;
  n["metadata"]["name"] = name;
  n["metadata"]["uid"] = "uid-" + name;
  if (n["metadata"].contains("labels")) {
    n["metadata"]["labels"]["kubernetes.io/hostname"] = name;
  }
  ojson gpus = ojson::array();
  for (int i = 0; i < 8; ++i) {
    gpus.push_back({{"uuid", "GPU-" + name + "-" + std::to_string(i)},
                    {"index", i},
                    {"model", "A100-SXM4-80GB"},
                    {"memory_mib", 81920}});
  }
  n["metadata"]["annotations"]["gpusched.io/gpus"] = gpus.dump();
  return n;
}

ojson SyntheticNodeTemplate() {
  using json = ojson;
  json n = {{"metadata",
             {{"name", "x"},
              {"labels",
               {{"kubernetes.io/hostname", "x"},
                {"kubernetes.io/os", "linux"},
                {"nvidia.com/gpu.product", "NVIDIA-A100-SXM4-80GB"},
                {"nvidia.com/gpu.count", "8"}}},
              {"annotations", json::object()}}},
            {"spec", json::object()},
            {"status",
             {{"capacity", {{"cpu", "32"}, {"memory", "128Gi"}, {"nvidia.com/gpu", "8"}, {"pods", "110"}}},
              {"allocatable", {{"cpu", "32"}, {"memory", "128Gi"}, {"nvidia.com/gpu", "8"}, {"pods", "110"}}}}}};
  // managedFields as kubectl apply leaves them: most of a real Node's bytes.
  json fields = json::array();
  for (int i = 0; i < 6; ++i) {
    fields.push_back({{"manager", "kubectl-client-side-apply"},
                      {"operation", "Update"},
                      {"apiVersion", "v1"},
                      {"time", "2026-07-01T00:00:00Z"},
                      {"fieldsType", "FieldsV1"},
                      {"fieldsV1",
                       {{"f:metadata", {{"f:labels", {{"f:kubernetes.io/hostname", json::object()}}}}},
                        {"f:status", {{"f:capacity", {{"f:cpu", json::object()}}}}}}}});
  }
  n["metadata"]["managedFields"] = fields;
  return n;
}

ojson SyntheticPod() {
  using json = ojson;
  return {{"metadata", {{"name", "gpu-share"}, {"namespace", "default"}, {"uid", "u"}}},
          {"spec",
           {{"schedulerName", "default-scheduler"},
            {"priority", 0},
            {"containers",
             json::array(
                 {{{"name", "main"},
                   {"image", "registry.invalid/cuda:12"},
                   {"resources",
                    {{"limits",
                      {{"gpusched.io/gpu", "1"}, {"gpusched.io/gpu-core", "30"}, {"gpusched.io/gpu-memory", "20k"}}},
                     {"requests",
                      {{"gpusched.io/gpu", "1"},
                       {"gpusched.io/gpu-core", "30"},
                       {"gpusched.io/gpu-memory", "20k"}}}}}}})}}},
          {"status", {{"phase", "Pending"}}}};
}

// A keep-alive HTTP client: the one of every adapter (net::HttpClient on libcurl). kube-scheduler's Go client reads
// big responses in large chunks; so does this one with a 512 KiB buffer, which keeps the client's own cost out of the
// extender's latency.
class Client {
 public:
  explicit Client(int port)
      : http_(gpusched::net::HttpClient::Create(
                  gpusched::net::HttpClientOptions{.base_url = "http://127.0.0.1:" + std::to_string(port),
                                                   .receive_buffer_bytes = 512 * 1024,
                                                   .max_idle_handles = 1})
                  .value()) {}
  // POSTs the body; true on HTTP 200.
  bool Post(const std::string& path, const std::string& body) {
    gpusched::net::ClientRequest request{
        .method = "POST", .target = path, .body = body, .headers = {"Content-Type: application/json"}};
    request.reserve = body.size();
    auto response = http_->Send(request);
    return response.ok() && response->status == 200;
  }

 private:
  std::unique_ptr<gpusched::net::HttpClient> http_;
};

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) {
    return 0;
  }
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5));
  return v[i];
}

}  // namespace

int main(int argc, char** argv) {
  int nodes = 5000;
  int candidates = 500;
  int requests = 2000;
  int clients = 4;
  int threads = 4;
  double rps_seconds = 5;
  std::string fixtures = "../shared/fixtures/kube-scheduler-extender";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const std::string v = argv[i + 1];
    if (k == "--nodes")
      nodes = std::stoi(v);
    else if (k == "--candidates")
      candidates = std::stoi(v);
    else if (k == "--requests")
      requests = std::stoi(v);
    else if (k == "--clients")
      clients = std::stoi(v);
    else if (k == "--threads")
      threads = std::stoi(v);
    else if (k == "--rps-seconds")
      rps_seconds = std::stod(v);
    else if (k == "--fixtures")
      fixtures = v;
    else {
      std::cerr << "usage: extender_load [--nodes N] [--candidates N] [--requests N] [--clients N] [--threads N] "
                   "[--rps-seconds S] [--fixtures DIR]\n";
      return 2;
    }
  }
  candidates = std::min(candidates, nodes);
  const ojson body_full = ReadFixture(fixtures, "1.32/cache-false/001-filter.json");
  const ojson node_tmpl = body_full.is_null() ? SyntheticNodeTemplate() : body_full["Nodes"]["items"][0];
  const ojson pod_tmpl = body_full.is_null() ? SyntheticPod() : body_full["Pod"];
  std::cout << "node objects: " << (body_full.is_null() ? "synthetic" : "from " + fixtures) << ", "
            << MakeNode(node_tmpl, "gpu-node-00000").dump().size() << " bytes each\n";

  // The cluster, through the watch path.
  ext::ClusterMirror mirror;
  std::vector<std::string> names;
  std::vector<std::string> raw_nodes;
  std::mt19937_64 rng(2023);
  for (int i = 0; i < nodes; ++i) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "gpu-node-%05d", i);
    names.emplace_back(buf);
    raw_nodes.push_back(MakeNode(node_tmpl, names.back()).dump());
    mirror.OnNode(ext::EventType::kAdded, json::parse(raw_nodes.back()));
    if (i % 2 == 1) {
      continue;
    }
    const int shares = 1 + static_cast<int>(rng() % 6);
    for (int s = 0; s < shares; ++s) {
      gpusched::core::Allocation a{.node = gpusched::common::NodeName(names.back()), .id = rng() % 100000};
      const int gpu = s;  // distinct GPUs: the fill never overcommits
      a.containers.push_back(gpusched::core::ContainerAllocation{
          .container = "main",
          .gpus = {gpusched::core::GpuShare{
              .index = gpu,
              .uuid = gpusched::common::GpuUuid("GPU-" + names.back() + "-" + std::to_string(gpu)),
              .milli = gpusched::common::MilliGpu{300 + static_cast<int64_t>(rng() % 5) * 100},
              .memory = gpusched::common::MiB{10000}}}});
      json p = {{"metadata",
                 {{"name", "fill-" + std::to_string(i) + "-" + std::to_string(s)},
                  {"namespace", "default"},
                  {"uid", "fill-" + std::to_string(i) + "-" + std::to_string(s)},
                  {"annotations", {{"gpusched.io/allocation", gpusched::kube::EncodeAllocation(a)}}}}},
                {"spec", {{"nodeName", names.back()}}}};
      mirror.OnPod(ext::EventType::kAdded, p);
    }
  }
  {
    auto lock = mirror.ReadLock();
    std::cout << "cluster: " << mirror.state().NodeCount() << " nodes x 8 GPUs, " << mirror.state().AllocationCount()
              << " shares on half of them, " << mirror.state().AllocatedMilli().value() / 1000.0 << " GPUs allocated\n";
  }

  NullBinder binder;
  ext::ExtenderMetrics metrics;
  auto service = ext::ExtenderService::Create(mirror, binder, nullptr,
                                              ext::ServiceOptions{.policy = "binpack", .seed = 1}, &metrics);
  if (!service.ok()) {
    std::cerr << service.status() << "\n";
    return 1;
  }
  ext::ExtenderConfig config;
  config.host = "127.0.0.1";
  config.port = 0;
  config.threads = threads;
  ext::ExtenderServer server(**service, mirror, metrics, config, nullptr);
  if (auto s = server.Start(); !s.ok()) {
    std::cerr << s << "\n";
    return 1;
  }
  const int port = server.port();

  std::atomic<uint64_t> pod_counter{0};
  auto pod_json = [&]() {
    ojson p = pod_tmpl;
    const uint64_t n = pod_counter++;
    p["metadata"]["uid"] = "load-" + std::to_string(n);
    p["metadata"]["name"] = "load-pod-" + std::to_string(n);
    return p.dump();
  };
  auto pick = [&](std::mt19937_64& r, int count) {
    std::vector<int> idx(static_cast<size_t>(nodes));
    for (int i = 0; i < nodes; ++i) idx[static_cast<size_t>(i)] = i;
    for (int i = 0; i < count; ++i) {
      std::swap(idx[static_cast<size_t>(i)], idx[static_cast<size_t>(i) + r() % static_cast<size_t>(nodes - i)]);
    }
    idx.resize(static_cast<size_t>(count));
    return idx;
  };
  auto names_body = [&](const std::string& pod, const std::vector<int>& idx) {
    std::string b = "{\"Pod\":" + pod + ",\"Nodes\":null,\"NodeNames\":[";
    for (size_t i = 0; i < idx.size(); ++i) {
      b += (i ? ",\"" : "\"") + names[static_cast<size_t>(idx[i])] + "\"";
    }
    return b + "]}";
  };
  auto full_body = [&](const std::string& pod, const std::vector<int>& idx) {
    std::string b = "{\"Pod\":" + pod + ",\"Nodes\":{\"metadata\":{},\"items\":[";
    for (size_t i = 0; i < idx.size(); ++i) {
      b += (i ? "," : "") + raw_nodes[static_cast<size_t>(idx[i])];
    }
    return b + "]},\"NodeNames\":null}";
  };

  // Big bodies go through libcurl (512 KiB reads), small ones through cpp-httplib's client (less work per request
  // than curl's): each time the client that adds the least of its own cost to what is measured.
  auto measure_at = [&](int at_port, const std::string& what, int count, bool big, auto make_body) {
    Client curl_client(at_port);
    httplib::Client small_client("127.0.0.1", at_port);
    small_client.set_keep_alive(true);
    small_client.set_tcp_nodelay(true);
    auto post = [&](const std::string& body) {
      if (big) {
        return curl_client.Post("/scheduler/filter", body);
      }
      auto res = small_client.Post("/scheduler/filter", body, "application/json");
      return res && res->status == 200;
    };
    std::mt19937_64 r(7);
    std::vector<double> ms;
    size_t bytes = 0;
    for (int i = 0; i < count + 50; ++i) {
      const std::string body = make_body(r);
      const auto start = Clock::now();
      const bool ok = post(body);
      const double t = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
      if (!ok) {
        std::cerr << what << ": request failed\n";
        std::exit(1);
      }
      if (i >= 50) {  // warm-up excluded
        ms.push_back(t);
        bytes += body.size();
      }
    }
    const double p50 = Percentile(ms, 0.5);
    const double p99 = Percentile(ms, 0.99);
    std::printf("%-44s p50 %7.3f ms  p99 %7.3f ms  (%d requests, %.0f KB each)\n", what.c_str(), p50, p99, count,
                static_cast<double>(bytes) / count / 1024.0);
    return p99;
  };
  auto measure = [&](const std::string& what, int count, bool big, auto make_body) {
    return measure_at(port, what, count, big, make_body);
  };
  // The floor under the full-object figure: the same bodies through the same server layer and client to a handler
  // that answers with the request body itself (no decoding, no copy): what loopback TCP, the HTTP layer and the
  // client cost for this many bytes each way on this machine. The extender's own share is the difference.
  auto echo = gpusched::net::HttpServer::Create(
      gpusched::net::HttpServerOptions{.threads = threads,
                                       .limits = gpusched::net::HttpLimits{.max_body_bytes = config.max_body_bytes},
                                       .name = "echo"});
  if (!echo.ok()) {
    std::cerr << echo.status() << "\n";
    return 1;
  }
  (*echo)->Handle("POST", "/scheduler/filter", [](gpusched::net::HttpRequest& req) {
    return gpusched::net::HttpResponse{.content_type = "application/json", .body = std::move(req.body)};
  });
  if (auto s = (*echo)->Start(); !s.ok()) {
    std::cerr << s << "\n";
    return 1;
  }
  const double p99_floor =
      measure_at((*echo)->port(), "floor: echo of the same full-object bodies", std::max(200, requests / 4), true,
                 [&](std::mt19937_64& r) { return full_body(pod_json(), pick(r, candidates)); });
  (*echo)->Stop();
  const double p99_full =
      measure("filter, " + std::to_string(candidates) + " full Node objects", std::max(200, requests / 4), true,
              [&](std::mt19937_64& r) { return full_body(pod_json(), pick(r, candidates)); });
  const double p99_cached =
      measure("filter, " + std::to_string(candidates) + " names (nodeCacheCapable)", requests, false,
              [&](std::mt19937_64& r) { return names_body(pod_json(), pick(r, candidates)); });
  const double p99_all = measure("filter, all " + std::to_string(nodes) + " names (nodeCacheCapable)", requests, false,
                                 [&](std::mt19937_64& r) { return names_body(pod_json(), pick(r, nodes)); });

  // Sustained filter + prioritize pairs from several clients.
  std::vector<std::vector<std::string>> pre(static_cast<size_t>(clients));
  for (int c = 0; c < clients; ++c) {
    std::mt19937_64 r(100 + static_cast<uint64_t>(c));
    for (int i = 0; i < 256; ++i) {
      pre[static_cast<size_t>(c)].push_back(names_body(pod_json(), pick(r, candidates)));
    }
  }
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> done{0};
  std::atomic<uint64_t> failed{0};
  std::vector<std::thread> workers;
  const auto t0 = Clock::now();
  for (int c = 0; c < clients; ++c) {
    workers.emplace_back([&, c] {
      httplib::Client client("127.0.0.1", port);  // one keep-alive connection per client
      client.set_keep_alive(true);
      client.set_tcp_nodelay(true);
      const auto& bodies = pre[static_cast<size_t>(c)];
      for (size_t i = 0; !stop.load(std::memory_order_relaxed); ++i) {
        const std::string& b = bodies[i % bodies.size()];
        auto f = client.Post("/scheduler/filter", b, "application/json");
        auto p = client.Post("/scheduler/prioritize", b, "application/json");
        if (!f || f->status != 200 || !p || p->status != 200) {
          ++failed;
        }
        done += 2;
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(rps_seconds));
  stop = true;
  for (auto& w : workers) {
    w.join();
  }
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  const double rps = static_cast<double>(done.load()) / secs;
  std::printf(
      "sustained filter+prioritize, %d names, %d clients, %d server threads: %.0f requests/s (%.0f pairs/s), "
      "%llu failed\n",
      candidates, clients, threads, rps, rps / 2, static_cast<unsigned long long>(failed.load()));
  server.Stop();
  std::printf("RESULT p99_full_ms=%.3f p99_floor_ms=%.3f p99_cached_ms=%.3f p99_cached5000_ms=%.3f rps=%.0f\n",
              p99_full, p99_floor, p99_cached, p99_all, rps);
  return failed.load() == 0 ? 0 : 1;
}
