# dhara: `make run` and `make test` do all the set-up on a fresh Debian 12 machine.
BUILD ?= build
JOBS ?= $(shell nproc)
BUILD_TYPE ?= RelWithDebInfo

.PHONY: all setup build run test bench asan fuzz tsan ci-extra clean

all: build

setup:
	@scripts/setup

build: setup
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) >/dev/null
	@cmake --build $(BUILD) -j$(JOBS)

run: build
	@scripts/run-demo $(BUILD)

test: build
	@cd $(BUILD) && ctest --output-on-failure -j$(JOBS)

# The Google Benchmark suites repeat each case with dhara's and the baselines' repetitions
# shuffled together, and their summaries take the medians (docs/performance.md): a phase of
# the machine then weighs on both sides alike. BENCH_FLAGS= runs each case once.
BENCH_FLAGS ?= --benchmark_repetitions=3 --benchmark_enable_random_interleaving=true
bench: build
	@$(BUILD)/bench/dhara_bench_decide $(BENCH_FLAGS)
	@$(BUILD)/bench/dhara_bench_jsonrpc $(BENCH_FLAGS)
	@$(BUILD)/bench/dhara_bench_audit_line $(BENCH_FLAGS)
	@$(BUILD)/bench/dhara_bench_checker $(BENCH_FLAGS)
	@$(BUILD)/bench/dhara_bench_audit $(BENCH_FLAGS)
	@$(BUILD)/bench/dhara_bench_runtime
	@$(BUILD)/dhara bench
	@$(BUILD)/dhara bench --runtime node --extensions 1 --inflight 16 --calls 20000

# Sanitizer builds use CMakePresets.json (docs/sanitizers.md). A report in a test process fails
# its test; a report in a process the tests spawn (dhara, extensions) lands in
# <build>/sanitizer-reports and fails the target. A test that fails without a report (a timeout
# of a 5-15x slower sanitized run) gets one more try; every report, of any try, still fails.
FUZZ_SECONDS ?= 20
san_reports = d=$(1)/sanitizer-reports; if [ -n "$$(ls -A $$d 2>/dev/null)" ]; then \
  cat $$d/*; echo "$(2): sanitizer reports above (in $$d)" >&2; rc=1; fi

# Every test again under AddressSanitizer + UndefinedBehaviorSanitizer (preset asan-ubsan).
asan: setup
	@cmake --preset asan-ubsan >/dev/null
	@cmake --build --preset asan-ubsan -j$(JOBS)
	@rm -f build-asan/sanitizer-reports/*
	@rc=0; ctest --preset asan-ubsan -j$(JOBS) --repeat until-pass:2 || rc=$$?; $(call san_reports,build-asan,asan); exit $$rc

# Every libFuzzer target for FUZZ_SECONDS (20 s) under ASan + UBSan: CI's fuzz run. `make test`
# runs them for DHARA_FUZZ_SECONDS (5 s) in build/.
fuzz: setup
	@cmake --preset asan-ubsan -DDHARA_FUZZ_SECONDS=$(FUZZ_SECONDS) >/dev/null
	@cmake --build --preset fuzz -j$(JOBS)
	@ctest --preset fuzz -j$(JOBS)

# ThreadSanitizer over dhara's own concurrent code: the runtime tests and the CLI tests that
# run a concurrent session (preset tsan; CAF-only suppressions in tests/tsan.supp).
tsan: setup
	@cmake --preset tsan >/dev/null
	@cmake --build --preset tsan -j$(JOBS)
	@rm -f build-tsan/sanitizer-reports/*
	@rc=0; ctest --preset tsan -j$(JOBS) --repeat until-pass:2 || rc=$$?; $(call san_reports,build-tsan,tsan); exit $$rc

# The heavier variants CI runs after `make test` (.ci/run).
ci-extra: asan fuzz tsan

clean:
	@rm -rf $(BUILD) build-asan build-tsan
