# Thin wrapper around CMake. `make demo` and `make test` are the two commands of the README.
BUILD      ?= build
BUILD_ASAN ?= build-asan
CMAKE_GEN  := $(shell command -v ninja >/dev/null 2>&1 && echo "-G Ninja")
JOBS       ?= $(shell nproc)

.PHONY: all build asan deps demo test test-unit test-asan bench bench-sched-e2e bench-replay fuzz faults clean format lint e2e hwkit

all: build

build:
	@test -f $(BUILD)/CMakeCache.txt || cmake -S . -B $(BUILD) $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUSLICE_WERROR=ON
	cmake --build $(BUILD) -j $(JOBS)

# ASan + UBSan, built with clang so the same tree also carries the libFuzzer targets.
asan:
	@test -f $(BUILD_ASAN)/CMakeCache.txt || CC=clang cmake -S . -B $(BUILD_ASAN) $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=Debug \
		-DGPUSLICE_WERROR=ON -DGPUSLICE_SANITIZE=ON -DGPUSLICE_FUZZ=ON
	cmake --build $(BUILD_ASAN) -j $(JOBS)

# The Debian packages of scripts/install-deps.sh: a no-op when all are installed; installs the missing
# ones as root, or prints the `sudo apt-get install` line and fails.
deps:
	@./scripts/install-deps.sh

# demo and test check the packages first, then build (recursive make: the order holds under -j too).
demo: deps
	@$(MAKE) --no-print-directory build
	@./scripts/demo.sh $(BUILD)

# Every test, in both configurations; the last line is the summary CI reads.
test: deps
	@$(MAKE) --no-print-directory build asan
	@./scripts/run-tests.sh $(BUILD) $(BUILD_ASAN)

test-unit: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# gpuslice on real Kubernetes 1.20 (docs/e2e.md); E2E=test_whole.py[:test_name,...] runs a part.
e2e: build
	@./scripts/e2e/run.sh $(BUILD) $(E2E)

# Every section of docs/BENCHMARKS.md, or ONLY=name,... (bench/run.sh --list names them)
bench: build
	@TRACE=$(TRACE) ./bench/run.sh $(if $(ONLY),--only $(ONLY)) $(BUILD)

# The hardware kit (docs/hardware.md): $(BUILD)/gpuslice-hwkit, one folder to copy to a GPU machine and run there
# (`$(BUILD)/gpuslice-hwkit/run.sh --out DIR`); prints its size.
hwkit: build
	@./hwkit/assemble.sh $(BUILD) $(BUILD)/gpuslice-hwkit

# The cluster-packing benchmark (docs/BENCHMARKS.md, replay section): TRACE is the openb trace's directory.
TRACE ?= ../shared/data/openb
bench-replay: build
	@TRACE=$(TRACE) ./bench/run.sh --only replay $(BUILD)

# Pods/s bound by kube-scheduler alone vs with gpuslice's extender, on the e2e control plane (docs/BENCHMARKS.md)
bench-sched-e2e: build
	flock /tmp/gpuslice-e2e.lock /usr/bin/python3 bench/sched-e2e.py --build $(BUILD) $(BENCH_ARGS)

# Long fault-injection run on the fractional path (KILLS, SEED to reproduce; docs/sharing.md).
faults: build
	@/usr/bin/python3 tests/faults/faults.py --build $(BUILD) --source . --topology $(or $(TOPOLOGY),tests/data/topologies/seed000-8gpu-pcie-2socket.topo) \
		--kills $${KILLS:-120} --max-seconds $${FAULTS_SECONDS:-900} $${SEED:+--seed $$SEED}

# Long fuzzing campaigns (FUZZ_SECONDS per target, default 300).
fuzz: asan
	@./scripts/fuzz.sh $(BUILD_ASAN) $${FUZZ_SECONDS:-300}

# clang-format, clang-tidy, shellcheck, layer rules, banned functions, function size (scripts/lint.sh; needs a configured build)
lint: build
	@./scripts/lint.sh --build $(BUILD)

# Apply .clang-format to every C file (generated src/interposer/passthrough.h excepted)
format:
	@find src sim tests bench -name '*.[ch]' -not -path 'src/interposer/passthrough.h' -print0 | \
		xargs -0 clang-format -i --style=file

clean:
	rm -rf $(BUILD) $(BUILD_ASAN)
