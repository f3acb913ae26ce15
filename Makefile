# Entry points for people and CI. The build itself lives in CMakeLists.txt + CMakePresets.json; this file only
# strings the steps together. `make` alone prints the targets.
#   CI=true make test   -> format + layering checks, then preset `ci` (ASan+UBSan, -Werror); else preset `asan`.
#   JOBS=N              -> parallel compile jobs (default: nproc).

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

JOBS ?= $(shell nproc)
FUZZ_SECONDS ?= 20
# The tests whose point is concurrency; `make tsan` builds and runs only these under ThreadSanitizer.
TSAN_TARGETS := net_test scheduler_test extender_test extender_integration_test k8s_client_test agent_test device_plugin_test sched_metrics_test daemon_test common_test deviceplugin_test
TSAN_TESTS := HttpServerTest|SchedulerTest|HttpServerTlsTest|ExtenderIntegrationTest|ServiceTest|K8sClientTest|CollectorTest|DevicePluginTest|MetricsCacheTest|NodePodsTest|ProbeStarvationTest|WorkerThreadTest|TlsReloaderTest|MpsEnforcerTest|MpsDaemonTest
CI ?=
ifeq ($(CI),true)
TEST_PRESET := ci
else
TEST_PRESET := asan
endif

RELEASE_PRESET := release
GPUSCHED_BIN := ./build/$(RELEASE_PRESET)/src/gpusched/cli/gpusched
# make demo builds only the simulator (preset demo: GPUSCHED_SIM_ONLY) from the few packages it needs.
DEMO_LAB := ./build/demo/src/gpusched/cli/gpusched-lab
DEMO_OUT := out/demo

.PHONY: help deps build demo test e2e fuzz tsan bench bench-extender format lint image image-lab clean

help:
	@echo "gpusched make targets:"
	@echo "  deps    install missing Debian packages (scripts/install-deps.sh)"
	@echo "  build   configure (once) and build preset '$(RELEASE_PRESET)'"
	@echo "  demo    build the simulator alone (preset demo), then run the built-in study into $(DEMO_OUT)/"
	@echo "  test    unit, integration and fuzz-replay tests, benchmark smoke runs, the install tree check, then the"
	@echo "          e2e suite (real etcd, kube-apiserver, kube-scheduler; built once by scripts/build-k8s.sh),"
	@echo "          preset '$(TEST_PRESET)'"
	@echo "          (CI=true: preset 'ci', format + layering checks first, the daemon image built as an OCI layout"
	@echo "          and run (scripts/image-smoke.py), then short libFuzzer runs and TSan)"
	@echo "  e2e     only the end-to-end suite (scripts/e2e.sh)"
	@echo "  fuzz    coverage-guided fuzzing of every decoder with clang's libFuzzer (FUZZ_SECONDS=$(FUZZ_SECONDS) each)"
	@echo "  tsan    the concurrency tests (extender, API client) under ThreadSanitizer"
	@echo "  bench-extender  extender latency and throughput on loopback (bench/extender-latency.sh)"
	@echo "  bench   build, then bench/sim-speed.sh"
	@echo "  image   the daemon image from ./Dockerfile (docker, podman or buildah: scripts/build-image.sh)"
	@echo "  image-lab  the lab image (gpusched-lab) from ./Dockerfile.lab"
	@echo "  format  clang-format -i the C++ sources"
	@echo "  lint    check formatting and the layering rules (ARCHITECTURE.md section 2)"
	@echo "  clean   remove build/ and out/"
	@echo "variables: JOBS=$(JOBS) CI=$(CI)"

deps:
	bash scripts/install-deps.sh

build: deps
	@test -f build/$(RELEASE_PRESET)/CMakeCache.txt || cmake --preset $(RELEASE_PRESET)
	cmake --build --preset $(RELEASE_PRESET) --parallel $(JOBS)

demo:
	bash scripts/install-deps.sh --demo
	@test -f build/demo/CMakeCache.txt || cmake --preset demo
	cmake --build --preset demo --parallel $(JOBS)
	$(DEMO_LAB) simulate --seeds 42-51 --policies random,dotprod,gpuclustering,gpupacking,bestfit,fgd,fgd-scarcity \
	  --out $(DEMO_OUT)

test: deps
ifeq ($(CI),true)
	bash scripts/check-format.sh
	python3 scripts/check-layering.py
	python3 scripts/check-rbac.py
	@# make demo's configuration (the simulator alone) still configures: a few seconds, no compile.
	cmake --preset demo >/dev/null
endif
	@# The e2e suite's kube-apiserver and kube-scheduler, built once: started now at nice 19, the Go build takes the
	@# cycles the compile and the unit tests leave idle; scripts/e2e.sh waits for it.
	bash scripts/build-k8s.sh --background
	@test -f build/$(TEST_PRESET)/CMakeCache.txt || cmake --preset $(TEST_PRESET)
	cmake --build --preset $(TEST_PRESET) --parallel $(JOBS)
	ctest --preset $(TEST_PRESET) -LE 'e2e|bench' --output-on-failure -j $(JOBS)
	ctest --preset $(TEST_PRESET) -L bench --output-on-failure -j $(JOBS)
	bash scripts/check-install.sh build/$(TEST_PRESET)
ifeq ($(CI),true)
	python3 scripts/image-smoke.py build/$(TEST_PRESET)
endif
	bash scripts/e2e.sh build/$(TEST_PRESET)
ifeq ($(CI),true)
	bash scripts/fuzz.sh 10
	$(MAKE) tsan
endif

e2e: deps
	@test -f build/$(TEST_PRESET)/CMakeCache.txt || cmake --preset $(TEST_PRESET)
	cmake --build --preset $(TEST_PRESET) --parallel $(JOBS) --target gpusched gpusched-lab
	bash scripts/e2e.sh build/$(TEST_PRESET)

fuzz: deps
	bash scripts/fuzz.sh $(FUZZ_SECONDS)

tsan: deps
	@test -f build/tsan/CMakeCache.txt || cmake --preset tsan
	cmake --build --preset tsan --parallel $(JOBS) --target $(TSAN_TARGETS)
	ctest --preset tsan -R '$(TSAN_TESTS)' --output-on-failure

bench-extender: deps
	bash bench/extender-latency.sh

bench: build
	bash bench/sim-speed.sh
	bash bench/fidelity.sh

image:
	bash scripts/build-image.sh daemons

image-lab:
	bash scripts/build-image.sh lab

format:
	bash scripts/format.sh

lint:
	bash scripts/check-format.sh
	python3 scripts/check-layering.py
	python3 scripts/check-rbac.py

clean:
	rm -rf build out
