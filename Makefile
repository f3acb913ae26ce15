# Entry points for people and CI. The build itself lives in CMakeLists.txt + CMakePresets.json; this file only
# strings the steps together. `make` alone prints the targets.
#   CI=true make test   -> format + layering checks, then preset `ci` (ASan+UBSan, -Werror); else preset `asan`.
#   JOBS=N              -> parallel compile jobs (default: nproc).

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

JOBS ?= $(shell nproc)
CI ?=
ifeq ($(CI),true)
TEST_PRESET := ci
else
TEST_PRESET := asan
endif

RELEASE_PRESET := release
GPUSCHED_BIN := ./build/$(RELEASE_PRESET)/src/gpusched/cli/gpusched
DEMO_OUT := out/demo

.PHONY: help deps build demo test bench format lint clean

help:
	@echo "gpusched make targets:"
	@echo "  deps    install missing Debian packages (scripts/install-deps.sh)"
	@echo "  build   configure (once) and build preset '$(RELEASE_PRESET)'"
	@echo "  demo    build, then run a simulation into $(DEMO_OUT)/"
	@echo "  test    unit + integration tests (not e2e), then benchmark smoke runs, preset '$(TEST_PRESET)'"
	@echo "          (CI=true: preset 'ci' and format + layering checks first)"
	@echo "  bench   build, then bench/sim-speed.sh"
	@echo "  format  clang-format -i the C++ sources"
	@echo "  lint    check formatting and the layering rules (ARCHITECTURE.md section 2)"
	@echo "  clean   remove build/ and out/"
	@echo "variables: JOBS=$(JOBS) CI=$(CI)"

deps:
	bash scripts/install-deps.sh

build: deps
	@test -f build/$(RELEASE_PRESET)/CMakeCache.txt || cmake --preset $(RELEASE_PRESET)
	cmake --build --preset $(RELEASE_PRESET) --parallel $(JOBS)

demo: deps
	@test -f build/$(RELEASE_PRESET)/CMakeCache.txt || cmake --preset $(RELEASE_PRESET)
	cmake --build --preset $(RELEASE_PRESET) --parallel $(JOBS) --target gpusched
	$(GPUSCHED_BIN) simulate --out $(DEMO_OUT)

test: deps
ifeq ($(CI),true)
	bash scripts/check-format.sh
	python3 scripts/check-layering.py
endif
	@test -f build/$(TEST_PRESET)/CMakeCache.txt || cmake --preset $(TEST_PRESET)
	cmake --build --preset $(TEST_PRESET) --parallel $(JOBS)
	ctest --preset $(TEST_PRESET) -LE 'e2e|bench' --output-on-failure
	ctest --preset $(TEST_PRESET) -L bench --output-on-failure

bench: build
	bash bench/sim-speed.sh
	bash bench/fidelity.sh

format:
	bash scripts/format.sh

lint:
	bash scripts/check-format.sh
	python3 scripts/check-layering.py

clean:
	rm -rf build out
