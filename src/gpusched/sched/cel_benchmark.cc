// What one CEL device selector costs per device: Program::Matches, which DRA allocation runs for every device of
// every node a claim could use. The selectors are compiled once, outside the timed loop, as the scheduler does.
//
//   build/release/src/gpusched/sched/cel_benchmark --benchmark_repetitions=5

#include <benchmark/benchmark.h>

#include <string>

#include "gpusched/core/dra.h"
#include "gpusched/sched/cel.h"

namespace gpusched::sched::cel {
namespace {

namespace dra = core::dra;

dra::Device Gpu() {
  dra::Device d;
  d.name = "gpu-0";
  for (const char* id : {"uuid", "pciBusID", "family", "architecture", "productName"}) {
    d.attributes[std::string("gpu.gpusched.io/") + id] = dra::AttributeValue::String("some-value");
  }
  d.attributes["gpu.gpusched.io/model"] = dra::AttributeValue::String("A100-80GB");
  d.attributes["gpu.gpusched.io/index"] = dra::AttributeValue::Int(3);
  d.attributes["gpu.gpusched.io/driverVersion"] = dra::AttributeValue::Version("535.104.5");
  d.capacity["gpu.gpusched.io/memory"] = dra::DeviceCapacity{.value = *dra::ParseQuantity("80Gi")};
  d.capacity["gpu.gpusched.io/multiprocessors"] = dra::DeviceCapacity{.value = *dra::ParseQuantity("108")};
  return d;
}

void Run(benchmark::State& state, const char* expression) {
  auto program = Program::Compile(expression);
  if (!program.ok()) {
    state.SkipWithError(program.status().message().c_str());
    return;
  }
  const dra::Device device = Gpu();
  const DeviceInput input{.driver = "gpu.gpusched.io", .device = &device};
  for (auto _ : state) {
    auto matched = program->Matches(input);
    benchmark::DoNotOptimize(matched);
  }
}

void BM_ModelAndMemory(benchmark::State& state) {
  Run(state,
      R"(device.attributes["gpu.gpusched.io"].model == "A100-80GB" &&
         device.capacity["gpu.gpusched.io"].memory.compareTo(quantity("40Gi")) >= 0)");
}
BENCHMARK(BM_ModelAndMemory);

void BM_DriverOnly(benchmark::State& state) { Run(state, R"(device.driver == "gpu.gpusched.io")"); }
BENCHMARK(BM_DriverOnly);

// A version attribute is parsed on each evaluation.
void BM_DriverVersion(benchmark::State& state) {
  Run(state, R"(device.attributes["gpu.gpusched.io"].driverVersion.isGreaterThan(semver("500.0.0")))");
}
BENCHMARK(BM_DriverVersion);

// Keys that are not literals are qualified at run time.
void BM_DomainFromDriver(benchmark::State& state) {
  Run(state, R"(device.attributes[device.driver].model in ["H100-80GB", "A100-80GB"])");
}
BENCHMARK(BM_DomainFromDriver);

void BM_Compile(benchmark::State& state) {
  for (auto _ : state) {
    auto program = Program::Compile(
        R"(device.attributes["gpu.gpusched.io"].model == "A100-80GB" &&
           device.capacity["gpu.gpusched.io"].memory.compareTo(quantity("40Gi")) >= 0)");
    benchmark::DoNotOptimize(program);
  }
}
BENCHMARK(BM_Compile);

}  // namespace
}  // namespace gpusched::sched::cel

BENCHMARK_MAIN();
