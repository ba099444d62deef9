# dhara: `make run` and `make test` do all the set-up on a fresh Debian 12 machine.
BUILD ?= build
JOBS ?= $(shell nproc)
BUILD_TYPE ?= RelWithDebInfo

.PHONY: all setup build run test bench asan clean

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

bench: build
	@$(BUILD)/bench/dhara_bench_decide
	@$(BUILD)/bench/dhara_bench_runtime
	@$(BUILD)/bench/dhara_bench_checker
	@$(BUILD)/bench/dhara_bench_audit

# Every test again under AddressSanitizer + UndefinedBehaviorSanitizer.
asan: setup
	@cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DDHARA_SANITIZE=ON >/dev/null
	@cmake --build build-asan -j$(JOBS)
	@cd build-asan && ctest --output-on-failure -j$(JOBS) -LE fuzz

clean:
	@rm -rf $(BUILD) build-asan
